/**
 * The tasks a principal created through 2025-11-25 task-augmented `tools/call` (LG-13: `tasks/list`
 * returns the caller's tasks only, and every task `tasks/get` finds is listed), kept in Redis so
 * any replica lists them.
 *
 * Key: `<prefix>:{lt:<digest of the principal>}:tasks`, a sorted set: member the task id, score
 * its `createdAt` (ms). Its expiry is pushed to the newest task's end of life (createdAt + ttl)
 * at each write, and members whose records have expired are dropped as the list meets them, so
 * the set never outlives its tasks. The principal itself never appears in a key name.
 *
 * Pages go from the oldest to the newest; the cursor is opaque to clients (base64url of the last
 * score and id seen), so a page is stable while tasks are added or expire.
 */
import { createHash } from 'node:crypto';
import type { TaskRecord } from '@mcp-tasks/task-store';
import type { Gateway } from './context.js';
import { invalidParams } from './errors.js';

/** Tasks per `tasks/list` page. */
export const LIST_PAGE_SIZE = 50;

function indexKey(gw: Gateway, principal: string): string {
  const tag = createHash('sha256').update(principal).digest('hex').slice(0, 32);
  return `${gw.config.keyPrefix}:{lt:${tag}}:tasks`;
}

/** Adds `rec` to its owner's list (expiry: the end of its life, or later for a newer task). */
export async function indexLegacyTask(gw: Gateway, rec: TaskRecord): Promise<void> {
  const k = indexKey(gw, rec.owner);
  const end = rec.createdAt + rec.ttlMs;
  const ttl = await gw.store.redis.pttl(k);
  const m = gw.store.redis.multi().zadd(k, rec.createdAt, rec.taskId);
  if (ttl < end - gw.store.clock.now()) m.pexpireat(k, end);
  await m.exec();
}

interface Cursor {
  s: number;
  id: string;
}

function decodeCursor(cursor: unknown): Cursor | undefined {
  if (cursor === undefined) return undefined;
  // A cursor is always a string this gateway wrote: anything else is invalid.
  if (typeof cursor !== 'string') throw invalidParams('Invalid cursor');
  try {
    const c = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Cursor;
    if (typeof c.s === 'number' && typeof c.id === 'string') return c;
  } catch {
    /* below */
  }
  throw invalidParams('Invalid cursor');
}

const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify(c)).toString('base64url');

/**
 * One page of `principal`'s tasks, oldest first, as records (expired ones dropped from the list).
 * @param cursor the previous page's `nextCursor` (opaque; `-32602` when it is not one of ours).
 * @returns the records and, when more may follow, the cursor of the next page.
 */
export async function listLegacyTasks(
  gw: Gateway,
  principal: string,
  cursor: unknown,
): Promise<{ records: TaskRecord[]; nextCursor?: string }> {
  const from = decodeCursor(cursor);
  const k = indexKey(gw, principal);
  const records: TaskRecord[] = [];
  let after = from;
  for (let rounds = 0; rounds < 10 && records.length < LIST_PAGE_SIZE; rounds++) {
    // Members from the cursor's score on (ties broken by id), one page and a little more.
    const flat = await gw.store.redis.zrangebyscore(
      k,
      after ? after.s : '-inf',
      '+inf',
      'WITHSCORES',
      'LIMIT',
      0,
      LIST_PAGE_SIZE + 20,
    );
    const rows: Cursor[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) rows.push({ id: flat[i]!, s: Number(flat[i + 1]) });
    const fresh = after ? rows.filter((r) => r.s > after!.s || (r.s === after!.s && r.id > after!.id)) : rows;
    if (!fresh.length) return { records };
    const recs = await Promise.all(fresh.map((r) => gw.store.get(r.id).catch(() => null)));
    const gone: string[] = [];
    for (const [i, r] of fresh.entries()) {
      const rec = recs[i];
      if (!rec || rec.owner !== principal || rec.mode !== 'task') gone.push(r.id);
      else records.push(rec);
      after = r;
      if (records.length === LIST_PAGE_SIZE) break;
    }
    if (gone.length) await gw.store.redis.zrem(k, ...gone).catch(() => 0);
    if (rows.length < LIST_PAGE_SIZE + 20 && after === fresh[fresh.length - 1]) return { records };
  }
  return { records, ...(after ? { nextCursor: encodeCursor(after) } : {}) };
}
