/**
 * Loads the Lua transition scripts from `../lua/` and registers them on an ioredis client
 * with `defineCommand` (EVALSHA with EVAL fallback). A line `--@include name` is replaced by
 * `../lua/includes/<name>.lua`. The key count comes from the file name (`claimStep-1.lua`).
 */
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

let cache: { name: string; numberOfKeys: number; lua: string }[] | undefined;

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
      return { name: m[1]!, numberOfKeys: Number(m[2]), lua };
    });
  return cache;
}

/** Defines every task script on `redis` (idempotent per client) and returns callable wrappers. */
export function loadScripts(redis: Redis | Cluster): Scripts {
  const out: Record<string, ScriptFn> = {};
  for (const s of readScripts()) {
    const cmd = `mcpTask_${s.name}`;
    if (!(cmd in redis)) redis.defineCommand(cmd, { numberOfKeys: s.numberOfKeys, lua: s.lua });
    const fn = (redis as unknown as Record<string, ScriptFn>)[cmd]!;
    out[s.name] = (...args: string[]) => fn.apply(redis, args);
  }
  return out as Scripts;
}
