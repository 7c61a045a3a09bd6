/**
 * Checkpoints of running steps (design D14, R-01): one key per task,
 * `<prefix>:{t:<taskId>}:checkpoint` = `<step>:<JSON>`, with the task record's expiry (the
 * record's hash tag, so a Cluster keeps it on the task's slot). Written only through
 * `saveCheckpoint-2.lua`, fenced like a result; read by the next run of the same step (a
 * checkpoint of another step is not handed over); deleted when the step ends (best effort: the
 * expiry covers a lost delete).
 */
import type { TaskStore, WriteOutcome } from './index.js';
import { loadScripts } from './scripts.js';

/** Checkpoints on the store's Redis and key prefix. */
export class Checkpoints {
  private readonly scripts;

  constructor(readonly store: TaskStore) {
    this.scripts = loadScripts(store.redis);
  }

  /** The task's checkpoint key (see the module doc). */
  key(taskId: string): string {
    return `${this.store.prefix}:{t:${taskId}}:checkpoint`;
  }

  /**
   * Stores `json` (already serialized and size-checked by the caller) as step `step`'s
   * checkpoint, if `fence` is the task's current fence on that step.
   * @returns `ok`, or why not (`fenced`/`stale`: a stale run; `terminal`/`gone`).
   */
  async save(taskId: string, step: number, fence: string, json: string): Promise<WriteOutcome> {
    const r = (await this.scripts.saveCheckpoint(
      this.store.key(taskId),
      this.key(taskId),
      fence,
      String(step),
      json,
    )) as (string | null)[];
    switch (r[0]) {
      case 'ok':
        return { code: 'ok' };
      case 'gone':
        return { code: 'gone' };
      case 'terminal':
        return { code: 'terminal', status: r[1] as never };
      case 'fenced':
      case 'stale':
        return { code: r[0], status: r[1] ?? '' };
      default:
        throw new Error(`unexpected reply from saveCheckpoint: ${JSON.stringify(r)}`);
    }
  }

  /** Step `step`'s checkpoint (parsed), or `undefined` when there is none for that step. */
  async read(taskId: string, step: number): Promise<unknown> {
    const raw = await this.store.redis.get(this.key(taskId));
    if (!raw) return undefined;
    const at = raw.indexOf(':');
    if (at < 0 || raw.slice(0, at) !== String(step)) return undefined;
    return JSON.parse(raw.slice(at + 1));
  }

  /** Deletes the task's checkpoint (its step ended). */
  async remove(taskId: string): Promise<void> {
    await this.store.redis.del(this.key(taskId));
  }

  /**
   * Sets the statusMessage of a task still `working` on step `step` (a system write, no fence:
   * e.g. "Its worker was lost; waiting to resume"). @returns whether it was written.
   */
  async noteStepStatus(taskId: string, step: number, message: string, now = this.store.clock.now()): Promise<boolean> {
    const r = await this.scripts.noteStepStatus(this.store.key(taskId), String(step), message, String(now));
    return Number(r) === 1;
  }
}
