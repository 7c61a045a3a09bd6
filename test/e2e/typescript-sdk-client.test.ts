// @needs redis typescript-sdk
/**
 * The TypeScript SDK 1.32 (`@modelcontextprotocol/sdk`, the 2025-11-25 generation most clients
 * still ship; tools/typescript-sdk) through 2 gateways + 2 workers behind the no-affinity
 * round-robin proxy, with an API key (issue 19 §8). test/clients/typescript_sdk_client.mjs
 * connects once (initialize 2025-11-25, a session in Redis) and reports one JSON line per call:
 *  - deep_research and share_report: their questions arrive as `elicitation/create` on the
 *    call's stream and the answers come back through the other gateway (LG-09);
 *  - countdown {3} with `onprogress`: at least three progress notifications;
 *  - countdown {10} aborted after 1.5 s: the SDK sends `notifications/cancelled` (LG-08) and
 *    the task is `cancelled` in Redis within 3 s.
 * Then its experimental tasks client (client.experimental.tasks) against the 2025-11-25 tasks
 * (LG-10..LG-14): callToolStream of countdown {2} with `task` (created, polled, result), getTask,
 * listTasks, deep_research as a task (its question on the tasks/result stream, the result with the
 * related-task `_meta`), cancelTask (`cancelled` in the answer and in Redis).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startCluster, type Cluster } from '../support/cluster.js';
import { runClientScript } from '../support/client-lines.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import { typescriptSdkScript } from '../support/typescript-sdk.js';

const KEY = `ts-${randomBytes(16).toString('hex')}`;

describe('TypeScript SDK 1.32 (2025-11-25), 2 gateways + 2 workers behind a round-robin proxy, with an API key', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `ts:${KEY}` } });
    proxy = await startRoundRobinProxy(c.urls);
  });
  after(async () => {
    await proxy?.close();
    await c?.stop();
  });

  it('deep_research and share_report answer their questions, countdown reports progress, a cancelled countdown {10} is cancelled in Redis within 3 s; the experimental tasks client creates, polls, lists, answers and cancels tasks (LG-08..LG-14)', async (t) => {
    const before = [...proxy.counts];
    const { lines, stderr } = await runClientScript(
      process.execPath,
      [typescriptSdkScript(), proxy.url, KEY, c.prefix, c.redisUrl],
      { env: { TASKS: '1' } },
    );
    for (const l of lines)
      t.diagnostic(`${l.client} ${l.call}: ${l.ok ? 'ok' : 'FAILED'} in ${l.ms} ms (${l.detail.replace(/\s+/g, ' ')})`);
    assert.deepEqual(
      lines.map((l) => l.call),
      [
        'connect',
        'deep_research',
        'share_report',
        'countdown3+progress',
        'cancel countdown10',
        'tasks: callToolStream countdown2',
        'tasks: getTask',
        'tasks: listTasks',
        'tasks: deep_research answers its question on tasks/result',
        'tasks: cancelTask countdown10',
      ],
      `every call reported; stderr:\n${stderr.slice(-3000)}`,
    );
    const failed = lines.filter((l) => !l.ok);
    assert.deepEqual(failed, [], JSON.stringify(failed, null, 1));
    const used = proxy.counts.map((n, i) => n - before[i]!);
    assert.ok(
      used.every((n) => n >= 3),
      `requests per gateway: ${used.join(' / ')}`,
    );
  });
});
