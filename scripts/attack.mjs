#!/usr/bin/env node
/**
 * `node scripts/attack.mjs`: the hardening attack table, measured against `npm run stack` (the
 * shipped nginx template in front of 2 gateways and 2 workers) in production mode with two
 * API-key principals (alice, bob). Loopback only; every attack is bounded in count and time.
 * It starts the stack itself (its own REDIS_KEY_PREFIX on REDIS_URL, default the local Redis,
 * and free ports), runs the attacks, stops the stack and deletes its keys; then prints one
 * Markdown table (attack, what was sent, what came back).
 *
 *   node scripts/attack.mjs                    every attack (about 3 minutes: the idle-socket and
 *                                              slow-body rows wait up to 100 s, in parallel)
 *   node scripts/attack.mjs --only oversize,nested   some rows (ids in the first column)
 *   node scripts/attack.mjs --quick            skip the two rows that wait up to 100 s
 *
 * Clients bind their own loopback source address (127.0.0.2 the attacker, 127.0.0.3 alice,
 * 127.0.0.4 bob), so nginx sees three client addresses. Needs `npm run build` and nginx.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opts } = parseArgs({
  options: { only: { type: 'string' }, quick: { type: 'boolean', default: false } },
});
const only = opts.only ? new Set(opts.only.split(',')) : undefined;
const ATTACKER = '127.0.0.2';
const ALICE_ADDR = '127.0.0.3';
const BOB_ADDR = '127.0.0.4';
const KEYS = { alice: randomBytes(32).toString('hex'), bob: randomBytes(32).toString('hex') };
const PREFIX = `attack-${randomBytes(4).toString('hex')}`;
const MIB = 1024 * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** One HTTP/1.1 request on a fresh connection; never throws (a socket error is `error`). */
function send({ port, path = '/mcp', method = 'POST', headers = {}, body, from, timeoutMs = 30_000 }) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path, method, headers, localAddress: from, agent: false, timeout: timeoutMs },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            type: res.headers['content-type'] ?? '',
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            ms: performance.now() - t0,
          }),
        );
        res.on('error', (e) => resolve({ status: res.statusCode, error: e.code ?? e.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', (e) => resolve({ status: 0, error: e.code ?? e.message, ms: performance.now() - t0 }));
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

const MCP_HEADERS = (method, token) => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': method,
  ...(token ? { authorization: `Bearer ${token}` } : {}),
});
let nextId = 1;
const envelope = (method, params = {}) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: `a-${nextId++}`,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'attack', version: '0' },
        'io.modelcontextprotocol/clientCapabilities': {
          elicitation: { form: {} },
          extensions: { 'io.modelcontextprotocol/tasks': {} },
        },
      },
    },
  });
const call = (port, method, params, { token, from, headers = {} } = {}) => {
  const name = params?.name ?? params?.taskId;
  return send({
    port,
    headers: { ...MCP_HEADERS(method, token), ...(name ? { 'mcp-name': name } : {}), ...headers },
    body: envelope(method, params),
    from,
  });
};

/** A `server/discover` body padded to `bytes` (its `params` carry the padding). */
const paddedDiscover = (bytes) => {
  const head = '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"pad":"';
  return head + 'x'.repeat(bytes - head.length - 3) + '"}}';
};
const count = (rs) => {
  const m = new Map();
  for (const r of rs) {
    const k = r.error ? `${r.status || 'conn'} ${r.error}` : `${r.status} ${r.type.split(';')[0] || '-'}`;
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return [...m].map(([k, n]) => `${n}× ${k}`).join(', ');
};
/** CPU seconds (user + system) of `pid` so far. */
const cpuOf = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};

// ---------------------------------------------------------------------------------------------
// The stack
// ---------------------------------------------------------------------------------------------
const port = await freePort();
const env = {
  ...process.env,
  NODE_ENV: 'production',
  LOG_LEVEL: 'info',
  REDIS_KEY_PREFIX: PREFIX,
  AUTH_API_KEYS: `alice:${KEYS.alice},bob:${KEYS.bob}`,
  REQUEST_STATE_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  WORKER_HTTP_PORT: '0',
  DEMO_RESEARCH_PHASE_MS: '0',
};
const stack = spawn(process.execPath, [join(root, 'scripts', 'stack.mjs'), '--dist', '--port', String(port)], {
  cwd: root,
  env,
  stdio: ['ignore', 'pipe', 'pipe'],
});
let out = '';
stack.stdout.setEncoding('utf8').on('data', (d) => (out += d));
stack.stderr.setEncoding('utf8').on('data', (d) => (out += d));
const stopStack = async () => {
  if (stack.exitCode !== null) return;
  const exited = new Promise((r) => stack.once('exit', r));
  stack.kill('SIGINT');
  const t = setTimeout(() => stack.kill('SIGKILL'), 40_000);
  await exited;
  clearTimeout(t);
};
process.on('exit', () => stack.exitCode === null && stack.kill('SIGKILL'));
let ready;
for (const end = Date.now() + 120_000; !ready; await sleep(200)) {
  const line = out.split('\n').find((l) => l.startsWith('stack | {"msg":"stack.ready"'));
  if (line) ready = JSON.parse(line.slice('stack | '.length));
  else if (stack.exitCode !== null || Date.now() > end) {
    console.error(`the stack did not start:\n${out.split('\n').slice(-30).join('\n')}`);
    process.exit(1);
  }
}
const gwPids = ready.gateways.map((g) => g.pid);
const gwCpu = () => gwPids.reduce((s, p) => s + cpuOf(p), 0);
const legit = async () => {
  const rs = await Promise.all([
    call(port, 'tools/list', {}, { token: KEYS.alice, from: ALICE_ADDR }),
    call(port, 'server/discover', {}, { token: KEYS.alice, from: ALICE_ADDR }),
    call(port, 'tools/list', {}, { token: KEYS.bob, from: BOB_ADDR }),
    call(port, 'server/discover', {}, { token: KEYS.bob, from: BOB_ADDR }),
  ]);
  return rs;
};

const rows = [];
const row = (id, attack, sent, result) => {
  rows.push({ id, attack, sent, result });
  console.error(`[${id}] ${result}`);
};
const want = (id) => !only || only.has(id);

// ---------------------------------------------------------------------------------------------
// Attacks
// ---------------------------------------------------------------------------------------------
/** Time until the peer closes a connection that sends `prelude` then nothing (bounded). */
function idleClose(p, prelude, boundMs) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = connect({ host: '127.0.0.1', port: p, localAddress: ATTACKER });
    let got = '';
    s.on('connect', () => prelude && s.write(prelude));
    s.on('data', (d) => (got += d));
    const done = (how) => {
      clearTimeout(timer);
      s.destroy();
      resolve({ ms: Date.now() - t0, how, status: /^HTTP\/1.1 (\d+)/.exec(got.split('\r\n\r\n').at(-2) ?? got)?.[1] });
    };
    s.on('close', () => done('closed'));
    s.on('error', () => done('error'));
    const timer = setTimeout(() => done('open'), boundMs);
  });
}

/** Sends a body a byte every `everyMs` (of `length` bytes) and reports how it ended (bounded). */
function slowBody(p, everyMs, length, boundMs, token) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = connect({ host: '127.0.0.1', port: p, localAddress: ATTACKER });
    let got = '';
    let ticker;
    const done = (how) => {
      clearInterval(ticker);
      clearTimeout(timer);
      s.destroy();
      resolve({ ms: Date.now() - t0, how, status: /^HTTP\/1.1 (\d+)/.exec(got)?.[1] });
    };
    s.on('connect', () => {
      s.write(
        `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${p}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${length}\r\n\r\n`,
      );
      ticker = setInterval(() => s.writable && s.write(' '), everyMs);
    });
    s.on('data', (d) => (got += d));
    s.on('close', () => done(got ? 'answered' : 'closed'));
    s.on('error', () => done('error'));
    const timer = setTimeout(() => done('open'), boundMs);
  });
}

const slow = [];
if (!opts.quick && want('idle')) {
  const gw = ready.gateways[0].port;
  slow.push(
    Promise.all([
      idleClose(gw, '', 100_000),
      idleClose(gw, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${gw}\r\n\r\n`, 100_000),
      idleClose(port, '', 100_000),
    ]).then(([none, after, viaNginx]) =>
      row(
        'idle',
        'idle sockets reaped',
        'a connection that sends nothing, and one idle after one request (gateway direct), and one that sends nothing to nginx; bounded 100 s',
        `gateway, nothing sent: ${none.how} after ${(none.ms / 1000).toFixed(1)} s; gateway, idle after a request: ${after.how} after ${(after.ms / 1000).toFixed(1)} s; nginx, nothing sent: ${viaNginx.how} after ${(viaNginx.ms / 1000).toFixed(1)} s`,
      ),
    ),
  );
}
if (!opts.quick && want('slowbody')) {
  slow.push(
    Promise.all([
      slowBody(port, 2000, 4000, 100_000, KEYS.alice),
      slowBody(port, 15_000, 4000, 100_000, KEYS.alice),
      slowBody(ready.gateways[1].port, 2000, 4000, 100_000, KEYS.alice),
    ]).then(([a, b, c]) =>
      row(
        'slowbody',
        'slow bodies cut',
        'a 4000-byte body, one byte every 2 s (and every 15 s) through nginx; every 2 s straight to a gateway; bounded 100 s',
        `nginx, 2 s/byte: ${a.how} ${a.status ?? ''} after ${(a.ms / 1000).toFixed(1)} s; nginx, 15 s/byte: ${b.how} ${b.status ?? ''} after ${(b.ms / 1000).toFixed(1)} s; gateway, 2 s/byte: ${c.how} ${c.status ?? ''} after ${(c.ms / 1000).toFixed(1)} s`,
      ),
    ),
  );
}

if (want('oversize')) {
  const body = paddedDiscover(4.5 * MIB);
  const results = [];
  for (let round = 1; round <= 3; round++) {
    const bad = await Promise.all(
      Array.from({ length: 6 }, () => send({ port, headers: MCP_HEADERS('server/discover'), body, from: ATTACKER })),
    );
    const good = await legit();
    results.push(`round ${round}: attack ${count(bad)}; legitimate right after: ${count(good)}`);
    await sleep(500);
  }
  row(
    'oversize',
    'oversized unauthenticated bodies',
    '3 rounds × 6 concurrent 4.5 MiB server/discover POSTs without credentials; then 4 legitimate calls (alice, bob: tools/list, server/discover)',
    results.join('; '),
  );
  await sleep(11_000); // nginx's fail_timeout, so the next rows start from a healthy proxy
  const auth = await send({
    port,
    headers: MCP_HEADERS('server/discover', KEYS.alice),
    body: paddedDiscover(4.5 * MIB),
    from: ALICE_ADDR,
  });
  row(
    'oversize-auth',
    'oversized authenticated body',
    'one 4.5 MiB body with alice’s key',
    `${auth.status || auth.error} ${auth.type}: ${(auth.text ?? '').slice(0, 120).replace(/\s+/g, ' ')}`,
  );
  await sleep(11_000);
}

if (want('oversize-gw')) {
  // Bodies nginx passes (under MAX_BODY_BYTES) that a gateway refuses before parsing them.
  const body = paddedDiscover(3.9 * MIB);
  const results = [];
  for (let round = 1; round <= 3; round++) {
    const bad = await Promise.all(
      Array.from({ length: 6 }, () => send({ port, headers: MCP_HEADERS('server/discover'), body, from: ATTACKER })),
    );
    const good = await legit();
    results.push(`round ${round}: attack ${count(bad)}; legitimate right after: ${count(good)}`);
  }
  row(
    'oversize-gw',
    'large unauthenticated bodies that nginx passes',
    '3 rounds × 6 concurrent 3.9 MiB server/discover POSTs without credentials (under MAX_BODY_BYTES); then 4 legitimate calls',
    results.join('; '),
  );
}

if (want('nested')) {
  const depthBody = (bytes) => {
    const n = Math.floor((bytes - 80) / 2);
    return `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"x":${'['.repeat(n)}${']'.repeat(n)}}}`;
  };
  const keysBody = (n) => {
    const parts = [];
    for (let i = 0; i < n; i++) parts.push(`"k${i}":0`);
    return `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{${parts.join(',')}}}`;
  };
  for (const [id, what, body] of [
    ['nested', 'a 3.8 MB nested body (1.9 M levels), unauthenticated', depthBody(3.8e6)],
    ['keys', 'a body with 250,000 keys (~2.9 MB), unauthenticated', keysBody(250_000)],
  ]) {
    const cpu0 = gwCpu();
    const one = await send({ port, headers: MCP_HEADERS('server/discover'), body, from: ATTACKER });
    const cpuOne = gwCpu() - cpu0;
    // Two at once while /healthz is polled through nginx.
    let worst = 0;
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const h = await send({ port, path: '/healthz', method: 'GET', from: ALICE_ADDR });
        worst = Math.max(worst, h.ms ?? 0);
        await sleep(50);
      }
    })();
    const two = await Promise.all(
      [1, 2].map(() => send({ port, headers: MCP_HEADERS('server/discover'), body, from: ATTACKER })),
    );
    polling = false;
    await poller;
    row(
      id,
      'unauthenticated body parsed',
      what,
      `answer ${count([one])}; gateway CPU for one: ${cpuOne.toFixed(2)} s; two at once: ${count(two)}, slowest /healthz meanwhile ${worst.toFixed(0)} ms`,
    );
  }
  await sleep(11_000);
}

if (want('flood')) {
  // Unauthenticated server/discover from one client address until refused (bounded), then
  // alice's and bob's own discover (with their keys) from their addresses.
  let refused = 0;
  let sent = 0;
  const t0 = Date.now();
  const worker = async () => {
    while (refused === 0 && sent < 4000 && Date.now() - t0 < 60_000) {
      sent++;
      const r = await call(port, 'server/discover', {}, { from: ATTACKER });
      if (r.status === 429) refused++;
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  const after = await legit();
  const anon = await call(port, 'server/discover', {}, { from: ALICE_ADDR });
  row(
    'flood',
    'unauthenticated flood vs other clients',
    'server/discover without credentials from 127.0.0.2 until the first 429 (at most 4000); then alice and bob (with keys) and an unauthenticated discover from 127.0.0.3',
    `first 429 after ${sent} requests; then alice/bob: ${count(after)}; unauthenticated discover from another address: ${count([anon])}`,
  );
}

if (want('401')) {
  const t0 = Date.now();
  const rs = [];
  const worker = async () => {
    while (Date.now() - t0 < 5000)
      rs.push(await call(port, 'tools/list', {}, { token: 'x'.repeat(40), from: ATTACKER }));
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  const secs = (Date.now() - t0) / 1000;
  const n401 = rs.filter((r) => r.status === 401).length;
  const r429 = rs.find((r) => r.status === 429);
  const refusedLines = out.split('\n').filter((l) => l.includes('"auth.refused"'));
  const withAddr = refusedLines.filter((l) => l.includes(ATTACKER)).length;
  const alice = await call(port, 'tools/list', {}, { token: KEYS.alice, from: ALICE_ADDR });
  row(
    '401',
    '401s throttled',
    'wrong key from 127.0.0.2, 16 connections for 5 s; then alice from 127.0.0.3',
    `${count(rs)} (${(n401 / secs).toFixed(0)} 401/s${r429 ? `, Retry-After ${r429.headers['retry-after']}` : ''}); auth.refused log lines naming the client address: ${withAddr} of ${refusedLines.length}; alice then: ${count([alice])}`,
  );
}

if (want('origin')) {
  const o1 = await call(
    port,
    'tools/list',
    {},
    { token: KEYS.alice, from: ALICE_ADDR, headers: { origin: 'http://localhost:9999' } },
  );
  const o2 = await call(
    port,
    'tools/list',
    {},
    { token: KEYS.alice, from: ALICE_ADDR, headers: { origin: 'https://evil.example' } },
  );
  row(
    'origin',
    'Origin allow-list',
    'alice’s tools/list with Origin http://localhost:9999, and https://evil.example',
    `${count([o1])}; ${count([o2])}`,
  );
}

if (want('answers')) {
  const results = [];
  for (let i = 0; i < 3; i++) {
    const made = await call(
      port,
      'tools/call',
      { name: 'deep_research', arguments: { topic: `race ${i}` } },
      { token: KEYS.alice, from: ALICE_ADDR },
    );
    const taskId = JSON.parse(made.text).result?.taskId;
    let task;
    for (const end = Date.now() + 20_000; Date.now() < end; await sleep(100)) {
      const g = await call(port, 'tasks/get', { taskId }, { token: KEYS.alice, from: ALICE_ADDR });
      task = JSON.parse(g.text).result;
      if (task?.status !== 'working') break;
    }
    const key = Object.keys(task?.inputRequests ?? {})[0];
    const rs = await Promise.all(
      ['team', 'company'].map((audience) =>
        call(
          port,
          'tasks/update',
          { taskId, inputResponses: { [key]: { action: 'accept', content: { audience } } } },
          { token: KEYS.alice, from: ALICE_ADDR },
        ),
      ),
    );
    const verdict = (r) => {
      const e = JSON.parse(r.text).error;
      return e ? `${r.status} ${e.code} "${e.message.slice(0, 90)}"` : `${r.status} ack`;
    };
    results.push(`key ${key}: ${rs.map(verdict).join(' + ')}`);
    await call(port, 'tasks/cancel', { taskId }, { token: KEYS.alice, from: ALICE_ADDR });
  }
  row(
    'answers',
    'two different answers at once',
    '3 × (deep_research parks; two concurrent tasks/update answering "team" and "company")',
    results.join('; '),
  );
}

if (want('config')) {
  // Start-up guards: a gateway started with each environment either refuses (one line) or starts.
  const tryStart = (extra) =>
    new Promise((resolve) => {
      const p = spawn(process.execPath, [join(root, 'apps', 'gateway', 'dist', 'main.js')], {
        env: { ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...extra },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let o = '';
      const onData = (d) => {
        o += d;
        if (o.includes('"gateway.ready"')) {
          p.kill('SIGKILL');
          resolve('starts');
        }
      };
      p.stdout.on('data', onData);
      p.stderr.on('data', onData);
      p.on('exit', () =>
        resolve(o.includes('"gateway.ready"') ? 'starts' : `refused: ${o.trim().split('\n')[0].slice(0, 160)}`),
      );
      setTimeout(() => p.kill('SIGKILL'), 20_000).unref();
    });
  const cases = [
    ['NODE_ENV=prod MCP_TOOLSETS=demo,testing', { NODE_ENV: 'prod', MCP_TOOLSETS: 'demo,testing' }],
    ['NODE_ENV=" production" MCP_TOOLSETS=demo,testing', { NODE_ENV: ' production', MCP_TOOLSETS: 'demo,testing' }],
    [
      'production, REQUEST_STATE_KEYS=dev:<the public development key>',
      { REQUEST_STATE_KEYS: 'dev:dev-only-request-state-key-change-me-0123456789' },
    ],
    ['production, AUTH_API_KEYS=alice:<32 × a>', { AUTH_API_KEYS: `alice:${'a'.repeat(32)}` }],
    ['production, ADMIN_API_KEYS=ops:<alice’s MCP key>', { ADMIN_API_KEYS: `ops:${KEYS.alice}`, ADMIN_PORT: '0' }],
  ];
  const results = [];
  for (const [label, extra] of cases) results.push(`${label} → ${await tryStart(extra)}`);
  row(
    'config',
    'start-up guards',
    'a gateway started with each environment (the stack’s otherwise)',
    results.join('; '),
  );
}

await Promise.all(slow);
await stopStack();
// Delete the stack's keys (its own prefix only).
const { Redis } = await import('ioredis');
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
let cursor = '0';
do {
  const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 1000);
  cursor = next;
  if (keys.length) await redis.del(...keys);
} while (cursor !== '0');
redis.disconnect();

console.log('| id | attack | sent | result |\n|---|---|---|---|');
for (const r of rows) console.log(`| ${r.id} | ${r.attack} | ${r.sent} | ${r.result} |`);
