// @needs redis redis-server
/**
 * The entry points as a person meets them (issue 11 §3):
 *  - `--help` and `--version` on the gateway, the worker and `npm start` answer at once and start
 *    nothing: no connection reaches the Redis of REDIS_URL (a listening socket that counts
 *    them), no port is taken; an unknown option is one line and exit 2;
 *  - the start-up lines (`gateway.ready`, `worker.ready`) name the Redis with its password
 *    redacted, the key prefix, the tool sets, the modules and the authentication modes; the
 *    password appears in no line; the worker's tool advert expires.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
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
