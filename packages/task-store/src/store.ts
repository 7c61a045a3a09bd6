/**
 * The task record in Redis (design D3, D4): one hash per task, written only through the
 * Lua scripts in `../lua/` (one file per transition, named `<transition>-<numKeys>.lua`).
 * Knows nothing of HTTP or BullMQ. Keys and channels: layout.ts.
 *
 * `TaskStore` is assembled from one class per concern, each extending the one before:
 *   layout.ts        TaskKeys        key and channel names
 *   store-core.ts    StoreCore       connections, clock, scripts, terminal listeners
 *   slots.ts         PrincipalSlots  a principal's outstanding tasks and listen streams
 *   records.ts       TaskRecords     create, get, remove, reconciler index, nonces
 *   step-writes.ts   StepWrites      the worker's fenced writes
 *   client-writes.ts ClientWrites    answers, cancellation, synchronous calls, progress reads
 */
import { IdempotencyKeys } from './idempotency.js';
import { ClientWrites } from './client-writes.js';
import { OUTSTANDING_REPAIR_EVERY_MS } from './slots.js';

/**
 * Task store bound to one ioredis client and key prefix:
 * `new TaskStore(redis, prefix, clock?, { progressStreamKeepMs?, reader? })` (see `StoreCore`).
 * Every method throws the ioredis error when Redis cannot be reached; callers map it to
 * JSON-RPC `-32603` (or HTTP 503, design D10).
 */
export class TaskStore extends ClientWrites {
  /** Idempotency-Key → task (idempotency.ts), in the principal's slot. */
  readonly idempotency: IdempotencyKeys = new IdempotencyKeys(
    this.redis,
    this.prefix,
    this,
    OUTSTANDING_REPAIR_EVERY_MS,
  );
}
