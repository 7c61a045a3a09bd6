// @needs redis
/**
 * The queue view end to end (issue 11 §4): a gateway with ADMIN_API_KEYS serves Bull Board on its
 * own admin listener (ADMIN_PORT=0: a free port, named in its `admin.ready` log line), a gateway
 * without it serves none, and the MCP port never serves it.
 *  - 401 with a `WWW-Authenticate` challenge (Bearer and Basic) without an admin credential, with
 *    a wrong one, and with an MCP API key that is not an admin key, on the page, its static
 *    files and its API;
 *  - with the admin key (Bearer or Basic), the API lists the running task's step job with its
 *    task id, tool and principal, and the page loads;
 *  - read-only by default: actions are refused; with ADMIN_READ_ONLY=false they work, except
 *    from another site (a browser re-sends Basic credentials by itself).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, cancelTask, pollTask, type CallOptions } from '../support/mcp.js';

const ALICE = { token: 'alice-key-0123456789abcdef' } satisfies CallOptions;
const ADMIN_KEY = 'ops-admin-key-0123456789abcdef';

describe('queue view (Bull Board) on the admin listener', () => {
  let c: Cluster;
  let withAdmin: Proc;
  let admin: string;
  let taskId: string;

  before(async () => {
    c = await startCluster({ gateways: 0, workers: 1, env: { AUTH_API_KEYS: `alice:${ALICE.token}` } });
    withAdmin = await c.addGateway({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}`, ADMIN_PORT: '0' });
    admin = (await withAdmin.waitLog((l) => l.msg === 'admin.ready')).url as string;
    const r = await callTool(c.urls[0]!, 'countdown', { seconds: 10 }, ALICE);
    taskId = r.body.result!.taskId as string;
    await pollTask(
      () => c.urls[0]!,
      taskId,
      (t) => /1\/10/.test(t.statusMessage ?? ''),
      10_000,
      50,
      ALICE,
    );
  });
  after(async () => {
    if (taskId) await cancelTask(c.urls[0]!, taskId, ALICE).catch(() => undefined);
    await c?.stop();
  });

  const api = `/api/queues?activeQueue=tools&status=latest&page=1&jobsPerPage=50`;
  const get = (path: string, authorization?: string) =>
    fetch(`${admin}${path}`, { headers: authorization ? { authorization } : {}, redirect: 'manual' });
  const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

  it('is on its own loopback listener, named in the log; the MCP port does not serve it', async () => {
    assert.match(admin, /^http:\/\/127\.0\.0\.1:\d+\/admin\/queues$/);
    assert.notEqual(new URL(admin).port, String(withAdmin.port));
    const onMcpPort = await fetch(`http://127.0.0.1:${withAdmin.port}/admin/queues${api}`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(onMcpPort.status, 404);
  });

  it('answers 401 with a Bearer and Basic challenge without an admin credential, with a wrong one, or with an MCP key', async () => {
    for (const auth of [
      undefined,
      `Bearer wrong-key-0123456789abcdef`,
      `Bearer ${ALICE.token}`,
      basic('ops', 'wrong-key-0123456789'),
      'Bearer',
      `Token ${ADMIN_KEY}`,
    ]) {
      for (const path of [api, '', '/static/favicon-32x32.png']) {
        const r = await get(path, auth);
        assert.equal(r.status, 401, `${auth ?? 'no credential'} on ${path || '/'}`);
        assert.match(
          r.headers.get('www-authenticate') ?? '',
          /^Bearer realm="mcp-tasks-admin", Basic realm="mcp-tasks-admin"/,
        );
        const text = await r.text();
        assert.ok(!text.includes(taskId), 'nothing about the jobs');
      }
    }
  });

  it('with the admin key, the API lists the running step job with its task id, tool and principal', async () => {
    const r = await get(api, `Bearer ${ADMIN_KEY}`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    const { queues } = (await r.json()) as {
      queues: {
        name: string;
        readOnlyMode: boolean;
        jobs: { id: string; name: string; data: Record<string, unknown> }[];
      }[];
    };
    assert.deepEqual(
      queues.map((q) => q.name),
      ['tools', 'webhooks', 'maintenance'],
    );
    const tools = queues.find((q) => q.name === 'tools')!;
    const job = tools.jobs.find((j) => j.id === `t.${taskId}.1`);
    assert.ok(job, `step job of ${taskId} listed: ${JSON.stringify(tools.jobs.map((j) => j.id))}`);
    // The step job's own data (taskId, step, tool, createdAt) plus what the view adds from the record.
    const { createdAt, ...shown } = job.data;
    assert.equal(typeof createdAt, 'number');
    assert.deepEqual(shown, { taskId, step: 1, tool: 'countdown', principal: 'key:alice', taskStatus: 'working' });
    assert.equal(job.name, 'step · countdown · key:alice');
    assert.ok(
      queues.every((q) => q.readOnlyMode),
      'read-only by default',
    );
  });

  it('Basic credentials (what a browser sends) open the page and the same API; actions are refused while read-only', async () => {
    const page = await get('', basic('anyone', ADMIN_KEY));
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(await page.text(), /<html/i);
    const r = await get(api, basic('anyone', ADMIN_KEY));
    assert.equal(r.status, 200);
    const retry = await fetch(`${admin}/api/queues/tools/retry/failed`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(retry.status, 405, 'Bull Board: QUEUE_READ_ONLY');
  });

  it('a gateway without ADMIN_API_KEYS has no admin listener; with ADMIN_READ_ONLY=false actions work, but not from another site', async () => {
    const [plain, writable] = await Promise.all([
      c.addGateway(),
      c.addGateway({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}`, ADMIN_PORT: '0', ADMIN_READ_ONLY: 'false' }),
    ]);
    const ready = plain.logs.find((l) => l.msg === 'gateway.ready')!;
    assert.equal(ready.admin, undefined);
    assert.ok(!plain.logs.some((l) => l.msg === 'admin.ready'));

    const rw = (await writable.waitLog((l) => l.msg === 'admin.ready')).url as string;
    const put = (headers: Record<string, string>) =>
      fetch(`${rw}/api/queues/tools/retry/failed`, {
        method: 'PUT',
        headers: { authorization: basic('anyone', ADMIN_KEY), ...headers },
      });
    assert.equal((await put({ origin: 'https://evil.example' })).status, 403);
    assert.equal((await put({ 'sec-fetch-site': 'cross-site' })).status, 403);
    assert.equal((await put({ origin: new URL(rw).origin, 'sec-fetch-site': 'same-origin' })).status, 200);
    assert.equal((await put({})).status, 200, 'scripts send neither header');
  });
});
