/**
 * docker-compose.yml, checked offline (there is no Docker here; the same topology runs in
 * test/e2e/topology.test.ts with a local nginx and the same nginx template): the services the
 * topology needs, Redis persistence and eviction settings, env names the configuration reads,
 * nginx wired to the template (every placeholder given, the gateways it names exist on the
 * port they listen on), and stop grace periods that cover the drain.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '@mcp-tasks/config';
import { PLACEHOLDERS, TEMPLATE_PATH } from '../../deploy/nginx/render.mjs';
import { ROOT } from '../support/cluster.js';

type Obj = Record<string, any>;
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as Obj;
const services = compose.services as Record<string, Obj>;
const gateways = Object.keys(services).filter((n) => /^gateway-\d+$/.test(n));
/** Compose's `${VAR:-default}` / `${VAR:?message}` → the default (or a stand-in), `$$` → `$`. */
const interpolate = (v: string, standIn = 'x') =>
  String(v)
    .replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')
    .replace(/\$\{[A-Z_]+:\?[^}]*\}/g, standIn)
    .replace(/\$\$/g, '$');
/** Compose durations such as `30s`, in ms. */
const durationMs = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1]) * 1000;

describe('docker-compose.yml: the scaled topology', () => {
  it('Redis with AOF, noeviction and maxmemory; two gateways; two workers; nginx', () => {
    const cmd = (services.redis!.command as string[]).join(' ');
    assert.match(cmd, /--appendonly yes/);
    assert.match(cmd, /--maxmemory-policy noeviction/);
    assert.match(cmd, /--maxmemory \d+mb/);
    assert.ok(services.redis!.volumes?.some((v: string) => v.endsWith(':/data')), 'Redis data on a volume');
    assert.deepEqual(gateways, ['gateway-1', 'gateway-2']);
    assert.equal(services.worker!.deploy?.replicas, 2);
    assert.ok(services.nginx, 'nginx in front');
    for (const g of gateways) assert.equal(services[g]!.ports, undefined, `${g} publishes no port: clients go through nginx`);
  });

  it('every variable given to a gateway or worker is one the configuration reads, and the values load', () => {
    const known = new Set(CONFIG_VARIABLES);
    for (const name of [...gateways, 'worker']) {
      const env = services[name]!.environment as Record<string, string>;
      assert.deepEqual(Object.keys(env).filter((k) => !known.has(k)), [], name);
    }
    const gw = Object.fromEntries(Object.entries(services['gateway-1']!.environment as Record<string, string>).map(([k, v]) => [k, interpolate(v)]));
    Object.assign(gw, { AUTH_API_KEYS: 'alice:0123456789abcdef0123456789abcdef', REQUEST_STATE_KEYS: 'k1:0123456789abcdef0123456789abcdef0123456789' });
    assert.equal(loadConfig(gw).env, 'production');
  });

  it('nginx is wired to deploy/nginx: mounted files exist, every placeholder is given, the gateways it names exist on their PORT, the published port is the listen port', () => {
    const n = services.nginx!;
    const mounts = (n.volumes as string[]).map((v) => v.split(':'));
    for (const [host] of mounts) assert.ok(existsSync(join(ROOT, host!)), `${host} exists`);
    const template = mounts.find(([, target]) => target!.startsWith('/etc/nginx/templates/'));
    assert.ok(template, 'the template is mounted where the nginx image renders templates');
    assert.equal(join(ROOT, template[0]!), TEMPLATE_PATH);
    const main = readFileSync(join(ROOT, mounts.find(([, target]) => target === '/etc/nginx/nginx.conf')![0]!), 'utf8');
    assert.match(main, new RegExp(`include /etc/nginx/conf\\.d/${basename(template[1]!, '.template').replace('.', '\\.')};`), 'nginx.conf includes the rendered template');

    const env = n.environment as Record<string, string>;
    for (const p of PLACEHOLDERS) assert.ok(env[p], `${p} is set`);
    const filter = new RegExp(interpolate(env.NGINX_ENVSUBST_FILTER!));
    assert.deepEqual(Object.keys(env).filter((k) => filter.test(k)).sort(), [...PLACEHOLDERS].sort(), 'envsubst substitutes the placeholders and nothing else');
    const used = [...readFileSync(TEMPLATE_PATH, 'utf8').matchAll(/\$\{([A-Z_]+)\}/g)].map((m) => m[1]!);
    assert.deepEqual([...new Set(used)].sort(), [...PLACEHOLDERS].sort(), 'the template uses exactly these placeholders');

    const servers = [...env.MCP_GATEWAYS!.matchAll(/server ([\w.-]+):(\d+);/g)].map((m) => ({ host: m[1]!, port: Number(m[2]) }));
    assert.deepEqual(servers.map((s) => s.host), gateways, 'nginx names every gateway');
    for (const s of servers) assert.equal(Number(services[s.host]!.environment.PORT), s.port, `${s.host} listens on ${s.port}`);
    const published = (n.ports as string[]).map((p) => Number(p.split(':').at(-1)));
    assert.deepEqual(published, [Number(env.NGINX_LISTEN)]);
    for (const g of gateways) assert.equal(n.depends_on[g]?.condition, 'service_healthy', `nginx starts after ${g} is ready`);
  });

  it('stop grace periods cover the drain (SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS + 4 s for gateways; SHUTDOWN_GRACE_MS + 5 s for workers)', () => {
    const defaults = loadConfig({}, { role: 'worker' }).worker;
    for (const g of gateways) assert.ok(durationMs(services[g]!.stop_grace_period) >= defaults.drainDelayMs + defaults.shutdownGraceMs + 4000, g);
    assert.ok(durationMs(services.worker!.stop_grace_period) >= defaults.shutdownGraceMs + 5000);
  });
});
