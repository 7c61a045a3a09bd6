// @needs redis nginx
/**
 * Hardening through `npm run stack` (the shipped nginx template in front of 2 gateways and
 * 2 workers), in production mode with two API-key principals, alice and bob. Clients bind
 * their own loopback addresses (127.0.0.2 the attacker, .3 alice, .4 another client), so nginx
 * sees several clients. Each finding of the attack table (scripts/attack.mjs) that is about the
 * proxy or the client address is a test here:
 *  1. oversized unauthenticated bodies: six at once, three rounds → nginx's own JSON-RPC 413,
 *     byte for byte the gateway's; every legitimate call right after → 200 (before: 502 for
 *     every call for about 10 s: nginx had marked both gateways failed);
 *  2. bodies nginx passes but a gateway refuses unread (3.9 MiB without credentials) → 413,
 *     and nginx logs no upstream failure (the gateway reads the body out before answering);
 *  3. limits while parsing: nesting, key count, the small limit without credentials;
 *  4. the client address: an unauthenticated flood from one address (with a forged
 *     X-Forwarded-For) does not reach alice's discover nor another address;
 *  5. 401s throttled per client address (429 + Retry-After), valid keys still pass, the refusal
 *     log line names the client;
 *  6. slow bodies: a body trickled a byte every 2 s is cut with the gateway's JSON-RPC 408 about
 *     10 s after it began (nginx passes /mcp bodies on as they arrive, so the gateway's
 *     BODY_READ_TIMEOUT_MS bounds it; before, nginx kept it open for as long as the client
 *     trickled), one that pauses longer than 10 s is closed by nginx; an oversized chunked body
 *     (no Content-Length, so nginx finds out while passing it on) still gets a JSON-RPC 413; no
 *     upstream failure in nginx, legitimate calls 200.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { freePort, ROOT, SHARED_REDIS_URL, waitFor } from '../support/cluster.js';
import {
  declareOnly,
  manyKeysDiscover,
  mcpHeaders,
  nestedDiscover,
  paddedDiscover,
  send,
  type RawResponse,
} from '../support/raw-http.js';
import { deleteKeysUnder } from '../support/redis-keys.js';

const ATTACKER = '127.0.0.2';
const ALICE_ADDR = '127.0.0.3';
const OTHER = '127.0.0.4';
const MIB = 1024 * 1024;
const KEYS = { alice: randomBytes(32).toString('hex'), bob: randomBytes(32).toString('hex') };
const AUTH_FAILURES_PER_MIN = 20;

interface Ready {
  url: string;
  nginx: { dir: string };
  gateways: { port: number }[];
}

/**
 * Sends request headers declaring a `length`-byte body, then a byte every `everyMs`, from
 * `from`; resolves with how it ended within `boundMs`: `answered` (with the status and body
 * text), `closed` without an answer, or still `open`.
 */
function trickle(port: number, o: { token: string; from: string; everyMs: number; length: number; boundMs: number }) {
  return new Promise<{ how: 'answered' | 'closed' | 'open'; ms: number; status: number; text: string }>((resolve) => {
    const t0 = Date.now();
    const s = connect({ host: '127.0.0.1', port, localAddress: o.from });
    let got = '';
    let ticker: NodeJS.Timeout | undefined;
    const done = (how: 'answered' | 'closed' | 'open') => {
      clearInterval(ticker);
      clearTimeout(timer);
      s.destroy();
      const [head = '', ...rest] = got.split('\r\n\r\n');
      resolve({
        how,
        ms: Date.now() - t0,
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
        text: rest.join(''),
      });
    };
    s.on('connect', () => {
      const headers = {
        ...mcpHeaders('tools/list', o.token),
        host: `127.0.0.1:${port}`,
        'content-length': String(o.length),
      };
      s.write(
        `POST /mcp HTTP/1.1\r\n${Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}`)
          .join('\r\n')}\r\n\r\n`,
      );
      ticker = setInterval(() => s.writable && s.write(' '), o.everyMs);
    });
    s.on('data', (d: Buffer) => (got += d.toString('utf8')));
    s.on('close', () => done(got ? 'answered' : 'closed'));
    s.on('error', () => done(got ? 'answered' : 'closed'));
    const timer = setTimeout(() => done('open'), o.boundMs);
  });
}

const summary = (rs: RawResponse[]) => rs.map((r) => `${r.status || r.error} ${r.type}`).join(', ');
const body = (method: string, params: Record<string, unknown> = {}) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: `h-${randomBytes(3).toString('hex')}`,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'hardening', version: '0' },
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });

describe('hardening through npm run stack (production, two API-key principals)', () => {
  let proc: ChildProcess;
  let out = '';
  let ready: Ready;
  let port: number;
  const prefix = `test-${randomBytes(5).toString('hex')}`;
  const call = (method: string, o: { token?: string; from?: string; headers?: Record<string, string> } = {}) =>
    send({ port, headers: { ...mcpHeaders(method, o.token), ...o.headers }, body: body(method), from: o.from });
  /** alice and bob, each a tools/list and a server/discover with their keys. */
  const legitimate = () =>
    Promise.all([
      call('tools/list', { token: KEYS.alice, from: ALICE_ADDR }),
      call('server/discover', { token: KEYS.alice, from: ALICE_ADDR }),
      call('tools/list', { token: KEYS.bob, from: OTHER }),
      call('server/discover', { token: KEYS.bob, from: OTHER }),
    ]);
  const nginxUpstreamFailures = () =>
    readFileSync(join(ready.nginx.dir, 'error.log'), 'utf8')
      .split('\n')
      .filter((l) => /broken pipe|reset by peer|prematurely closed|no live upstreams|upstream timed out/i.test(l))
      .filter((l) => !/client prematurely closed/i.test(l));

  before(async () => {
    port = await freePort();
    proc = spawn(process.execPath, [join(ROOT, 'scripts', 'stack.mjs'), '--dist', '--port', String(port)], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        LOG_LEVEL: 'info',
        REDIS_URL: SHARED_REDIS_URL,
        REDIS_KEY_PREFIX: prefix,
        AUTH_API_KEYS: `alice:${KEYS.alice},bob:${KEYS.bob}`,
        REQUEST_STATE_KEYS: `k1:${randomBytes(32).toString('base64')}`,
        WORKER_HTTP_PORT: '0',
        RATE_LIMIT_REQUESTS_PER_MIN: '300',
        RATE_LIMIT_AUTH_FAILURES_PER_MIN: String(AUTH_FAILURES_PER_MIN),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    const line = await waitFor(
      () => out.split('\n').find((l) => l.startsWith('stack | {"msg":"stack.ready"')),
      120_000,
      100,
      () => `stack.ready; output so far:\n${out}`,
    );
    ready = JSON.parse(line.slice('stack | '.length)) as Ready;
  });

  after(async () => {
    if (proc && proc.exitCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGINT');
      const t = setTimeout(() => proc.kill('SIGKILL'), 40_000);
      await exited;
      clearTimeout(t);
    }
    const redis = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
    await deleteKeysUnder(redis, prefix);
    redis.disconnect();
  });

  it("six concurrent 4.5 MiB unauthenticated bodies, three rounds: nginx answers each with the gateway's own JSON-RPC 413; every legitimate call right after gets 200", async () => {
    const big = paddedDiscover(4.5 * MIB);
    let nginxAnswer = '';
    for (let round = 1; round <= 3; round++) {
      const bad = await Promise.all(
        Array.from({ length: 6 }, () =>
          send({ port, headers: mcpHeaders('server/discover'), body: big, from: ATTACKER }),
        ),
      );
      for (const r of bad) {
        assert.equal(r.status, 413, `round ${round}, attack: ${summary(bad)}`);
        assert.match(r.type, /^application\/json/);
        nginxAnswer = r.text;
      }
      const good = await legitimate();
      assert.deepEqual(
        good.map((r) => r.status),
        [200, 200, 200, 200],
        `round ${round}, legitimate calls: ${summary(good)}`,
      );
    }
    // The gateway's own answer to such a body (straight to it, with a key): the same bytes.
    const direct = await declareOnly(ready.gateways[0]!.port, mcpHeaders('server/discover', KEYS.alice), big.length);
    assert.equal(direct.status, 413, direct.text);
    assert.equal(nginxAnswer, direct.text, 'nginx and the gateway send the same JSON-RPC error');
    assert.deepEqual(JSON.parse(direct.text), {
      jsonrpc: '2.0',
      error: { code: -32600, message: `Request body larger than ${4 * MIB} bytes` },
      id: null,
    });
    assert.deepEqual(nginxUpstreamFailures(), []);
  });

  it('3.9 MiB bodies without credentials (under MAX_BODY_BYTES: nginx passes them), six at once, three rounds: the gateway answers 413 unparsed; no upstream failure in nginx; legitimate calls 200', async () => {
    const large = paddedDiscover(3.9 * MIB);
    for (let round = 1; round <= 3; round++) {
      const bad = await Promise.all(
        Array.from({ length: 6 }, () =>
          send({ port, headers: mcpHeaders('server/discover'), body: large, from: ATTACKER }),
        ),
      );
      for (const r of bad) {
        assert.equal(r.status, 413, `round ${round}: ${summary(bad)}`);
        assert.match(JSON.parse(r.text).error.message, /16384 bytes \(the limit for requests without credentials\)/);
      }
      const good = await legitimate();
      assert.deepEqual(
        good.map((r) => r.status),
        [200, 200, 200, 200],
        `round ${round}: ${summary(good)}`,
      );
    }
    assert.deepEqual(nginxUpstreamFailures(), [], 'nginx never counted a gateway as failed');
  });

  it('limits while parsing: 3.8 MB of nesting and 30,000 keys with a key are 400; 16 KiB + 1 byte without credentials is 413; a small unauthenticated discover is 200', async () => {
    const nested = await send({
      port,
      headers: mcpHeaders('server/discover', KEYS.alice),
      body: nestedDiscover(1_900_000),
      from: ALICE_ADDR,
    });
    assert.equal(nested.status, 400, nested.text);
    assert.equal(JSON.parse(nested.text).error.message, 'Request nested deeper than 64 levels');
    const keys = await send({
      port,
      headers: mcpHeaders('server/discover', KEYS.alice),
      body: manyKeysDiscover(30_000),
      from: ALICE_ADDR,
    });
    assert.equal(keys.status, 400, keys.text);
    assert.equal(JSON.parse(keys.text).error.message, 'Request has more than 20000 object keys');
    const over = await send({
      port,
      headers: mcpHeaders('server/discover'),
      body: paddedDiscover(16_385),
      from: OTHER,
    });
    assert.equal(over.status, 413, over.text);
    const small = body('server/discover', { pad: 'x'.repeat(16_000) });
    assert.ok(Buffer.byteLength(small) <= 16_384);
    const fits = await send({ port, headers: mcpHeaders('server/discover'), body: small, from: OTHER });
    assert.equal(fits.status, 200, fits.text);
  });

  it('the client address: an unauthenticated flood from 127.0.0.2 (forging X-Forwarded-For) reaches 429; alice with her key and another address without one still get 200', async () => {
    let sent = 0;
    let refused: RawResponse | undefined;
    const worker = async () => {
      while (!refused && sent < 600) {
        sent++;
        const r = await call('server/discover', {
          from: ATTACKER,
          headers: { 'x-forwarded-for': `10.${sent % 250}.0.1` },
        });
        if (r.status === 429) refused = r;
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.ok(refused, `no 429 after ${sent} requests`);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const alice = await call('server/discover', { token: KEYS.alice, from: ALICE_ADDR });
    assert.equal(alice.status, 200, `alice's discover is hers, not the flood's: ${alice.text}`);
    const other = await call('server/discover', { from: OTHER });
    assert.equal(other.status, 200, `another client address: ${other.text}`);
  });

  it(`401s are throttled per client address: past ${AUTH_FAILURES_PER_MIN} failures a minute, 429 + Retry-After; a valid key from that address and a wrong one from another still get their answer; the refusal log names the client`, async () => {
    const statuses: number[] = [];
    let throttled: RawResponse | undefined;
    for (let i = 0; i < AUTH_FAILURES_PER_MIN + 5; i++) {
      const r = await call('tools/list', { token: 'x'.repeat(40), from: ATTACKER });
      statuses.push(r.status);
      if (r.status === 429) throttled ??= r;
    }
    assert.deepEqual(
      statuses.slice(0, AUTH_FAILURES_PER_MIN),
      Array(AUTH_FAILURES_PER_MIN).fill(401),
      statuses.join(','),
    );
    assert.deepEqual(statuses.slice(AUTH_FAILURES_PER_MIN), Array(5).fill(429), statuses.join(','));
    assert.ok(Number(throttled!.headers['retry-after']) >= 1);
    assert.equal(JSON.parse(throttled!.text).error.data.limit, 'auth_failures_per_minute');
    assert.equal((await call('tools/list', { token: KEYS.alice, from: ATTACKER })).status, 200);
    assert.equal((await call('tools/list', { token: 'y'.repeat(40), from: OTHER })).status, 401);
    const refusals = out.split('\n').filter((l) => l.includes('"auth.refused"'));
    assert.ok(
      refusals.some((l) => l.includes(`"client":"${ATTACKER}"`)),
      refusals.slice(-3).join('\n'),
    );
  });
  it("slow bodies through nginx: a byte every 2 s is cut with the gateway's JSON-RPC 408 about BODY_READ_TIMEOUT_MS (10 s) after it began; a pause over 10 s is closed by nginx; no upstream failure; legitimate calls 200 meanwhile and after", async () => {
    const BOUND_MS = 30_000;
    const slow = Promise.all([
      trickle(port, { token: KEYS.alice, from: ATTACKER, everyMs: 2000, length: 4000, boundMs: BOUND_MS }),
      trickle(port, { token: KEYS.alice, from: ATTACKER, everyMs: 15_000, length: 4000, boundMs: BOUND_MS }),
    ]);
    const meanwhile = await legitimate();
    const [twoS, fifteenS] = await slow;
    assert.equal(twoS.how, 'answered', `a byte every 2 s: ${JSON.stringify(twoS)}`);
    assert.equal(twoS.status, 408, twoS.text);
    assert.equal(JSON.parse(twoS.text).error.code, -32600);
    assert.match(JSON.parse(twoS.text).error.message, /must arrive within 10000 ms/);
    assert.ok(twoS.ms >= 10_000, `cut by the gateway's request timeout, not sooner (${twoS.ms} ms)`);
    assert.equal(fifteenS.how, 'closed', `a byte every 15 s: ${JSON.stringify(fifteenS)}`);
    assert.ok(fifteenS.ms >= 10_000, `closed at client_body_timeout (${fifteenS.ms} ms)`);
    assert.deepEqual(
      meanwhile.map((r) => r.status),
      [200, 200, 200, 200],
      summary(meanwhile),
    );
    const after = await legitimate();
    assert.deepEqual(
      after.map((r) => r.status),
      [200, 200, 200, 200],
      summary(after),
    );
    assert.deepEqual(nginxUpstreamFailures(), []);
  });

  it('an oversized chunked body (no Content-Length: nginx finds out while passing it on) with a key: a JSON-RPC 413; no upstream failure; legitimate calls 200', async () => {
    const r = await send({
      port,
      headers: { ...mcpHeaders('server/discover', KEYS.alice), 'transfer-encoding': 'chunked' },
      body: paddedDiscover(4.5 * MIB),
      from: ALICE_ADDR,
    });
    assert.equal(r.status, 413, `${r.status} ${r.error ?? ''} ${r.text.slice(0, 200)}`);
    assert.equal(JSON.parse(r.text).error.code, -32600);
    const after = await legitimate();
    assert.deepEqual(
      after.map((x) => x.status),
      [200, 200, 200, 200],
      summary(after),
    );
    assert.deepEqual(nginxUpstreamFailures(), []);
  });
});
