/**
 * The ceilings of the benchmark (issue 8 §5): the least a server must do for `tasks/get` and
 * for task creation, as a tiny Fastify app on the same Redis. A child process of bench/run.ts;
 * sends `{ ready: port }` over IPC once listening.
 *
 *   POST /get     parses the JSON-RPC body, one HGETALL of the task's key, answers the hash
 *   POST /create  parses the body, one Lua record write (the task store's own createTask-1.lua,
 *                 the same fields as a real record) and one BullMQ `add` (the same job options
 *                 as a real step job) on a queue nobody consumes, answers the task id
 *
 * Environment: REDIS_URL, CEILING_PREFIX (key prefix of the measured service: /get reads its
 * records), CEILING_RECORD (JSON object: the fields of a real task record, the template /create
 * writes), CEILING_TTL_MS.
 * Connections are made like the gateway's (`createRedis(config.redis, 'request')`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { Queue } from 'bullmq';
import { createRedis, jobRetention, fairPriority } from '@mcp-tasks/jobs';
import { newTaskId, stepJobId } from '@mcp-tasks/task-store';
import { ROOT } from '../scripts/build.mjs';

const prefix = process.env.CEILING_PREFIX!;
const ttlMs = Number(process.env.CEILING_TTL_MS ?? 86_400_000);
const template = Object.entries(JSON.parse(process.env.CEILING_RECORD ?? '{}') as Record<string, string>).flat();
const redis = createRedis({ mode: 'single', url: process.env.REDIS_URL!, tls: false }, 'request', 'bench-ceiling');
await redis.connect();
redis.defineCommand('createTask', {
  numberOfKeys: 1,
  lua: readFileSync(join(ROOT, 'packages', 'task-store', 'lua', 'createTask-1.lua'), 'utf8'),
});
const createTask = (
  redis as unknown as { createTask(key: string, ...args: string[]): Promise<number> }
).createTask.bind(redis);
// Another prefix than the service's queues: nothing consumes these jobs. The queue has its own
// connection, as in the gateway (BullMQ's scripts on the read connection make every pipeline dearer).
const queueRedis = createRedis(
  { mode: 'single', url: process.env.REDIS_URL!, tls: false },
  'queue',
  'bench-ceiling-queue',
);
await queueRedis.connect();
const queue = new Queue('tools', {
  connection: queueRedis,
  prefix: `${prefix}:{ceiling}`,
  streams: { events: { maxLen: 1000 } },
});
const retention = jobRetention(ttlMs);

interface RpcBody {
  id?: unknown;
  params?: { taskId?: string };
}

const app = Fastify({ logger: false });
app.post('/get', async (req) => {
  const body = req.body as RpcBody;
  const h = await redis.hgetall(`${prefix}:{t:${body.params?.taskId}}:task`);
  return { jsonrpc: '2.0', id: body.id ?? null, result: h };
});
app.post('/create', async (req) => {
  const body = req.body as RpcBody;
  const taskId = newTaskId();
  const now = Date.now();
  await createTask(`${prefix}:{t:${taskId}}:task`, String(now + ttlMs), ...template);
  await queue.add(
    'step',
    { taskId, step: 1 },
    { jobId: stepJobId(taskId, 1), attempts: 1, priority: fairPriority(1), ...retention },
  );
  return { jsonrpc: '2.0', id: body.id ?? null, result: { resultType: 'task', task: { taskId, status: 'working' } } };
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.send!({ ready: (app.server.address() as { port: number }).port });
process.on('disconnect', () => {
  void app.close().finally(() => process.exit(0));
});
