// @needs redis
/**
 * Gateway shutdown (cases B-07, B-10 d): on SIGTERM it drains — /readyz fails and responses say
 * `Connection: close` — then stops accepting and lets in-flight requests finish; a synchronous
 * call in flight gets its result instead of being cut (and cancelled); one that would outlast
 * the grace period is handed off as a task (`task_status`), never cancelled by a deploy.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startCluster, sleep, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, rpc } from '../support/mcp.js';
import { mcpHeaders } from '../support/raw-http.js';

/** A plain keep-alive TCP connection to `port`, as a proxy's upstream pool holds one. */
function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/**
 * Sends one `tasks/get` on `s` and reads one response (Content-Length framed); resolves with
 * its status and Connection header, or with `error` when the connection fails or ends first.
 */
function pollOn(s: net.Socket, port: number): Promise<{ status?: number; connection?: string; error?: string }> {
  const taskId = '00000000-0000-4000-8000-000000000000';
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId } });
  const headers = {
    ...mcpHeaders('tasks/get', undefined, taskId),
    host: `127.0.0.1:${port}`,
    'content-length': String(body.length),
  };
  // Closed by the gateway while idle (its FIN already arrived): the request cannot be sent.
  if (s.destroyed || s.readableEnded) return Promise.resolve({ error: 'closed while idle' });
  return new Promise((resolve) => {
    let buf = '';
    const done = (r: { status?: number; connection?: string; error?: string }) => {
      s.off('data', onData);
      s.off('error', onError);
      s.off('end', onEnd);
      resolve(r);
    };
    const onData = (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.slice(0, end);
      const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length - end - 4 < length) return;
      done({ status: Number(head.split(' ')[1]), connection: /\r\nconnection: *([^\r]+)/i.exec(head)?.[1] });
    };
    const onError = (e: NodeJS.ErrnoException) => done({ error: e.code ?? e.message });
    const onEnd = () => done({ error: 'ended before a response' });
    s.once('close', () => done({ error: 'closed before a response' }));
    s.on('data', onData);
    s.on('error', onError);
    s.on('end', onEnd);
    s.write(
      `POST /mcp HTTP/1.1\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n')}\r\n\r\n${body}`,
    );
  });
}

describe('gateway SIGTERM', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({
      gateways: 1,
      workers: 1,
      env: { SHUTDOWN_DRAIN_DELAY_MS: '1500', SHUTDOWN_GRACE_MS: '8000' },
    });
  });
  after(async () => c?.stop());

  it('drains: readiness fails, in-flight synchronous call completes, exit 0', async () => {
    const g = c.gateways[0]!;
    const base = g.url!.replace(/\/mcp$/, '');
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const inflight = callTool(g.url!, 'countdown', { seconds: 3 }, { tasks: false });
    await sleep(500);
    const exited = g.stop('SIGTERM');
    await g.waitLog((l) => l.msg === 'gateway.draining', 3000);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503, 'not ready while draining');
    assert.equal(ready.headers.get('connection'), 'close');
    // MCP responses say it too: through the SDK (tools/list) and on the hot path (tasks/get).
    const list = await rpc(g.url!, 'tools/list');
    assert.equal(list.status, 200);
    assert.equal(list.headers.get('connection'), 'close', 'an SDK-path response while draining');
    const poll = await getTask(g.url!, '00000000-0000-4000-8000-000000000000');
    assert.equal(poll.body.error?.code, -32602);
    assert.equal(poll.headers.get('connection'), 'close', 'a hot-path response while draining');
    const r = await inflight;
    assert.equal(r.status, 200);
    assert.equal(r.body.result?.content?.[0]?.text, 'Countdown from 3 finished.', JSON.stringify(r.body));
    assert.equal(await exited, 0);
    assert.ok(!g.logs.some((l) => l.msg === 'sync.disconnected'), 'the in-flight call was not cancelled');
  });

  it('a synchronous call longer than the grace period is handed off, not cancelled: the result names task_status, and the work completes', async () => {
    const c2 = await startCluster({
      gateways: 2,
      workers: 1,
      env: { SHUTDOWN_DRAIN_DELAY_MS: '300', SHUTDOWN_GRACE_MS: '1500' },
    });
    try {
      const [g1, g2] = c2.gateways as [(typeof c2.gateways)[0], (typeof c2.gateways)[0]];
      const inflight = callTool(g1.url!, 'countdown', { seconds: 6 }, { tasks: false, meta: { progressToken: 'p' } });
      await g1.waitLog((l) => l.msg === 'task.created', 5000);
      await sleep(500);
      const t0 = Date.now();
      const exited = g1.stop('SIGTERM');
      const r = await inflight;
      const waited = Date.now() - t0;
      assert.equal(r.status, 200);
      const result = r.body.result!;
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.match(
        result.content[0].text,
        /is still running and the server holding this call is restarting, so it continues in the background as task [0-9a-f-]{36}.*task_status/s,
      );
      const taskId = result.structuredContent.taskId as string;
      assert.deepEqual(result.structuredContent.next, { tool: 'task_status', arguments: { taskId } });
      assert.ok(waited >= 1500 && waited < 5000, `handed off after the grace period (${waited} ms)`);
      assert.equal(await exited, 0);
      assert.ok(!g1.logs.some((l) => l.msg === 'sync.disconnected'), 'not treated as a disconnect');
      // The work goes on; the other gateway reports it, then its result.
      let text = '';
      for (let i = 0; i < 40 && !/finished/.test(text); i++) {
        const s2 = await callTool(g2.url!, 'task_status', { taskId }, { tasks: false });
        text = s2.body.result?.content?.[0]?.text ?? '';
        if (!/finished/.test(text)) await sleep(250);
      }
      assert.equal(text, 'Countdown from 6 finished.');
    } finally {
      await c2.stop();
    }
  });

  it("a proxy's idle pooled connection is not closed under it: after the listener closes, a request on a keep-alive connection opened earlier is served with Connection: close, not reset", async () => {
    // nginx never re-sends a POST it has sent: closing an idle upstream connection at the moment
    // nginx sends on it reaches the client as 502. The gateway closes idle connections only
    // once no request has come for PROXY_QUIET_MS after the listener closed (shutdown.ts).
    const c3 = await startCluster({
      gateways: 1,
      workers: 0,
      env: { SHUTDOWN_DRAIN_DELAY_MS: '200', SHUTDOWN_GRACE_MS: '5000' },
    });
    try {
      const g = c3.gateways[0]!;
      const port = Number(new URL(g.url!).port);
      const pool = await Promise.all([connect(port), connect(port), connect(port)]);
      // An unknown task: answered -32602 (HTTP 400) by the gateway itself, no worker needed.
      for (const s of pool) assert.equal((await pollOn(s, port)).status, 400, 'answered before the drain');
      const exited = g.stop('SIGTERM');
      // The listener is closed once a new connection is refused.
      await waitFor(
        () =>
          connect(port).then(
            (s) => (s.destroy(), false),
            () => true,
          ),
        10_000,
        20,
        'the listener to close',
      );
      const answers = await Promise.all(pool.map((s) => pollOn(s, port)));
      assert.deepEqual(
        answers,
        pool.map(() => ({ status: 400, connection: 'close' })),
        'each pooled connection answered once more, asking to be closed',
      );
      assert.equal(await exited, 0);
    } finally {
      await c3.stop();
    }
  });
});
