/**
 * The slot a task-creating `tools/call` takes among its principal's unfinished tasks
 * (MAX_OUTSTANDING_TASKS), counted against the creation rate in the same round trip — before
 * anything runs, so a full principal gets 429 and nothing else happens (docs/architecture.md).
 *
 * Two ways, by topology:
 *  - `reserve`: the slot only (`TaskStore.reserveOutstanding`); `startTask` (task-create.ts)
 *    writes the record and its reconciler index entry later. Always right; the only way under
 *    Redis Cluster, where a principal's keys, a task's and the index are in different slots.
 *  - `reserveAndCreate`: on a single Redis or Sentinel, for a call the hot path serves
 *    (hot-path.ts), the slot, the record and its reconciler index entry in one script
 *    (`TaskStore.createReserved`), sent with the rate count in one write: one round trip
 *    before BullMQ's `add`, instead of two. `startTask` then only enqueues the step. A call the
 *    rate refuses, or a request that ends before the task is used, has its record, slot and
 *    index entry removed at once (the record is never seen: nobody has its id).
 * Either way the arguments were validated before (classify.ts): bad input writes nothing.
 */
import type { FastifyRequest } from 'fastify';
import { newTaskId, TaskIdTakenError, type Reservation, type TaskRecord } from '@mcp-tasks/task-store';
import type { Classification } from './classify.js';
import type { Exchange, Gateway } from './context.js';
import type { LimitRefusal, Limits } from './limits.js';
import { firstCheckMs, removeAbandoned, storedCapabilitiesOf } from './task-create.js';
import { carrierOf } from '@mcp-tasks/observability';
import type { Span } from '@opentelemetry/api';

/** What the route answers: a refusal (429), Redis away (503), or the reservation to carry on with. */
export type SlotOutcome =
  | { kind: 'refused'; refusal: LimitRefusal }
  | { kind: 'unavailable' }
  | { kind: 'reserved'; reservation: NonNullable<Exchange['reservation']> };

/** True when this topology lets the slot, the record and the index share a script (not Cluster). */
export const canCreateInOneScript = (gw: Gateway) => gw.config.redis.mode !== 'cluster';

/**
 * Reserves the slot (and, with `create`, writes the task) for a call that starts work, counting
 * it against the creation rate in the same round trip (see the module docstring).
 * @param create the call's tool, arguments and span when the task may be written now
 *        (`canCreateInOneScript` and the hot path serves the call); otherwise only the slot.
 */
export async function takeCreationSlot(
  gw: Gateway,
  limits: Limits,
  req: FastifyRequest,
  principal: string,
  c: Classification,
  create?: { span: Span | undefined },
): Promise<SlotOutcome> {
  const { config, store, log } = gw;
  const taskId = newTaskId();
  const now = store.clock.now();
  const max = config.maxOutstandingTasks;
  const tool = c.tool!;
  const write: Promise<Reservation & { rec?: TaskRecord }> = create
    ? (async () => {
        const trace = carrierOf(create.span);
        const note = await gw.workerTools?.noteFor(tool.name);
        const r = await store.createReserved(
          {
            owner: principal,
            tool: tool.name,
            args: c.args,
            mode: 'task',
            ttlMs: config.task.ttlMs,
            pollIntervalMs: config.task.pollIntervalMs,
            clientCapabilities: storedCapabilitiesOf(c),
            ...(trace ? { trace } : {}),
            ...(note ? { statusMessage: note } : {}),
          },
          taskId,
          max,
          { afterMs: firstCheckMs(gw, 'task'), maxTtlMs: config.task.ttlMs },
          now,
        );
        return r;
      })()
    : store.reserveOutstanding(principal, taskId, max, now + config.task.ttlMs, now);
  const [refused, r] = await Promise.all([
    limits.creation(req, principal),
    // A refused write (Redis full under noeviction: OOM, case B-15) or an unreachable Redis:
    // 503, nothing written (a script runs whole or not at all). The Redis error goes to the
    // log only. A lost reply of a write that landed: removed once Redis answers (D4).
    write.catch((e: Error) => {
      log.error({ err: e.message, tool: tool.name }, 'task.reserve_failed');
      if (create && !(e instanceof TaskIdTakenError)) void removeAbandoned(gw, taskId, principal);
      return undefined;
    }),
  ]);
  if (refused) {
    // Undone before the 429 is sent: a refused call leaves nothing behind once it is answered.
    if (r?.ok) await undoSlot(gw, principal, taskId, r.rec !== undefined);
    return { kind: 'refused', refusal: refused };
  }
  if (!r) return { kind: 'unavailable' };
  if (!r.ok)
    return {
      kind: 'refused',
      refusal: {
        limit: 'outstanding_tasks',
        max,
        retryAfterS: Math.max(1, Math.ceil(config.task.pollIntervalMs / 1000)),
      },
    };
  return {
    kind: 'reserved',
    reservation: { taskId, priority: r.count, used: false, ...(r.rec ? { created: r.rec } : {}) },
  };
}

/**
 * Gives back a slot the request did not use; a task written with it (`reserveAndCreate`) is
 * removed too (record and keys; the reconciler drops an index entry whose record is gone).
 */
export async function undoSlot(gw: Gateway, principal: string, taskId: string, created: boolean): Promise<void> {
  // Best effort: a failure leaves a record nobody knows the id of, which expires with its TTL,
  // and a slot the reconciler frees.
  await Promise.all([
    created ? gw.store.remove(taskId).catch(() => undefined) : undefined,
    gw.store.releaseOutstanding(principal, taskId).catch(() => undefined),
  ]);
}
