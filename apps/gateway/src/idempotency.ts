/**
 * Idempotent creation (docs/architecture.md, "Idempotent creation"): a `tools/call` that starts
 * work and carries an `Idempotency-Key` header (the IETF httpapi draft "The Idempotency-Key HTTP
 * Header Field") gets the task an earlier call of the same principal with the same key, tool and
 * arguments created, for as long as that task lives (TASK_TTL_MS), on any gateway: the key lives
 * in Redis (packages/task-store idempotency.ts).
 *
 *  - format: the draft's structured-field String (`"…"`, RFC 8941), or the same characters bare
 *    (`Idempotency-Key: 8e03978e-…`, as most APIs send it); 1..IDEMPOTENCY_KEY_MAX_CHARS
 *    printable ASCII characters. Anything else: `-32602`, HTTP 400, before anything is counted.
 *  - the same key with another tool or other arguments, or from a client of the other lane (with
 *    vs without the Tasks extension): `-32602`, HTTP 422 (the draft's status for a reused key),
 *    nothing written.
 *  - a replay counts as a request (RATE_LIMIT_REQUESTS_PER_MIN), not as a creation, and takes no
 *    slot among the principal's unfinished tasks.
 *  - a first call claims the key and reserves its outstanding slot in one script
 *    (`claimIdempotencyKey-3.lua`), after the creation rate let it through, so a refused request
 *    writes no key. Two identical calls at once: one claims, the other waits for the claimed
 *    task's record (a claim's record follows within one command timeout) and replays it.
 *  - a claim whose record never appeared within IDEMPOTENCY_CLAIM_GRACE_MS (its gateway died
 *    between the two writes) is taken over; a creation that fails releases its claim
 *    (task-create.ts), and so does a request that ends before it created its task (the route).
 * Calls of a tool with questions before its task (`preTask`) do not use the key: their first
 * request creates nothing, and the request that does carries a single-use `requestState`.
 */
import type { FastifyRequest } from 'fastify';
import { parseItem } from 'structured-headers';
import { fingerprintOf, IDEMPOTENCY_CLAIM_GRACE_MS, newTaskId, type TaskRecord } from '@mcp-tasks/task-store';
import type { Classification } from './classify.js';
import type { Gateway } from './context.js';
import type { LimitRefusal, Limits } from './limits.js';

/** The header (lower case, as Node gives it). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** While another request's creation of the keyed task is in flight, look again this often (ms). */
const IN_FLIGHT_POLL_MS = 50;

/** What a keyed request carries along (`Exchange.idempotency`). */
export interface Idempotency {
  key: string;
  /** `fingerprintOf` the tool and arguments. */
  fp: string;
  /** The task an earlier call with this key created (a replay): answered instead of a new one. */
  replay?: TaskRecord;
}

/** A bare key: visible ASCII without `"` and `\` (those need the quoted form). */
const BARE = /^[!#-[\]-~]+$/;
/** A key's characters: printable ASCII (what an sf-string can hold). */
const PRINTABLE = /^[ -~]+$/;

/**
 * Parses the `Idempotency-Key` header.
 * @returns undefined when absent, `{key}`, or `{error}`: why it is refused (`-32602`, HTTP 400).
 */
export function parseIdempotencyKey(
  header: string | string[] | undefined,
  maxChars: number,
): { key: string } | { error: string } | undefined {
  if (header === undefined) return undefined;
  const raw = (Array.isArray(header) ? header.join(', ') : header).trim();
  let key: string;
  if (raw.startsWith('"')) {
    let item;
    try {
      item = parseItem(raw);
    } catch {
      return { error: 'not one structured-field string (more than one key, or a malformed quoted string)' };
    }
    if (typeof item[0] !== 'string' || item[1].size > 0) return { error: 'a string without parameters is expected' };
    key = item[0];
  } else {
    if (!BARE.test(raw)) return { error: 'a quoted string, or visible ASCII characters without spaces, is expected' };
    key = raw;
  }
  if (!key || !PRINTABLE.test(key)) return { error: 'the key is empty' };
  if (key.length > maxChars) return { error: `the key is longer than ${maxChars} characters` };
  return { key };
}

/** The message of a `-32602` for a bad header. */
export function badKeyMessage(why: string, maxChars: number): string {
  return `Invalid Idempotency-Key header: ${why}. Send one key of 1-${maxChars} printable ASCII characters, e.g. Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`;
}

/** What the route does with a keyed request that starts work. */
export type Resolution =
  /** Answer with the earlier task (no reservation, no creation counted). */
  | { kind: 'replay'; idem: Idempotency }
  /** Create the task: the key and the slot are taken for `taskId`. */
  | { kind: 'claimed'; idem: Idempotency; taskId: string; priority: number; at: number }
  /** `-32602`, HTTP 422: the key belongs to another call. */
  | { kind: 'reused'; message: string }
  /** A per-principal limit (429). */
  | { kind: 'limit'; refusal: LimitRefusal }
  /** Redis did not answer (503). */
  | { kind: 'unavailable' };

/**
 * Resolves a keyed request that starts work (see the module docstring): replay, claim, or refuse.
 * @throws nothing; a Redis failure is `unavailable`.
 */
export async function resolveIdempotent(
  gw: Gateway,
  limits: Limits,
  req: FastifyRequest,
  c: Classification,
  principal: string,
  key: string,
): Promise<Resolution> {
  const { store, config, log } = gw;
  const keys = store.idempotency;
  const idem: Idempotency = { key, fp: fingerprintOf(c.tool!.name, c.args) };
  let counted = false;
  let takeOver = '';
  try {
    for (;;) {
      const entry = await keys.find(principal, key);
      if (entry && entry.taskId !== takeOver) {
        if (entry.fp !== idem.fp) return { kind: 'reused', message: REUSED_OTHER_CALL };
        const rec = await store.get(entry.taskId);
        if (rec && rec.owner === principal) {
          if (c.lane === 'task' && rec.mode === 'sync') return { kind: 'reused', message: REUSED_OTHER_LANE };
          // A replay is a request, not a creation.
          if (!counted) {
            const refused = await limits.request(req, principal);
            if (refused) return { kind: 'limit', refusal: refused };
          }
          log.info({ taskId: rec.taskId, principal, status: rec.status }, 'task.idempotent_replay');
          return { kind: 'replay', idem: { ...idem, replay: rec } };
        }
        // No record: its creation is in flight (wait for it), or it died (take the key over).
        if (store.clock.now() - entry.at < IDEMPOTENCY_CLAIM_GRACE_MS) {
          await new Promise((r) => setTimeout(r, IN_FLIGHT_POLL_MS));
          continue;
        }
        takeOver = entry.taskId;
        log.warn({ taskId: entry.taskId, principal }, 'task.idempotency_claim_taken_over');
      }
      if (!counted) {
        const refused = await limits.creation(req, principal);
        if (refused) return { kind: 'limit', refusal: refused };
        counted = true;
      }
      const taskId = newTaskId();
      const now = store.clock.now();
      const max = config.maxOutstandingTasks;
      const r = await keys.claim(principal, key, idem.fp, taskId, max, now + config.task.ttlMs, now, takeOver);
      if (r.code === 'ok') return { kind: 'claimed', idem, taskId, priority: r.count, at: now };
      if (r.code === 'full')
        return {
          kind: 'limit',
          refusal: {
            limit: 'outstanding_tasks',
            max,
            retryAfterS: Math.max(1, Math.ceil(config.task.pollIntervalMs / 1000)),
          },
        };
      // Another request claimed it meanwhile: look again (its record follows).
      takeOver = '';
    }
  } catch (e) {
    log.error({ err: (e as Error).message, tool: c.tool?.name }, 'task.idempotency_failed');
    return { kind: 'unavailable' };
  }
}

const REUSED_OTHER_CALL =
  'Idempotency-Key already used: it names a task this principal created with another tool or other arguments. Use a new key for a new call.';
const REUSED_OTHER_LANE =
  'Idempotency-Key already used: it names a call made without the io.modelcontextprotocol/tasks extension. Retry it without the extension, or use a new key.';
