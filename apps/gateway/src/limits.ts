/**
 * Per-principal rate limits (design D9; issue "Safe to expose" §4; case N-08), counted in Redis
 * by `@fastify/rate-limit`'s Redis store so a limit holds across every replica (a principal gets
 * about the limit, not the limit × replicas):
 *  - requests: every authenticated `POST /mcp` (RATE_LIMIT_REQUESTS_PER_MIN, default 3600/min);
 *  - task creations: every `tools/call` that starts work on a worker, as a task or as a
 *    synchronous call (RATE_LIMIT_TASK_CREATIONS_PER_MIN, default 120/min). A retry that carries
 *    a `requestState` continues earlier work and is not counted.
 * A refusal is HTTP 429 with `Retry-After` (seconds) and a JSON-RPC error body carrying the
 * request's id: code `-31429` (an application code, outside the range JSON-RPC and MCP reserve),
 * `data: { limit, max, retryAfterS }`. Nothing else is written for a refused request.
 *
 * Keys: `<prefix>:rl:…<kind>:<SHA-256 of the principal>` (one counter per principal and window, with the
 * window's PEXPIRE). When Redis does not answer, requests are let through (`skipOnError`): the
 * methods that need Redis answer 503 themselves.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '@mcp-tasks/jobs';
import type { Config } from '@mcp-tasks/config';
import { principalTag } from '@mcp-tasks/task-store';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

/** Which limit refused a request (`error.data.limit`). */
export type LimitName = 'requests_per_minute' | 'task_creations_per_minute' | 'outstanding_tasks' | 'listen_streams';

/** A refused request: what to tell the client. */
export interface LimitRefusal {
  limit: LimitName;
  max: number;
  retryAfterS: number;
}

export interface Limits {
  /** Counts a request of `principal`; a refusal when over the per-minute limit. */
  request(req: FastifyRequest, principal: string): Promise<LimitRefusal | undefined>;
  /** Counts a task creation of `principal`; a refusal when over the per-minute limit. */
  creation(req: FastifyRequest, principal: string): Promise<LimitRefusal | undefined>;
}


const WINDOW_MS = 60_000;
const LIMIT_KEY = Symbol('limitKey');

/** Registers `@fastify/rate-limit` (no global hook) and builds the two limiters. */
export async function registerLimits(app: FastifyInstance, redis: RedisClient, config: Config): Promise<Limits> {
  await app.register(rateLimit, { global: false, redis, nameSpace: `${config.keyPrefix}:rl:`, skipOnError: true });
  const keyOf = (req: FastifyRequest) => (req as unknown as Record<symbol, string>)[LIMIT_KEY]!;
  const requests = app.createRateLimit({ max: config.limits.requestsPerMin, timeWindow: WINDOW_MS, keyGenerator: keyOf });
  const creations = app.createRateLimit({ max: config.limits.taskCreationsPerMin, timeWindow: WINDOW_MS, keyGenerator: keyOf });
  const check = async (limiter: typeof requests, kind: string, limit: LimitName, max: number, req: FastifyRequest, principal: string) => {
    (req as unknown as Record<symbol, string>)[LIMIT_KEY] = `${kind}:${principalTag(principal)}`;
    // `isAllowed` only means "in the allow list"; `isExceeded` says the limit was passed.
    const r = await limiter(req);
    if (r.isAllowed || !r.isExceeded) return undefined;
    return { limit, max, retryAfterS: Math.max(1, r.ttlInSeconds) };
  };
  return {
    request: (req, principal) => check(requests, 'req', 'requests_per_minute', config.limits.requestsPerMin, req, principal),
    creation: (req, principal) => check(creations, 'new', 'task_creations_per_minute', config.limits.taskCreationsPerMin, req, principal),
  };
}

const DESCRIBE: Record<LimitName, string> = {
  requests_per_minute: 'requests per minute',
  task_creations_per_minute: 'new tasks per minute',
  outstanding_tasks: 'unfinished tasks at a time',
  listen_streams: 'open task listen streams',
};

/** Writes the 429 answer for a refusal (HTTP `Retry-After` + JSON-RPC error with the request id). */
export function sendRefusal(reply: FastifyReply, id: unknown, r: LimitRefusal): FastifyReply {
  return reply
    .code(429)
    .header('retry-after', String(r.retryAfterS))
    .send(
      jsonRpcErrorBody(id, ErrorCode.LimitExceeded, `Limit exceeded: at most ${r.max} ${DESCRIBE[r.limit]} per principal; retry after ${r.retryAfterS} s`, {
        limit: r.limit,
        max: r.max,
        retryAfterS: r.retryAfterS,
      }),
    );
}
