/**
 * The TypeScript SDK 1.32 (`@modelcontextprotocol/sdk`, the 2025-11-25 generation most clients
 * still ship; installed in tools/typescript-sdk) against this service, run by
 * test/e2e/typescript-sdk-client.test.ts. It connects once (initialize, 2025-11-25, a session),
 * with an API key, declaring elicitation (form) and the 2025-11-25 tasks capability, then:
 *  - connect: the negotiated protocol version (2025-11-25);
 *  - deep_research and share_report: their questions reach the elicitation handler (answered
 *    audience "team", notify true) and the results carry the answers;
 *  - countdown {3} with an onprogress handler: at least three progress notifications;
 *  - countdown {10} aborted after 1.5 s (the SDK sends notifications/cancelled): its task is
 *    `cancelled` in Redis within 3 s;
 *  - with TASKS=1, the experimental tasks client (client.experimental.tasks): callToolStream of
 *    countdown {2} with `task: {ttl}` (taskCreated … result), getTask, listTasks, deep_research as
 *    a task (its question comes as elicitation/create on the tasks/result stream; the result
 *    carries the related-task `_meta`), and a cancelTask of a countdown {10} task (`cancelled` in
 *    the answer and in Redis).
 *
 *   node test/clients/typescript_sdk_client.mjs URL KEY REDIS_PREFIX REDIS_URL
 *
 * Prints one JSON line per call: {client, mode, call, ok, detail, ms}; exits 0 either way (1
 * when it cannot connect).
 */
import { Redis } from 'ioredis';

const SDK = new URL('../../tools/typescript-sdk/node_modules/@modelcontextprotocol/sdk/dist/esm/', import.meta.url);
const { Client } = await import(new URL('client/index.js', SDK).href);
const { StreamableHTTPClientTransport } = await import(new URL('client/streamableHttp.js', SDK).href);
const { ElicitRequestSchema, CallToolResultSchema } = await import(new URL('types.js', SDK).href);

const [URL_, KEY, PREFIX, REDIS_URL = 'redis://127.0.0.1:6379'] = process.argv.slice(2);
const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });

const report = (call, ok, detail, ms) =>
  console.log(
    JSON.stringify({
      client: 'typescript-sdk',
      mode: 'legacy',
      call,
      ok,
      detail: String(detail).slice(0, 300),
      ms: Math.round(ms),
    }),
  );

/** Every countdown task under PREFIX: taskKey → [status, lastUpdatedAt ms]. */
async function countdownTasks() {
  const out = {};
  for await (const keys of redis.scanStream({ match: `${PREFIX}:{t:*}:task`, count: 500 }))
    for (const k of keys) {
      const [tool, status, updated] = await redis.hmget(k, 'tool', 'status', 'lastUpdatedAt');
      if (tool === 'countdown') out[k] = [status, Number(updated)];
    }
  return out;
}

const answerFor = (message) =>
  /Who is the report/.test(message) ? { audience: 'team' } : /Share to/.test(message) ? { notify: true } : {};

const asked = [];
const client = new Client(
  { name: 'typescript-sdk-1.32', version: '1.32.2' },
  {
    capabilities: {
      elicitation: { form: {} },
      tasks: { list: {}, cancel: {}, requests: {} },
    },
  },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return { action: 'accept', content: answerFor(req.params.message) };
});
const transport = new StreamableHTTPClientTransport(new globalThis.URL(URL_), {
  requestInit: { headers: { Authorization: `Bearer ${KEY}` } },
});
try {
  await client.connect(transport);
} catch (e) {
  console.error(`connect failed: ${e.message}`);
  redis.disconnect();
  process.exit(1);
}
report('connect', transport.protocolVersion === '2025-11-25', `protocol ${transport.protocolVersion}`, 0);

const textOf = (r) => (r?.content ?? []).map((c) => c.text ?? '').join(' ');
const timed = async (name, fn) => {
  const t0 = performance.now();
  try {
    const [ok, detail] = await fn();
    report(name, ok, detail, performance.now() - t0);
  } catch (e) {
    report(name, false, `${e.name}: ${e.message}`, performance.now() - t0);
  }
};

await timed('deep_research', async () => {
  const r = await client.callTool({ name: 'deep_research', arguments: { topic: 'typescript sdk' } });
  return [r.structuredContent?.audience === 'team' && asked.length === 1, r.structuredContent?.summary ?? textOf(r)];
});
await timed('share_report', async () => {
  const r = await client.callTool({ name: 'share_report', arguments: { channel: '#ts' } });
  return [r.structuredContent?.notify === true && asked.length === 2, r.structuredContent?.summary ?? textOf(r)];
});
await timed('countdown3+progress', async () => {
  const progress = [];
  const r = await client.callTool({ name: 'countdown', arguments: { seconds: 3 } }, undefined, {
    onprogress: (p) => progress.push(p.progress),
  });
  return [/finished/.test(textOf(r)) && progress.length >= 3, `${textOf(r)} progress=${JSON.stringify(progress)}`];
});
{
  const before = await countdownTasks();
  const abort = new AbortController();
  const call = client
    .callTool({ name: 'countdown', arguments: { seconds: 10 } }, undefined, { signal: abort.signal })
    .catch((e) => e);
  await new Promise((r) => setTimeout(r, 1500));
  abort.abort('cancelled by the test');
  const cancelledAt = Date.now();
  // When the record says it became cancelled (lastUpdatedAt) is what must be within 3 s.
  let fresh = {};
  const done = () => Object.keys(fresh).length > 0 && Object.values(fresh).every(([s]) => s === 'cancelled');
  while (Date.now() - cancelledAt < 20_000) {
    const now = await countdownTasks();
    fresh = Object.fromEntries(Object.entries(now).filter(([k]) => !(k in before)));
    if (done()) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const ms = done() ? Math.max(...Object.values(fresh).map(([, at]) => at - cancelledAt)) : Date.now() - cancelledAt;
  const statuses = Object.fromEntries(Object.entries(fresh).map(([k, [s]]) => [k, s]));
  report(
    'cancel countdown10',
    done() && ms < 3000,
    `${JSON.stringify(statuses)} seen after ${Date.now() - cancelledAt} ms`,
    ms,
  );
  await call;
}

if (process.env.TASKS === '1') {
  const tasks = client.experimental.tasks;
  let created;
  await timed('tasks: callToolStream countdown2', async () => {
    const seen = [];
    let result;
    for await (const m of tasks.callToolStream({ name: 'countdown', arguments: { seconds: 2 } }, CallToolResultSchema, {
      task: { ttl: 60_000 },
    })) {
      seen.push(m.type === 'taskStatus' ? `taskStatus:${m.task.status}` : m.type);
      if (m.type === 'taskCreated') created = m.task.taskId;
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
    return [Boolean(created) && /finished/.test(textOf(result)), `${seen.join(',')} ${textOf(result)}`];
  });
  await timed('tasks: getTask', async () => {
    const t = await tasks.getTask(created);
    return [t.taskId === created && t.status === 'completed', JSON.stringify(t)];
  });
  await timed('tasks: listTasks', async () => {
    const l = await tasks.listTasks();
    return [l.tasks.some((t) => t.taskId === created), `${l.tasks.length} task(s)`];
  });
  await timed('tasks: deep_research answers its question on tasks/result', async () => {
    const seen = [];
    let result;
    const before = asked.length;
    for await (const m of tasks.callToolStream(
      { name: 'deep_research', arguments: { topic: 'tasks' } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    )) {
      seen.push(m.type === 'taskStatus' ? `taskStatus:${m.task.status}` : m.type);
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
    const related = result?._meta?.['io.modelcontextprotocol/related-task']?.taskId;
    return [
      result?.structuredContent?.audience === 'team' && asked.length === before + 1 && Boolean(related),
      `${seen.join(',')} related=${related}`,
    ];
  });
  await timed('tasks: cancelTask countdown10', async () => {
    let id;
    for await (const m of tasks.callToolStream(
      { name: 'countdown', arguments: { seconds: 10 } },
      CallToolResultSchema,
      {
        task: { ttl: 60_000 },
      },
    )) {
      if (m.type === 'taskCreated') {
        id = m.task.taskId;
        break;
      }
      if (m.type === 'error') throw m.error;
    }
    const t = await tasks.cancelTask(id);
    const status = await redis.hget(`${PREFIX}:{t:${id}}:task`, 'status');
    return [t.status === 'cancelled' && status === 'cancelled', `${JSON.stringify(t)} redis=${status}`];
  });
}

await client.close().catch(() => undefined);
redis.disconnect();
