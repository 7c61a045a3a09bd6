/**
 * The Kubernetes manifests (k8s/, kustomize), checked offline (issue 9, Kubernetes):
 *  - `kubectl kustomize k8s/` renders (kubectl: `.ci/run` installs it when apt can; without it,
 *    the same rendering is done here from kustomization.yaml, and when kubectl is there the two
 *    are compared, so the fallback stays faithful);
 *  - every object has what its kind requires, and every reference resolves (selectors, Service
 *    ports, HPA/KEDA targets, ConfigMap/Secret names and keys, the StatefulSet's Service);
 *  - every environment variable given to the gateway and the worker is one the configuration
 *    reads (packages/config CONFIG_VARIABLES), and the values load (`loadConfig`), while the
 *    Secret's placeholders are refused;
 *  - container ports and probe paths match the app (the routes registered in apps/*\/src, the
 *    port the configuration gives, the Dockerfile's EXPOSE);
 *  - terminationGracePeriodSeconds covers the drain (preStop + SHUTDOWN_DRAIN_DELAY_MS +
 *    SHUTDOWN_GRACE_MS + the closing steps of apps/*\/src/main.ts);
 *  - Redis runs with AOF, noeviction and a maxmemory under its memory limit.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { accessSync, constants, readdirSync, readFileSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { parseAllDocuments, parse } from 'yaml';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '@mcp-tasks/config';
import { ROOT } from '../support/cluster.js';

type Obj = Record<string, any>;
const K8S = join(ROOT, 'k8s');

/** kubectl on PATH (or $KUBECTL_BIN). */
function findKubectl(): string | undefined {
  for (const c of [process.env.KUBECTL_BIN, ...(process.env.PATH ?? '').split(delimiter).filter(Boolean).map((d) => join(d, 'kubectl'))]) {
    if (!c) continue;
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // not here
    }
  }
  return undefined;
}

const docs = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length) throw new Error(d.errors.map((e) => e.message).join('; '));
      return d.toJS() as Obj | null;
    })
    .filter((o): o is Obj => !!o);

/**
 * What `kubectl kustomize k8s/` does with this kustomization: the listed resources, the
 * `labels` added to every object's metadata (includeSelectors false), `images` rewritten. Only
 * the features kustomization.yaml uses; anything else is refused, so it cannot drift silently.
 */
function renderHere(): Obj[] {
  const k = parse(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8')) as Obj;
  const known = new Set(['apiVersion', 'kind', 'labels', 'resources', 'images']);
  const unknown = Object.keys(k).filter((x) => !known.has(x));
  assert.deepEqual(unknown, [], 'kustomization.yaml uses features the offline rendering does not know: extend renderHere()');
  const objects = (k.resources as string[]).flatMap((f) => docs(readFileSync(join(K8S, f), 'utf8')));
  for (const o of objects) {
    for (const l of k.labels ?? []) {
      assert.equal(l.includeSelectors ?? false, false);
      o.metadata.labels = { ...o.metadata.labels, ...l.pairs };
    }
    for (const c of podSpec(o)?.containers ?? []) {
      const img = (k.images ?? []).find((i: Obj) => i.name === c.image);
      if (img) c.image = `${img.newName ?? img.name}${img.newTag ? `:${img.newTag}` : ''}`;
    }
  }
  return objects;
}

/** The pod spec of a workload, if `o` is one. */
function podSpec(o: Obj): Obj | undefined {
  return ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].includes(o.kind) ? o.spec?.template?.spec : undefined;
}

const key = (o: Obj) => `${o.kind}/${o.metadata?.name}`;
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

const kubectl = findKubectl();
const rendered: Obj[] = kubectl ? docs(execFileSync(kubectl, ['kustomize', K8S], { encoding: 'utf8' })) : renderHere();
const byKey = new Map(rendered.map((o) => [key(o), o]));
const get = (kind: string, name: string) => byKey.get(`${kind}/${name}`);
const workloads = rendered.filter((o) => podSpec(o));
/** The service's own containers (the image kustomization.yaml sets). */
const appImage = (parse(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8')) as Obj).images[0].newName as string;
const appContainer = (o: Obj) => (podSpec(o)!.containers as Obj[]).find((c) => String(c.image).startsWith(appImage))!;
const gateway = get('Deployment', 'mcp-gateway')!;
const worker = get('Deployment', 'mcp-worker')!;

/** ConfigMap and Secret values, by name. */
const dataOf = (kind: 'ConfigMap' | 'Secret', name: string): Record<string, string> | undefined => {
  const o = get(kind, name);
  if (!o) return undefined;
  if (kind === 'ConfigMap') return o.data ?? {};
  return { ...Object.fromEntries(Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()])), ...(o.stringData ?? {}) };
};

/** The environment a container gets: envFrom sources, then env (which wins), as Kubernetes does. */
function envOf(c: Obj, secretOverrides: Record<string, string> = {}): { env: Record<string, string>; names: string[] } {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    const src = from.configMapRef ? dataOf('ConfigMap', from.configMapRef.name) : dataOf('Secret', from.secretRef.name);
    Object.assign(env, src);
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      const r = e.valueFrom.secretKeyRef;
      const v = secretOverrides[r.key] ?? dataOf('Secret', r.name)?.[r.key];
      if (v !== undefined) env[e.name] = v;
    } else if (e.valueFrom?.configMapKeyRef) {
      const r = e.valueFrom.configMapKeyRef;
      const v = dataOf('ConfigMap', r.name)?.[r.key];
      if (v !== undefined) env[e.name] = v;
    }
  }
  return { env, names: Object.keys(env) };
}

/** Valid stand-ins for the Secret's placeholders (the placeholders themselves must be refused). */
const VALID_SECRETS = {
  AUTH_API_KEYS: 'alice:0123456789abcdef0123456789abcdef',
  REQUEST_STATE_KEYS: 'k1:0123456789abcdef0123456789abcdef0123456789',
};

/** Paths the app registers (`app.get('/x'`, `url: '/x'`) in the `.ts` files under `dir`. */
function routesIn(dir: string): Set<string> {
  const out = new Set<string>();
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts')) {
        const text = readFileSync(p, 'utf8');
        for (const m of text.matchAll(/\.(?:get|post|head|all)\(\s*'(\/[^']*)'/g)) out.add(m[1]!);
        for (const m of text.matchAll(/\burl:\s*'(\/[^']*)'/g)) out.add(m[1]!);
        // The operations server (packages/observability/src/ops-server.ts) matches paths itself.
        for (const m of text.matchAll(/\bpath === '(\/[^']*)'/g)) out.add(m[1]!);
      }
    }
  };
  walk(dir);
  return out;
}

/** HTTP probes of a container: [kind, path, port]. */
const httpProbes = (c: Obj) =>
  (['startupProbe', 'readinessProbe', 'livenessProbe'] as const).filter((p) => c[p]?.httpGet).map((p) => [p, c[p].httpGet.path as string, c[p].httpGet.port as string | number] as const);

/** A probe/targetPort value resolved to a container port number (by name or number). */
const portNumber = (c: Obj, port: string | number) => (typeof port === 'number' ? port : (c.ports ?? []).find((p: Obj) => p.name === port)?.containerPort);

describe('k8s/: kubectl kustomize renders, every object is complete and every reference resolves', () => {
  it('renders', (t) => {
    t.diagnostic(kubectl ? `rendered with ${kubectl} kustomize` : 'kubectl not found: rendered from kustomization.yaml here (install kubectl to check the real rendering)');
    assert.ok(rendered.length >= 10, `${rendered.length} objects`);
    for (const o of rendered) {
      assert.ok(o.apiVersion && o.kind && o.metadata?.name, `apiVersion, kind, metadata.name: ${JSON.stringify(o).slice(0, 200)}`);
      assert.equal(o.metadata.labels?.['app.kubernetes.io/part-of'], 'mcp-task-service', `${key(o)}: the kustomization's label`);
    }
    assert.equal(new Set(rendered.map(key)).size, rendered.length, 'no two objects share kind and name');
  });

  it('the offline rendering is what kubectl renders (when kubectl is there)', (t) => {
    if (!kubectl) {
      t.diagnostic('kubectl not found: nothing to compare with');
      return;
    }
    const here = new Map(renderHere().map((o) => [key(o), o]));
    assert.deepEqual([...here.keys()].sort(), [...byKey.keys()].sort());
    for (const [k, o] of byKey) assert.deepEqual(here.get(k), o, k);
  });

  it('workloads: selector matches the pod labels; containers have an image, requests, a memory limit and probes; non-root; a termination grace period', () => {
    for (const o of workloads) {
      const spec = podSpec(o)!;
      assert.ok(matches(o.spec.selector.matchLabels, o.spec.template.metadata.labels), `${key(o)}: selector matches the template labels`);
      assert.equal(spec.securityContext?.runAsNonRoot, true, `${key(o)}: runAsNonRoot`);
      assert.equal(typeof spec.terminationGracePeriodSeconds, 'number', `${key(o)}: terminationGracePeriodSeconds`);
      for (const c of spec.containers as Obj[]) {
        const what = `${key(o)} container ${c.name}`;
        assert.ok(c.image && !/PLACEHOLDER/.test(c.image), `${what}: image`);
        assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${what}: cpu and memory requests`);
        assert.ok(c.resources?.limits?.memory, `${what}: memory limit`);
        assert.ok(c.readinessProbe && c.livenessProbe, `${what}: readiness and liveness probes`);
        assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${what}: no privilege escalation`);
        for (const [probe, , port] of httpProbes(c)) assert.ok(portNumber(c, port), `${what}: ${probe} port ${port} is a container port`);
        for (const m of c.volumeMounts ?? []) {
          const vols = [...(spec.volumes ?? []), ...(o.spec.volumeClaimTemplates ?? []).map((v: Obj) => v.metadata)];
          assert.ok(vols.some((v: Obj) => v.name === m.name), `${what}: volume ${m.name} exists`);
        }
      }
    }
  });

  it('Deployments scaled by an autoscaler leave `replicas` to it', () => {
    const scaled = rendered.filter((o) => o.kind === 'HorizontalPodAutoscaler' || o.kind === 'ScaledObject').map((o) => o.spec.scaleTargetRef.name);
    assert.deepEqual(scaled.sort(), ['mcp-gateway', 'mcp-worker']);
    for (const name of scaled) assert.equal(get('Deployment', name)!.spec.replicas, undefined, `${name}: no spec.replicas`);
  });

  it('Services select pods and target their ports; PDBs and the NetworkPolicy select pods', () => {
    for (const s of rendered.filter((o) => o.kind === 'Service')) {
      const pods = workloads.filter((w) => matches(s.spec.selector, w.spec.template.metadata.labels));
      assert.equal(pods.length, 1, `${key(s)} selects one workload`);
      for (const p of s.spec.ports) {
        const c = (podSpec(pods[0]!)!.containers as Obj[]).find((x) => portNumber(x, p.targetPort ?? p.port));
        assert.ok(c, `${key(s)}: targetPort ${p.targetPort} is a container port of ${key(pods[0]!)}`);
      }
    }
    for (const o of rendered.filter((x) => x.kind === 'PodDisruptionBudget')) {
      assert.ok(o.spec.maxUnavailable !== undefined || o.spec.minAvailable !== undefined, `${key(o)}: maxUnavailable or minAvailable`);
      assert.equal(workloads.filter((w) => matches(o.spec.selector.matchLabels, w.spec.template.metadata.labels)).length, 1, `${key(o)} selects one workload`);
    }
    for (const o of rendered.filter((x) => x.kind === 'NetworkPolicy')) {
      assert.ok(workloads.some((w) => matches(o.spec.podSelector.matchLabels, w.spec.template.metadata.labels)), `${key(o)} selects pods`);
    }
    assert.ok(get('PodDisruptionBudget', 'mcp-gateway') && get('PodDisruptionBudget', 'mcp-worker'), 'a PDB for gateways and workers');
  });

  it('HorizontalPodAutoscaler (gateway, CPU) and KEDA ScaledObject (worker): targets exist, bounds make sense', () => {
    const hpa = get('HorizontalPodAutoscaler', 'mcp-gateway')!;
    assert.ok(hpa, 'gateway HPA');
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'mcp-gateway' });
    assert.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas >= hpa.spec.minReplicas, 'min >= 2, max >= min');
    const cpu = hpa.spec.metrics.find((m: Obj) => m.type === 'Resource' && m.resource.name === 'cpu');
    assert.ok(cpu?.resource.target.averageUtilization > 0, 'a CPU utilization target');
    assert.ok(appContainer(gateway).resources.requests.cpu, 'utilization needs a CPU request');

    const so = get('ScaledObject', 'mcp-worker')!;
    assert.ok(so, 'worker ScaledObject');
    assert.equal(so.apiVersion, 'keda.sh/v1alpha1');
    assert.equal(so.spec.scaleTargetRef.name, 'mcp-worker');
    assert.ok(get('Deployment', so.spec.scaleTargetRef.name));
    assert.ok(so.spec.minReplicaCount >= 2 && so.spec.maxReplicaCount >= so.spec.minReplicaCount);
    assert.ok(so.spec.triggers.length >= 1);
    for (const tr of so.spec.triggers) {
      assert.ok(tr.type && tr.metadata, 'trigger type and metadata');
      if (tr.type === 'prometheus') assert.ok(tr.metadata.serverAddress && tr.metadata.query && Number(tr.metadata.threshold) > 0);
      // A Redis list trigger cannot see prioritized BullMQ jobs (a sorted set): worker-scaledobject.yaml.
      if (tr.type === 'redis') assert.doesNotMatch(String(tr.metadata.listName), /:wait$/, 'step jobs are prioritized: the wait list is always empty');
    }
  });

  it('every ConfigMap, Secret and key a container names exists (or is marked optional)', () => {
    for (const o of workloads) {
      for (const c of podSpec(o)!.containers as Obj[]) {
        for (const from of c.envFrom ?? []) {
          const [kind, name] = from.configMapRef ? ['ConfigMap', from.configMapRef.name] : ['Secret', from.secretRef.name];
          assert.ok(get(kind, name) || (from.configMapRef ?? from.secretRef).optional, `${key(o)}: ${kind} ${name}`);
        }
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
          if (!ref) continue;
          const kind = e.valueFrom.secretKeyRef ? 'Secret' : 'ConfigMap';
          assert.ok(ref.optional || dataOf(kind, ref.name)?.[ref.key] !== undefined, `${key(o)}: ${kind} ${ref.name} key ${ref.key}`);
        }
      }
    }
    const ss = get('StatefulSet', 'mcp-redis')!;
    const governing = get('Service', ss.spec.serviceName);
    assert.ok(governing, `the StatefulSet's serviceName ${ss.spec.serviceName} exists`);
    assert.equal(governing.spec.clusterIP, 'None', 'and is headless');
  });
});

describe('k8s/: the app containers match the configuration and the code', () => {
  it('every environment variable given to the gateway and the worker is one the configuration reads', () => {
    const known = new Set(CONFIG_VARIABLES);
    for (const o of [gateway, worker]) {
      const { names } = envOf(appContainer(o));
      const unknown = names.filter((n) => !known.has(n));
      assert.deepEqual(unknown, [], `${key(o)}: not in packages/config`);
    }
    // And the ConfigMap holds nothing the configuration ignores.
    const cm = Object.keys(dataOf('ConfigMap', 'mcp-task-service-config') ?? {});
    assert.deepEqual(cm.filter((n) => !known.has(n)), []);
  });

  it('the values load: gateway and worker configuration from the manifests (Secret placeholders replaced), and the placeholders themselves are refused', () => {
    const gw = envOf(appContainer(gateway), VALID_SECRETS).env;
    const cfg = loadConfig(gw);
    assert.equal(cfg.env, 'production');
    assert.equal(cfg.host, '0.0.0.0');
    assert.ok(cfg.auth.apiKeys.length === 1 && cfg.requestState.keys.length === 1);
    loadConfig(envOf(appContainer(worker)).env, { role: 'worker' });
    assert.throws(() => loadConfig(envOf(appContainer(gateway)).env), (e: Error) => e instanceof ConfigError && /AUTH_API_KEYS|REQUEST_STATE_KEYS/.test(e.message));
    assert.equal(dataOf('Secret', 'mcp-task-service-secrets')!.REDIS_URL, 'redis://mcp-redis:6379', 'REDIS_URL names the in-cluster Redis Service');
    assert.ok(get('Service', 'mcp-redis'));
  });

  it('the gateway: container port = PORT = the Dockerfile\'s EXPOSE; probe paths are routes the gateway registers; the Service targets it', () => {
    const c = appContainer(gateway);
    const cfg = loadConfig(envOf(c, VALID_SECRETS).env);
    const http = (c.ports as Obj[]).find((p) => p.name === 'http')!;
    assert.equal(http.containerPort, cfg.port);
    const expose = /^EXPOSE\s+(\d+)/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
    assert.equal(Number(expose?.[1]), cfg.port, 'Dockerfile EXPOSE');
    const routes = routesIn(join(ROOT, 'apps', 'gateway', 'src'));
    assert.ok(routes.has('/mcp'), [...routes].join(' '));
    for (const [probe, path, port] of httpProbes(c)) {
      assert.ok(routes.has(path), `${probe} ${path} is a gateway route (${[...routes].join(' ')})`);
      assert.equal(portNumber(c, port), cfg.port, `${probe} port`);
    }
    assert.equal(c.readinessProbe.httpGet.path, '/readyz', 'readiness follows Redis and the drain');
    assert.equal(c.livenessProbe.httpGet.path, '/healthz', 'liveness does not depend on Redis');
    assert.equal(Number(gateway.spec.template.metadata.annotations['prometheus.io/port']), cfg.port);
    const svc = get('Service', 'mcp-gateway')!;
    assert.equal(portNumber(c, svc.spec.ports[0].targetPort), cfg.port);
  });

  // The worker's HTTP port (WORKER_HTTP_PORT: /healthz, /readyz, /metrics), served by the
  // operations server of packages/observability.
  it(
    'the worker: its HTTP port = WORKER_HTTP_PORT; probe paths are routes the worker registers',
    () => {
      const c = appContainer(worker);
      const env = envOf(c).env;
      const documented = /^WORKER_HTTP_PORT=(\d+)/m.exec(readFileSync(join(ROOT, '.env.example'), 'utf8'))?.[1];
      const port = Number(env.WORKER_HTTP_PORT ?? documented);
      assert.ok(port > 0, 'WORKER_HTTP_PORT set in the manifest or documented in .env.example');
      assert.equal((c.ports as Obj[]).find((p) => p.name === 'http')?.containerPort, port);
      const routes = new Set([...routesIn(join(ROOT, 'apps', 'worker', 'src')), ...routesIn(join(ROOT, 'packages', 'observability', 'src'))]);
      for (const [probe, path, p] of httpProbes(c)) {
        assert.ok(routes.has(path), `${probe} ${path} is a worker route (${[...routes].join(' ')})`);
        assert.equal(portNumber(c, p), port);
      }
      assert.equal(Number(worker.spec.template.metadata.annotations['prometheus.io/port']), port);
    },
  );

  it('terminationGracePeriodSeconds covers the drain: gateway preStop + SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS + 4 s; worker SHUTDOWN_GRACE_MS + 5 s', () => {
    // The closing steps after the grace period (apps/gateway/src/main.ts: hand-off, then up to
    // 2 s twice; apps/worker/src/main.ts: the release waits up to 5 s).
    const GATEWAY_CLOSE_MS = 4000;
    const WORKER_RELEASE_MS = 5000;
    const MARGIN_MS = 2000;
    const gc = appContainer(gateway);
    const g = loadConfig(envOf(gc, VALID_SECRETS).env).worker;
    const pre = gc.lifecycle?.preStop?.exec?.command;
    const preStopMs = pre?.[0] === 'sleep' ? Number(pre[1]) * 1000 : 0;
    const gatewayNeeds = preStopMs + g.drainDelayMs + g.shutdownGraceMs + GATEWAY_CLOSE_MS + MARGIN_MS;
    assert.ok(gateway.spec.template.spec.terminationGracePeriodSeconds * 1000 >= gatewayNeeds, `gateway needs ${gatewayNeeds} ms`);
    const w = loadConfig(envOf(appContainer(worker)).env, { role: 'worker' }).worker;
    const workerNeeds = w.shutdownGraceMs + WORKER_RELEASE_MS + MARGIN_MS;
    assert.ok(worker.spec.template.spec.terminationGracePeriodSeconds * 1000 >= workerNeeds, `worker needs ${workerNeeds} ms`);
  });

  it('Redis: AOF on, noeviction, maxmemory below the memory limit, data on a persistent volume', () => {
    const ss = get('StatefulSet', 'mcp-redis')!;
    const c = podSpec(ss)!.containers[0] as Obj;
    const args = (c.args as string[]).join(' ');
    assert.match(args, /--appendonly yes/);
    assert.match(args, /--maxmemory-policy noeviction/);
    const mm = /--maxmemory (\d+)mb/.exec(args);
    assert.ok(mm, 'maxmemory in mb');
    const limit = /^(\d+)Gi$/.exec(c.resources.limits.memory);
    assert.ok(limit && Number(mm[1]) < Number(limit[1]) * 1024 * 0.8, `maxmemory ${mm[1]}mb leaves room under the ${c.resources.limits.memory} limit`);
    assert.ok((c.volumeMounts as Obj[]).some((m) => m.mountPath === '/data' && ss.spec.volumeClaimTemplates.some((v: Obj) => v.metadata.name === m.name)), '/data on a PVC');
  });
});
