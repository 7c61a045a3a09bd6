/**
 * Loads the Lua transition scripts from `../lua/` and runs them on an ioredis client as plain
 * commands: `EVALSHA`, then `EVAL` once when Redis answers `NOSCRIPT` (a restarted or
 * failed-over Redis that has not seen the script yet). A line `--@include name` is replaced by
 * `../lua/includes/<name>.lua`. The key count comes from the file name (`claimStep-1.lua`).
 *
 * Not ioredis's `defineCommand`, which does the same: ioredis copies every script defined on a
 * connection onto each pipeline it builds for it (each automatic pipeline and each MULTI), 58
 * properties for these 29 scripts, about 4.8 µs of a task creation's gateway CPU
 * (docs/performance.md). Plain commands are not copied, and share the connection's automatic
 * pipeline as before (a Cluster routes them by their first key, as a defined command).
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'lua');

type ScriptFn = (...args: string[]) => Promise<unknown>;
export type Scripts = Record<
  | 'createTask'
  | 'createReserved'
  | 'claimStep'
  | 'reportProgress'
  | 'parkForInput'
  | 'applyInputResponses'
  | 'completeTask'
  | 'completeCounted'
  | 'failTask'
  | 'requestCancel'
  | 'markCancelled'
  | 'renewHolder'
  | 'detachSync'
  | 'reserveOutstanding'
  | 'claimIdempotencyKey'
  | 'releaseIdempotencyKey'
  | 'acquireLease'
  | 'markWebhookQueued'
  | 'enterShare'
  | 'renewShare'
  | 'leaveShare'
  | 'noteWaiting'
  | 'reserveResultBytes'
  | 'releaseResultBytes'
  | 'notePoll'
  | 'markInputSlotReleased'
  | 'saveCheckpoint'
  | 'noteStepStatus',
  ScriptFn
>;

let cache: { name: string; numberOfKeys: number; lua: string; sha: string }[] | undefined;

function readScripts() {
  if (cache) return cache;
  cache = readdirSync(LUA_DIR)
    .filter((f) => f.endsWith('.lua'))
    .map((file) => {
      const m = /^(\w+)-(\d+)\.lua$/.exec(file);
      if (!m) throw new Error(`Lua script name must be <name>-<numKeys>.lua: ${file}`);
      const lua = readFileSync(join(LUA_DIR, file), 'utf8').replace(/^--@include (\w+)$/gm, (_, inc: string) =>
        readFileSync(join(LUA_DIR, 'includes', `${inc}.lua`), 'utf8'),
      );
      return { name: m[1]!, numberOfKeys: Number(m[2]), lua, sha: createHash('sha1').update(lua).digest('hex') };
    });
  return cache;
}

/** Callable wrappers running every task script on `redis` (see the module docstring). */
export function loadScripts(redis: Redis | Cluster): Scripts {
  const out: Record<string, ScriptFn> = {};
  for (const s of readScripts()) {
    out[s.name] = async (...args: string[]) => {
      try {
        return await redis.evalsha(s.sha, s.numberOfKeys, ...args);
      } catch (e) {
        if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw e;
        return redis.eval(s.lua, s.numberOfKeys, ...args);
      }
    };
  }
  return out as Scripts;
}
