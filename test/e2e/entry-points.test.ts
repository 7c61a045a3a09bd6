// @needs nginx redis redis-server
/**
 * The entry points as a person meets them (issue 11 §3):
 *  - `--help` and `--version` on the gateway, the worker and `npm start` answer at once and start
 *    nothing: no connection reaches the Redis of REDIS_URL (a listening socket that counts
 *    them), no port is taken; an unknown option is one line and exit 2;
 *  - the same for every other entry point a person is told to run (`npm run stack`,
 *    `npm run bench`, `mcp-tasks`, scripts/conformance.mjs, scripts/python-clients.mjs,
 *    scripts/inspector.mjs): no connection to Redis or to the MCP URL, no port taken, and no
 *    `redis-server`, `nginx`, `npm` or `python3` run (stand-ins first on PATH record a start);
 *  - the start-up lines (`gateway.ready`, `worker.ready`) name the Redis with its password
 *    redacted, the key prefix, the tool sets, the modules and the authentication modes; the
 *    password appears in no line; the worker's tool advert expires.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort, ROOT, startCluster, startRedis, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { rpc } from '../support/mcp.js';

const ENTRY = {
  gateway: [join(ROOT, 'apps', 'gateway', 'src', 'main.ts')],
  worker: [join(ROOT, 'apps', 'worker', 'src', 'main.ts')],
  start: [join(ROOT, 'scripts', 'start.mjs')],
} as const;

function run(which: keyof typeof ENTRY, args: string[], env: Record<string, string | undefined>) {
  const node = which === 'start' ? [] : ['--conditions=mcp-tasks-src', '--import', 'tsx'];
  const full: Record<string, string | undefined> = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete full[k];
  const r = spawnSync(process.execPath, [...node, ...ENTRY[which], ...args], {
    cwd: ROOT,
    env: full as NodeJS.ProcessEnv,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('--help and --version start nothing', () => {
  let fakeRedis: Server;
  let redisPort: number;
  let connections = 0;
  before(async () => {
    fakeRedis = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => fakeRedis.listen(0, '127.0.0.1', r));
    redisPort = (fakeRedis.address() as { port: number }).port;
  });
  after(() => fakeRedis.close());

  for (const which of ['gateway', 'worker', 'start'] as const) {
    it(`${which}: --help and -h print the usage and the main variables; --version and -v the version; exit 0`, async () => {
      const port = await freePort();
      // start: without REDIS_URL it would look at LOCAL_REDIS_PORT, which is the counting socket too.
      const env = {
        REDIS_URL: which === 'start' ? undefined : `redis://127.0.0.1:${redisPort}`,
        LOCAL_REDIS_PORT: String(redisPort),
        PORT: String(port),
      };
      for (const flag of ['--help', '-h']) {
        const r = run(which, [flag], env);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '');
        assert.match(r.stdout, which === 'start' ? /^Usage: npm start/ : new RegExp(`^Usage: npm run ${which}`));
        for (const v of ['REDIS_URL', 'MCP_TOOL_MODULES', '.env.example', '--version'])
          assert.ok(r.stdout.includes(v), `${which} --help names ${v}`);
        if (which === 'start') assert.match(r.stdout, /LOCAL_REDIS_PORT/);
        if (which === 'gateway') assert.match(r.stdout, /AUTH_API_KEYS/);
      }
      for (const flag of ['--version', '-v']) {
        const r = run(which, [flag], env);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout, `mcp-task-service ${which} 0.1.0\n`);
      }
      const bad = run(which, ['--frobnicate'], env);
      assert.equal(bad.code, 2);
      assert.equal(bad.stdout, '');
      assert.equal(
        bad.stderr,
        `${which}: Unknown option '--frobnicate' (the configuration comes from the environment; try --help)\n`,
      );
      assert.equal(connections, 0, 'nothing connected to Redis');
      // The port is still free: nothing listened on it.
      await new Promise<void>((resolve, reject) => {
        const s = createServer()
          .once('error', reject)
          .listen(port, '127.0.0.1', () => s.close(() => resolve()));
      });
    });
  }

  it('--help does not need a valid configuration', () => {
    const r = run('gateway', ['--help'], {
      PORT: 'not-a-port',
      MCP_TOOLSETS: 'nope',
      MCP_TOOL_MODULES: './no/such.mjs',
    });
    assert.equal(r.code, 0, r.stderr);
  });
});

/** The other entry points: node arguments, and the version line they print (undefined: their own). */
const OTHERS = {
  stack: { args: [join(ROOT, 'scripts', 'stack.mjs')], usage: /^Usage: npm run stack/ },
  bench: { args: ['--import', 'tsx', join(ROOT, 'bench', 'run.ts')], usage: /^Usage: npm run bench/ },
  'mcp-tasks': { args: [join(ROOT, 'apps', 'cli', 'bin', 'mcp-tasks.js')], usage: /^Usage: mcp-tasks/ },
  conformance: { args: [join(ROOT, 'scripts', 'conformance.mjs')], usage: /^usage: node scripts\/conformance\.mjs/ },
  'python-clients': {
    args: [join(ROOT, 'scripts', 'python-clients.mjs')],
    usage: /^Usage: node scripts\/python-clients\.mjs/,
  },
  inspector: { args: [join(ROOT, 'scripts', 'inspector.mjs')], usage: /^Usage: node scripts\/inspector\.mjs/ },
} as const;

describe('every other entry point: --help and --version start nothing', () => {
  let listener: Server;
  let listenPort: number;
  let connections = 0;
  let fakeBin: string;
  const STAND_INS = ['redis-server', 'nginx', 'npm', 'python3'];
  before(async () => {
    listener = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    listenPort = (listener.address() as { port: number }).port;
    // Stand-ins for what these entry points start: each records that it ran, then fails.
    fakeBin = mkdtempSync(join(tmpdir(), 'mcp-entry-bin-'));
    for (const name of STAND_INS) {
      const file = join(fakeBin, name);
      writeFileSync(file, `#!/bin/sh\ntouch "${fakeBin}/started-${name}"\nexit 1\n`);
      chmodSync(file, 0o755);
    }
  });
  after(() => {
    listener.close();
    rmSync(fakeBin, { recursive: true, force: true });
  });

  for (const [name, entry] of Object.entries(OTHERS)) {
    it(`${name}: --help and -h print the usage, --version the version; exit 0; nothing started`, async () => {
      const port = await freePort();
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PATH: `${fakeBin}${delimiter}${process.env.PATH ?? ''}`,
        NGINX_BIN: join(fakeBin, 'nginx'),
        REDIS_URL: `redis://127.0.0.1:${listenPort}`,
        MCP_TASKS_URL: `http://127.0.0.1:${listenPort}/mcp`,
        PORT: String(port),
      };
      const run = (flags: string[]) => {
        const r = spawnSync(process.execPath, [...entry.args, ...flags], {
          cwd: ROOT,
          env,
          encoding: 'utf8',
          timeout: 30_000,
        });
        return { code: r.status, stdout: r.stdout, stderr: r.stderr };
      };
      for (const flag of ['--help', '-h']) {
        const r = run([flag]);
        assert.equal(r.code, 0, `${name} ${flag}: ${r.stderr}`);
        assert.match(r.stdout, entry.usage);
        assert.match(r.stdout, /--version/, `${name} --help names --version`);
      }
      const v = run(['--version']);
      assert.equal(v.code, 0, v.stderr);
      assert.equal(v.stdout, name === 'mcp-tasks' ? '0.1.0\n' : `mcp-task-service ${name} 0.1.0\n`);
      if (name !== 'inspector') {
        // (the Inspector's own options pass through: only a lone --help / --version is the script's)
        const bad = run(['--frobnicate']);
        assert.equal(bad.code, 2, bad.stderr);
        assert.equal(bad.stdout, '');
        assert.match(bad.stderr, /--frobnicate/);
      }
      assert.equal(connections, 0, 'nothing connected to Redis or to the MCP URL');
      assert.deepEqual(
        readdirSync(fakeBin).filter((f) => f.startsWith('started-')),
        [],
        'no redis-server, nginx, npm or python3 was run',
      );
      await new Promise<void>((resolve, reject) => {
        const s = createServer()
          .once('error', reject)
          .listen(port, '127.0.0.1', () => s.close(() => resolve()));
      });
    });
  }
});

describe('start-up lines name what the process uses', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  const SECRET = 'pw-7f3a9c-do-not-log';
  before(async () => {
    // A Redis user with a password (the default user stays open for the harness's own client).
    redis = await startRedis(['--user', 'svc', 'on', `>${SECRET}`, '~*', '&*', '+@all']);
    c = await startCluster({
      redisUrl: `redis://svc:${SECRET}@127.0.0.1:${redis.port}/0`,
      env: {
        MCP_TOOLSETS: 'demo,testing',
        MCP_TOOL_MODULES: './examples/tools',
        AUTH_API_KEYS: 'ci:ci-api-key-0123456789abcdef,ops:ops-api-key-0123456789abcdef',
      },
    });
  });
  after(async () => {
    await c?.stop();
    await redis?.stop();
  });

  it('gateway.ready and worker.ready: Redis (password redacted), key prefix, tool sets, modules; the gateway its auth modes', async () => {
    const g = c.gateways[0]!.logs.find((l) => l.msg === 'gateway.ready')!;
    const w = c.workers[0]!.logs.find((l) => l.msg === 'worker.ready')!;
    for (const line of [g, w]) {
      assert.equal(line.redis, `redis://svc:***@127.0.0.1:${redis.port}/0`);
      assert.equal(line.keyPrefix, c.prefix);
      assert.deepEqual(line.toolsets, ['demo', 'testing']);
      assert.deepEqual(line.toolModules, ['./examples/tools']);
    }
    assert.deepEqual(g.auth, ['api-keys(2)']);
    assert.ok(!('auth' in w), 'workers do not authenticate');
    assert.equal(typeof w.workerId, 'string');
    // The gateway works on that Redis (a tool from the module is listed).
    const list = await rpc(c.urls[0]!, 'tools/list', {}, { token: 'ci-api-key-0123456789abcdef' });
    assert.ok((list.body.result!.tools as { name: string }[]).some((t) => t.name === 'release_notes'));
    for (const p of [...c.gateways, ...c.workers]) {
      for (const l of p.logs)
        assert.ok(!JSON.stringify(l).includes(SECRET), `no line carries the password: ${JSON.stringify(l)}`);
    }
  });

  it("the worker's tool advert is one expiring hash field per worker", async () => {
    const key = `${c.prefix}:worker-tools`;
    const ttl = await c.redis.pttl(key);
    assert.ok(ttl > 0 && ttl <= 15_000, `expires (pttl ${ttl})`);
    const ads = await c.redis.hgetall(key);
    const [ad] = Object.values(ads);
    assert.equal(Object.keys(ads).length, 1);
    assert.ok(JSON.parse(ad!).tools.includes('release_notes'));
  });
});
