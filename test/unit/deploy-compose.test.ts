/**
 * docker-compose.yml, checked offline (there is no Docker here; the same topology runs in
 * test/e2e/topology.test.ts with a local nginx and the same nginx template): the services the
 * topology needs, Redis persistence and eviction settings, env names the configuration reads,
 * what the app containers get from a `.env` copied from .env.example (rendered with compose's
 * interpolation and precedence rules, test/support/compose-env.ts): production, every address,
 * whatever `.env` says; nginx wired to the template (every placeholder given, the gateways it
 * names exist on the port they listen on), and stop grace periods that cover the drain.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '@mcp-tasks/config';
import { PLACEHOLDERS, TEMPLATE_PATH } from '../../deploy/nginx/render.mjs';
import { ROOT } from '../support/cluster.js';
import { ComposeError, interpolate as composeInterpolate, renderCompose } from '../support/compose-env.js';
import { SHUTDOWN_MARGIN_MS } from '../../apps/gateway/src/shutdown.js';

type Obj = Record<string, any>;
/** The two values the compose header asks to put in .env. */
const KEYS = [
  'AUTH_API_KEYS=alice:0123456789abcdef0123456789abcdef',
  'REQUEST_STATE_KEYS=k1:0123456789abcdef0123456789abcdef0123456789',
].join('\n');
const ENV_EXAMPLE = readFileSync(join(ROOT, '.env.example'), 'utf8');
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as Obj;
const services = compose.services as Record<string, Obj>;
const gateways = Object.keys(services).filter((n) => /^gateway-\d+$/.test(n));
/** Compose durations such as `30s`, in ms. */
const durationMs = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1]) * 1000;

describe('docker-compose.yml: the scaled topology', () => {
  it('Redis with AOF, noeviction and maxmemory; two gateways; two workers; nginx', () => {
    const cmd = (services.redis!.command as string[]).join(' ');
    assert.match(cmd, /--appendonly yes/);
    assert.match(cmd, /--maxmemory-policy noeviction/);
    assert.match(cmd, /--maxmemory \d+mb/);
    assert.ok(
      services.redis!.volumes?.some((v: string) => v.endsWith(':/data')),
      'Redis data on a volume',
    );
    assert.deepEqual(gateways, ['gateway-1', 'gateway-2']);
    assert.equal(services.worker!.deploy?.replicas, 2);
    assert.ok(services.nginx, 'nginx in front');
    for (const g of gateways)
      assert.equal(services[g]!.ports, undefined, `${g} publishes no port: clients go through nginx`);
  });

  it('every variable given to a gateway or worker is one the configuration reads, and the values load', () => {
    const known = new Set(CONFIG_VARIABLES);
    for (const name of [...gateways, 'worker']) {
      const env = services[name]!.environment as Record<string, string>;
      assert.deepEqual(
        Object.keys(env).filter((k) => !known.has(k)),
        [],
        name,
      );
    }
    const project = renderCompose(ROOT, KEYS);
    assert.equal(loadConfig(project.environmentOf('gateway-1')).env, 'production');
    loadConfig(project.environmentOf('worker'), { role: 'worker' });
  });

  it('nginx is wired to deploy/nginx: mounted files exist, every placeholder is given, the gateways it names exist on their PORT, the published port is the listen port', () => {
    const n = services.nginx!;
    const mounts = (n.volumes as string[]).map((v) => v.split(':'));
    for (const [host] of mounts) assert.ok(existsSync(join(ROOT, host!)), `${host} exists`);
    const template = mounts.find(([, target]) => target!.startsWith('/etc/nginx/templates/'));
    assert.ok(template, 'the template is mounted where the nginx image renders templates');
    assert.equal(join(ROOT, template[0]!), TEMPLATE_PATH);
    const main = readFileSync(join(ROOT, mounts.find(([, target]) => target === '/etc/nginx/nginx.conf')![0]!), 'utf8');
    assert.match(
      main,
      new RegExp(`include /etc/nginx/conf\\.d/${basename(template[1]!, '.template').replace('.', '\\.')};`),
      'nginx.conf includes the rendered template',
    );

    const env = n.environment as Record<string, string>;
    for (const p of PLACEHOLDERS) assert.ok(env[p], `${p} is set`);
    const filter = new RegExp(composeInterpolate(env.NGINX_ENVSUBST_FILTER!, {}));
    assert.deepEqual(
      Object.keys(env)
        .filter((k) => filter.test(k))
        .sort(),
      [...PLACEHOLDERS].sort(),
      'envsubst substitutes the placeholders and nothing else',
    );
    const used = [...readFileSync(TEMPLATE_PATH, 'utf8').matchAll(/\$\{([A-Z_]+)\}/g)].map((m) => m[1]!);
    assert.deepEqual(
      [...new Set(used)].sort(),
      [...PLACEHOLDERS].sort(),
      'the template uses exactly these placeholders',
    );

    const servers = [...env.MCP_GATEWAYS!.matchAll(/server ([\w.-]+):(\d+)(?: [^;]*)?;/g)].map((m) => ({
      host: m[1]!,
      port: Number(m[2]),
    }));
    assert.deepEqual(
      servers.map((s) => s.host),
      gateways,
      'nginx names every gateway',
    );
    for (const s of servers)
      assert.equal(Number(services[s.host]!.environment.PORT), s.port, `${s.host} listens on ${s.port}`);
    const published = (n.ports as string[]).map((p) => Number(p.split(':').at(-1)));
    assert.deepEqual(published, [Number(env.NGINX_LISTEN)]);
    for (const g of gateways)
      assert.equal(n.depends_on[g]?.condition, 'service_healthy', `nginx starts after ${g} is ready`);
  });

  it('stop grace periods cover the drain (SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS for gateways; SHUTDOWN_GRACE_MS + 5 s for workers)', () => {
    const defaults = loadConfig({}, { role: 'worker' }).worker;
    for (const g of gateways)
      assert.ok(
        durationMs(services[g]!.stop_grace_period) >=
          defaults.drainDelayMs + defaults.shutdownGraceMs + SHUTDOWN_MARGIN_MS,
        g,
      );
    assert.ok(durationMs(services.worker!.stop_grace_period) >= defaults.shutdownGraceMs + 5000);
  });
});

describe('docker-compose.yml with a .env: the app containers are production services on every address, whatever .env says', () => {
  const apps = [...gateways, 'worker'];

  it('compose interpolation as the Compose Specification defines it (the rules the rendering below relies on)', () => {
    const v = { SET: 'x', EMPTY: '' };
    assert.equal(composeInterpolate('${SET:-d} ${EMPTY:-d} ${UNSET:-d}', v), 'x d d');
    assert.equal(composeInterpolate('${SET-d}|${EMPTY-d}|${UNSET-d}', v), 'x||d');
    assert.equal(composeInterpolate('${SET:+r}|${EMPTY:+r}|${EMPTY+r}|${UNSET+r}', v), 'r||r|');
    assert.equal(composeInterpolate('$SET-$$SET-${UNSET}-${UNSET:-${SET}}', v), 'x-$SET--x');
    assert.throws(() => composeInterpolate('${EMPTY:?say why}', v), /EMPTY is missing a value: say why/);
    assert.equal(composeInterpolate('${EMPTY?say why}', v), '');
    assert.throws(() => composeInterpolate('${UNSET?say why}', v), ComposeError);
  });

  it('`cp .env.example .env` plus the two keys the header asks for: NODE_ENV=production, HOST=0.0.0.0, the worker on 0.0.0.0:9464; the configurations load', () => {
    const project = renderCompose(ROOT, `${ENV_EXAMPLE}\n${KEYS}\n`);
    for (const name of apps) {
      const env = project.environmentOf(name);
      assert.equal(env.NODE_ENV, 'production', `${name}: NODE_ENV`);
      assert.equal(env.HOST, '0.0.0.0', `${name}: HOST`);
      assert.equal(env.REDIS_URL, 'redis://redis:6379', `${name}: the compose Redis`);
    }
    for (const g of gateways) {
      const cfg = loadConfig(project.environmentOf(g));
      assert.equal(cfg.env, 'production');
      assert.equal(cfg.host, '0.0.0.0');
      assert.equal(cfg.port, 3000);
    }
    const worker = loadConfig(project.environmentOf('worker'), { role: 'worker' });
    assert.equal(worker.env, 'production');
    assert.deepEqual(worker.workerHttp, { host: '0.0.0.0', port: 9464, freePortIfTaken: false });
  });

  it('a .env (and a shell) that say otherwise change none of it', () => {
    const hostile = [
      'NODE_ENV=development',
      'HOST=127.0.0.1',
      'PORT=8123',
      'REDIS_URL=redis://127.0.0.1:6379',
      'WORKER_HTTP_PORT=0',
      'WORKER_HTTP_HOST=127.0.0.1',
      KEYS,
    ].join('\n');
    const project = renderCompose(ROOT, hostile, { NODE_ENV: 'development', HOST: '127.0.0.1' });
    for (const name of apps) {
      const env = project.environmentOf(name);
      assert.equal(env.NODE_ENV, 'production', `${name}: NODE_ENV`);
      assert.equal(env.HOST, '0.0.0.0', `${name}: HOST`);
      assert.equal(env.REDIS_URL, 'redis://redis:6379', `${name}: REDIS_URL`);
    }
    for (const g of gateways) assert.equal(project.environmentOf(g).PORT, '3000');
    const w = project.environmentOf('worker');
    assert.equal(w.WORKER_HTTP_PORT, '9464');
    assert.equal(w.WORKER_HTTP_HOST, '0.0.0.0');
    // What the image itself sets is overridden by nothing either (Dockerfile ENV).
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^ENV NODE_ENV=production/m);
  });

  it('.env.example copied alone: compose refuses to start, naming AUTH_API_KEYS (no gateway without authentication)', () => {
    assert.throws(
      () => renderCompose(ROOT, ENV_EXAMPLE),
      (e: Error) => e instanceof ComposeError && /AUTH_API_KEYS is missing a value/.test(e.message),
    );
  });

  it('.env.example itself sets neither NODE_ENV nor HOST (copied for npm start, it keeps the development defaults)', () => {
    assert.doesNotMatch(ENV_EXAMPLE, /^NODE_ENV=/m);
    assert.doesNotMatch(ENV_EXAMPLE, /^HOST=/m);
    assert.match(ENV_EXAMPLE, /^# NODE_ENV=development$/m);
    assert.match(ENV_EXAMPLE, /^# HOST=127\.0\.0\.1$/m);
  });
});
