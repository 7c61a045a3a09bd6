// @needs redis nginx
/**
 * A gateway that is gone, behind the shipped nginx template (deploy/nginx/mcp.conf.template,
 * rendered as `npm run stack` and docker compose render it), in front of one live gateway:
 *  1. a stopped container's address: nothing accepts the connection and nothing refuses it
 *     (here a listener whose accept queue is full, so the kernel drops further SYNs). The first
 *     request nginx sends there pays `proxy_connect_timeout` (1 s) and is then passed to the live
 *     gateway, body included (request bodies are not buffered on /mcp); nginx marks the dead
 *     one failed (`max_fails=1 fail_timeout=10s`), so the requests after it never try it: none
 *     fails, none pays the second;
 *  2. a killed gateway process (connection refused): the request that tries it goes on to the
 *     live one at once; nothing pays a timeout, none fails.
 * Calls are sent one after another, timed by the client, and nginx's access log says which
 * upstreams each request tried.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { rpc } from '../support/mcp.js';
import { startNginx, type Nginx } from '../support/nginx.js';

/** How long nginx waits for a gateway to accept a connection (the template's proxy_connect_timeout). */
const CONNECT_TIMEOUT_MS = 1000;

interface BlackHole {
  port: number;
  stop(): Promise<void>;
}

/** Resolves true once a connection to `port` is made, false if it is not made within `ms`. */
function connects(port: number, ms: number, keep: Socket[]): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      s.destroy();
      resolve(false);
    }, ms);
    s.once('connect', () => {
      clearTimeout(timer);
      keep.push(s);
      resolve(true);
    });
    s.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

/**
 * A TCP address that neither accepts nor refuses, as a stopped container's address looks to a
 * proxy (no root needed): a child process listens with a backlog of 1 (0 would mean Node's default, 511) and then blocks its event
 * loop, so it never accepts; the connections opened here fill its accept queue, after which the
 * kernel drops every SYN. Checked: a further connection is not made within 500 ms.
 */
async function blackHole(): Promise<BlackHole> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '-e',
      `const s = require('node:net').createServer();
       s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
         process.stdout.write(s.address().port + '\\n');
         Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // never accepts
       });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const port = Number(await waitFor(() => /^\d+\n/.exec(out)?.[0], 30_000, 20, 'the black hole listening'));
  const held: Socket[] = [];
  // Fill the accept queue: connections complete until it is full.
  for (let i = 0; i < 16 && (await connects(port, 500, held)); i++);
  assert.equal(await connects(port, 500, held), false, 'a connection to the black hole is neither made nor refused');
  return {
    port,
    async stop() {
      for (const s of held) s.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

interface Timed {
  status: number;
  ms: number;
  id: string;
}

/** nginx's access-log lines of `POST /mcp`, in order: status, upstreams tried, their statuses. */
const accessLines = (nginx: Nginx) =>
  nginx
    .logs()
    .access.split('\n')
    .filter((l) => l.includes('|POST /mcp '))
    .map((l) => {
      const f = l.split('|');
      return { status: f[1]!, upstreams: f[2]!.split(', '), upstreamStatus: f[3]!, requestTime: Number(f[4]) };
    });

describe('the shipped nginx template with a gateway that is gone: one request pays at most the connect timeout, none fails', () => {
  let c: Cluster;
  let hole: BlackHole | undefined;
  let nginx: Nginx | undefined;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 0 });
  });
  after(async () => {
    await nginx?.stop();
    await hole?.stop();
    await c?.stop();
  });

  /** `n` tools/list calls one after another through `url`, the first with a 100 KB body. */
  const calls = async (url: string, n: number): Promise<Timed[]> => {
    const out: Timed[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await rpc(url, 'tools/list', i === 0 ? { pad: 'x'.repeat(100_000) } : {}, { id: `call-${i}` });
      out.push({ status: r.status, ms: performance.now() - t0, id: String(r.body.id) });
    }
    return out;
  };

  it(
    'a black-hole address (stopped container): the first request pays about proxy_connect_timeout and reaches the live gateway with its body; the next ones never try the dead address, none fails',
    { timeout: 120_000 },
    async (t) => {
      hole = await blackHole();
      const live = c.gateways[0]!;
      // The dead address first: round robin sends the first request there.
      nginx = await startNginx({ config: 'deploy', upstreams: [`http://127.0.0.1:${hole.port}`, live.url!] });
      const started = Date.now();
      const rs = await calls(nginx.url, 10);
      const elapsed = Date.now() - started;
      t.diagnostic(`client latencies (ms): ${rs.map((r) => r.ms.toFixed(0)).join(', ')}`);
      // All within one fail_timeout (10 s), else the dead address is tried again, by design.
      assert.ok(elapsed < 10_000, `the calls took ${elapsed} ms`);
      assert.deepEqual(
        rs.map((r) => r.status),
        Array(rs.length).fill(200),
        'no call failed',
      );
      const lines = await waitFor(() => {
        const l = accessLines(nginx!);
        return l.length >= rs.length && l;
      });
      const holeAddr = `127.0.0.1:${hole.port}`;
      const liveAddr = `127.0.0.1:${live.port}`;
      // The first request tried the dead address, timed out connecting (504) and went to the live one.
      assert.deepEqual(lines[0]!.upstreams, [holeAddr, liveAddr], JSON.stringify(lines[0]));
      assert.equal(lines[0]!.upstreamStatus, '504, 200');
      assert.ok(
        rs[0]!.ms >= CONNECT_TIMEOUT_MS - 50,
        `the first call waited for the connect timeout (${rs[0]!.ms.toFixed(0)} ms)`,
      );
      // It cost about the connect timeout: 1 s plus the call itself (the later calls show what a
      // call costs; its 100 KB body and first connection may cost some hundred ms more). Without
      // the template's proxy_connect_timeout, nginx would wait its default, 60 s.
      const callCost = Math.max(...rs.slice(1).map((r) => r.ms));
      assert.ok(
        rs[0]!.ms <= CONNECT_TIMEOUT_MS + callCost + 1000,
        `the first call took ${rs[0]!.ms.toFixed(0)} ms (connect timeout ${CONNECT_TIMEOUT_MS} ms + a call ≤ ${callCost.toFixed(0)} ms)`,
      );
      // The next ones went straight to the live gateway and paid no connect timeout.
      for (const [i, l] of lines.slice(1, rs.length).entries()) {
        assert.deepEqual(l.upstreams, [liveAddr], `call ${i + 1}: ${JSON.stringify(l)}`);
        assert.ok(rs[i + 1]!.ms < CONNECT_TIMEOUT_MS, `call ${i + 1} took ${rs[i + 1]!.ms.toFixed(0)} ms`);
      }
      assert.match(nginx.logs().error, /upstream timed out \(110: Connection timed out\) while connecting to upstream/);
      await nginx.stop();
      nginx = undefined;
    },
  );

  it(
    'a killed gateway (connection refused): the request that tries it reaches the live gateway at once; none fails',
    { timeout: 60_000 },
    async (t) => {
      const [live, killed] = [c.gateways[0]!, c.gateways[1]!];
      await killed.kill();
      nginx = await startNginx({ config: 'deploy', upstreams: [killed.url!, live.url!] });
      const rs = await calls(nginx.url, 6);
      t.diagnostic(`client latencies (ms): ${rs.map((r) => r.ms.toFixed(0)).join(', ')}`);
      assert.deepEqual(
        rs.map((r) => r.status),
        Array(rs.length).fill(200),
        'no call failed',
      );
      const lines = await waitFor(() => {
        const l = accessLines(nginx!);
        return l.length >= rs.length && l;
      });
      const deadAddr = `127.0.0.1:${killed.port}`;
      const liveAddr = `127.0.0.1:${live.port}`;
      assert.deepEqual(lines[0]!.upstreams, [deadAddr, liveAddr], JSON.stringify(lines[0]));
      assert.equal(lines[0]!.upstreamStatus, '502, 200');
      for (const [i, l] of lines.slice(1, rs.length).entries())
        assert.deepEqual(l.upstreams, [liveAddr], `call ${i + 1}: ${JSON.stringify(l)}`);
      for (const [i, r] of rs.entries())
        assert.ok(
          r.ms < CONNECT_TIMEOUT_MS,
          `call ${i} took ${r.ms.toFixed(0)} ms: a refused connection costs no timeout`,
        );
      assert.match(nginx.logs().error, /Connection refused\) while connecting to upstream/);
    },
  );
});
