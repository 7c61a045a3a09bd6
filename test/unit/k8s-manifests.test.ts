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
 *    SHUTDOWN_GRACE_MS + the closing steps: apps/gateway/src/shutdown.ts, apps/worker/src/main.ts);
 *  - Redis runs with AOF, noeviction and a maxmemory under its memory limit;
 *  - the optional components: the ingress-nginx Ingress, and the API keys file mounted from a
 *    Secret (AUTH_API_KEYS_FILE: a directory mount that sees the Secret's updates, readable by
 *    the gateway, the configuration loads with it).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  accessSync,
  constants,
  cpSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parseAllDocuments, parse, stringify } from 'yaml';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '@mcp-tasks/config';
import { ROOT } from '../support/cluster.js';
import { SHUTDOWN_MARGIN_MS } from '../../apps/gateway/src/shutdown.js';

type Obj = Record<string, any>;
const K8S = join(ROOT, 'k8s');

/** kubectl on PATH (or $KUBECTL_BIN). */
function findKubectl(): string | undefined {
  for (const c of [
    process.env.KUBECTL_BIN,
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((d) => join(d, 'kubectl')),
  ]) {
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

/** List fields merged item by item (by this key) in a strategic-merge patch; other lists are replaced. */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
};

/**
 * Applies a strategic-merge patch the way kustomize does for the fields our components patch:
 * maps merged, keyed lists merged by their key (items new to the list first, in patch order),
 * anything else replaced.
 */
function strategicMerge(target: Obj, patch: Obj): Obj {
  for (const [k, v] of Object.entries(patch)) {
    const mergeKey = MERGE_KEYS[k];
    if (Array.isArray(v) && mergeKey && Array.isArray(target[k])) {
      const kept = [...(target[k] as Obj[])];
      const added: Obj[] = [];
      for (const item of v as Obj[]) {
        const i = kept.findIndex((o) => o[mergeKey] === item[mergeKey]);
        if (i >= 0) kept[i] = strategicMerge(kept[i]!, item);
        else added.push(item);
      }
      target[k] = [...added, ...kept];
    } else if (v && typeof v === 'object' && !Array.isArray(v) && target[k] && typeof target[k] === 'object')
      strategicMerge(target[k], v);
    else target[k] = v;
  }
  return target;
}

/**
 * What `kubectl kustomize k8s/` does with this kustomization: the listed resources (and those of
 * the listed components, plus `extraComponents`, with their strategic-merge patches), the
 * `labels` added to every object's metadata (includeSelectors false), `images` rewritten. Only
 * the features kustomization.yaml and the components use; anything else is refused, so it
 * cannot drift silently.
 */
function renderHere(extraComponents: string[] = []): Obj[] {
  const k = parse(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8')) as Obj;
  const known = new Set(['apiVersion', 'kind', 'labels', 'resources', 'components', 'images']);
  const unknown = Object.keys(k).filter((x) => !known.has(x));
  assert.deepEqual(
    unknown,
    [],
    'kustomization.yaml uses features the offline rendering does not know: extend renderHere()',
  );
  const files = (k.resources as string[]).map((f) => join(K8S, f));
  const patches: Obj[] = [];
  for (const dir of [...(k.components ?? []), ...extraComponents]) {
    const c = parse(readFileSync(join(K8S, dir, 'kustomization.yaml'), 'utf8')) as Obj;
    assert.equal(c.kind, 'Component', `${dir} is a kustomize Component`);
    assert.deepEqual(
      Object.keys(c).filter((x) => !['apiVersion', 'kind', 'resources', 'patches'].includes(x)),
      [],
      `${dir}: features the offline rendering does not know`,
    );
    files.push(...((c.resources ?? []) as string[]).map((f) => join(K8S, dir, f)));
    for (const p of (c.patches ?? []) as Obj[]) {
      assert.deepEqual(Object.keys(p), ['path'], `${dir}: only strategic-merge patches from a file`);
      patches.push(...docs(readFileSync(join(K8S, dir, p.path), 'utf8')));
    }
  }
  const objects = files.flatMap((f) => docs(readFileSync(f, 'utf8')));
  for (const p of patches) {
    const target = objects.find((o) => o.kind === p.kind && o.metadata.name === p.metadata.name);
    assert.ok(target, `the patch's target ${p.kind}/${p.metadata.name} exists`);
    const { apiVersion: _a, kind: _k, metadata: _m, ...rest } = p;
    strategicMerge(target, rest);
  }
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

/** `kubectl kustomize` of a copy of k8s/ whose kustomization also lists `components`. */
function kubectlWithComponents(bin: string, components: string[]): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'k8s-'));
  try {
    cpSync(K8S, dir, { recursive: true });
    const k = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as Obj;
    k.components = [...(k.components ?? []), ...components];
    writeFileSync(join(dir, 'kustomization.yaml'), stringify(k));
    return docs(execFileSync(bin, ['kustomize', dir], { encoding: 'utf8' }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
  return {
    ...Object.fromEntries(
      Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()]),
    ),
    ...(o.stringData ?? {}),
  };
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
  (['startupProbe', 'readinessProbe', 'livenessProbe'] as const)
    .filter((p) => c[p]?.httpGet)
    .map((p) => [p, c[p].httpGet.path as string, c[p].httpGet.port as string | number] as const);

/** A probe/targetPort value resolved to a container port number (by name or number). */
const portNumber = (c: Obj, port: string | number) =>
  typeof port === 'number' ? port : (c.ports ?? []).find((p: Obj) => p.name === port)?.containerPort;

describe('k8s/: kubectl kustomize renders, every object is complete and every reference resolves', () => {
  it('renders', (t) => {
    t.diagnostic(
      kubectl
        ? `rendered with ${kubectl} kustomize`
        : 'kubectl not found: rendered from kustomization.yaml here (install kubectl to check the real rendering)',
    );
    assert.ok(rendered.length >= 10, `${rendered.length} objects`);
    for (const o of rendered) {
      assert.ok(
        o.apiVersion && o.kind && o.metadata?.name,
        `apiVersion, kind, metadata.name: ${JSON.stringify(o).slice(0, 200)}`,
      );
      assert.equal(
        o.metadata.labels?.['app.kubernetes.io/part-of'],
        'mcp-task-service',
        `${key(o)}: the kustomization's label`,
      );
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
      assert.ok(
        matches(o.spec.selector.matchLabels, o.spec.template.metadata.labels),
        `${key(o)}: selector matches the template labels`,
      );
      assert.equal(spec.securityContext?.runAsNonRoot, true, `${key(o)}: runAsNonRoot`);
      assert.equal(typeof spec.terminationGracePeriodSeconds, 'number', `${key(o)}: terminationGracePeriodSeconds`);
      for (const c of spec.containers as Obj[]) {
        const what = `${key(o)} container ${c.name}`;
        assert.ok(c.image && !/PLACEHOLDER/.test(c.image), `${what}: image`);
        assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${what}: cpu and memory requests`);
        assert.ok(c.resources?.limits?.memory, `${what}: memory limit`);
        assert.ok(c.readinessProbe && c.livenessProbe, `${what}: readiness and liveness probes`);
        assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${what}: no privilege escalation`);
        for (const [probe, , port] of httpProbes(c))
          assert.ok(portNumber(c, port), `${what}: ${probe} port ${port} is a container port`);
        for (const m of c.volumeMounts ?? []) {
          const vols = [...(spec.volumes ?? []), ...(o.spec.volumeClaimTemplates ?? []).map((v: Obj) => v.metadata)];
          assert.ok(
            vols.some((v: Obj) => v.name === m.name),
            `${what}: volume ${m.name} exists`,
          );
        }
      }
    }
  });

  it('Deployments scaled by an autoscaler leave `replicas` to it', () => {
    const scaled = rendered
      .filter((o) => o.kind === 'HorizontalPodAutoscaler' || o.kind === 'ScaledObject')
      .map((o) => o.spec.scaleTargetRef.name);
    assert.deepEqual(scaled.sort(), ['mcp-gateway', 'mcp-worker']);
    for (const name of scaled)
      assert.equal(get('Deployment', name)!.spec.replicas, undefined, `${name}: no spec.replicas`);
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
      assert.ok(
        o.spec.maxUnavailable !== undefined || o.spec.minAvailable !== undefined,
        `${key(o)}: maxUnavailable or minAvailable`,
      );
      assert.equal(
        workloads.filter((w) => matches(o.spec.selector.matchLabels, w.spec.template.metadata.labels)).length,
        1,
        `${key(o)} selects one workload`,
      );
    }
    for (const o of rendered.filter((x) => x.kind === 'NetworkPolicy')) {
      assert.ok(
        workloads.some((w) => matches(o.spec.podSelector.matchLabels, w.spec.template.metadata.labels)),
        `${key(o)} selects pods`,
      );
    }
    assert.ok(
      get('PodDisruptionBudget', 'mcp-gateway') && get('PodDisruptionBudget', 'mcp-worker'),
      'a PDB for gateways and workers',
    );
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
      if (tr.type === 'prometheus')
        assert.ok(tr.metadata.serverAddress && tr.metadata.query && Number(tr.metadata.threshold) > 0);
      // A Redis list trigger cannot see prioritized BullMQ jobs (a sorted set): worker-scaledobject.yaml.
      if (tr.type === 'redis')
        assert.doesNotMatch(
          String(tr.metadata.listName),
          /:wait$/,
          'step jobs are prioritized: the wait list is always empty',
        );
    }
  });

  it('every ConfigMap, Secret and key a container names exists (or is marked optional)', () => {
    for (const o of workloads) {
      for (const c of podSpec(o)!.containers as Obj[]) {
        for (const from of c.envFrom ?? []) {
          const [kind, name] = from.configMapRef
            ? ['ConfigMap', from.configMapRef.name]
            : ['Secret', from.secretRef.name];
          assert.ok(get(kind, name) || (from.configMapRef ?? from.secretRef).optional, `${key(o)}: ${kind} ${name}`);
        }
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
          if (!ref) continue;
          const kind = e.valueFrom.secretKeyRef ? 'Secret' : 'ConfigMap';
          assert.ok(
            ref.optional || dataOf(kind, ref.name)?.[ref.key] !== undefined,
            `${key(o)}: ${kind} ${ref.name} key ${ref.key}`,
          );
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
    assert.deepEqual(
      cm.filter((n) => !known.has(n)),
      [],
    );
  });

  it('the values load: gateway and worker configuration from the manifests (Secret placeholders replaced), and the placeholders themselves are refused', () => {
    const gw = envOf(appContainer(gateway), VALID_SECRETS).env;
    const cfg = loadConfig(gw);
    assert.equal(cfg.env, 'production');
    assert.equal(cfg.host, '0.0.0.0');
    assert.ok(cfg.auth.apiKeys.length === 1 && cfg.requestState.keys.length === 1);
    loadConfig(envOf(appContainer(worker)).env, { role: 'worker' });
    assert.throws(
      () => loadConfig(envOf(appContainer(gateway)).env),
      (e: Error) => e instanceof ConfigError && /AUTH_API_KEYS|REQUEST_STATE_KEYS/.test(e.message),
    );
    assert.equal(
      dataOf('Secret', 'mcp-task-service-secrets')!.REDIS_URL,
      'redis://mcp-redis:6379',
      'REDIS_URL names the in-cluster Redis Service',
    );
    assert.ok(get('Service', 'mcp-redis'));
  });

  it('completion webhooks: TASK_WEBHOOK_URL, TASK_WEBHOOK_SECRET and TASK_WEBHOOKS_BY_PRINCIPAL come from the Secret to gateways and workers alike; empty = off, filled in = on for both', () => {
    const WEBHOOK_SECRETS = ['TASK_WEBHOOK_URL', 'TASK_WEBHOOK_SECRET', 'TASK_WEBHOOKS_BY_PRINCIPAL'];
    const secret = dataOf('Secret', 'mcp-task-service-secrets')!;
    for (const k of WEBHOOK_SECRETS) assert.equal(secret[k], '', `secret.yaml has ${k}, empty (webhooks off)`);
    const refs = (o: Obj): Record<string, Obj> =>
      Object.fromEntries(
        (appContainer(o).env as Obj[])
          .filter((e) => WEBHOOK_SECRETS.includes(e.name))
          .map((e) => [e.name, e.valueFrom?.secretKeyRef]),
      );
    assert.deepEqual(Object.keys(refs(gateway)).sort(), [...WEBHOOK_SECRETS].sort(), 'the gateway reads them');
    assert.deepEqual(refs(worker), refs(gateway), 'the worker reads the same keys');
    for (const r of Object.values(refs(gateway)))
      assert.equal(r.name, 'mcp-task-service-secrets', 'from the Secret, not the ConfigMap');
    // Off as shipped, on for both roles once filled in.
    assert.equal(loadConfig(envOf(appContainer(gateway), VALID_SECRETS).env).webhooks.enabled, false);
    assert.equal(loadConfig(envOf(appContainer(worker)).env, { role: 'worker' }).webhooks.enabled, false);
    const filled = {
      TASK_WEBHOOK_URL: 'https://hooks.example.com/mcp',
      TASK_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
    };
    const gw = loadConfig(envOf(appContainer(gateway), { ...VALID_SECRETS, ...filled }).env).webhooks;
    const wk = loadConfig(envOf(appContainer(worker), filled).env, { role: 'worker' }).webhooks;
    assert.ok(gw.enabled && wk.enabled);
    assert.equal(gw.global?.url, wk.global?.url);
    // A secret without its URL stops the process at start (so the two keys go together).
    assert.throws(
      () =>
        loadConfig(envOf(appContainer(worker), { TASK_WEBHOOK_SECRET: filled.TASK_WEBHOOK_SECRET }).env, {
          role: 'worker',
        }),
      /TASK_WEBHOOK_URL: required/,
    );
  });

  it("the gateway: container port = PORT = the Dockerfile's EXPOSE; probe paths are routes the gateway registers; the Service targets it", () => {
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
  it('the worker: its HTTP port = WORKER_HTTP_PORT; probe paths are routes the worker registers', () => {
    const c = appContainer(worker);
    const env = envOf(c).env;
    // Set explicitly: unset, a worker whose default port is taken takes any free one, which
    // the probes and the scrape annotation would not find.
    const port = Number(env.WORKER_HTTP_PORT);
    assert.ok(port > 0, 'WORKER_HTTP_PORT set in the manifest');
    assert.equal(loadConfig(env, { role: 'worker' }).workerHttp?.freePortIfTaken, false);
    assert.equal((c.ports as Obj[]).find((p) => p.name === 'http')?.containerPort, port);
    const routes = new Set([
      ...routesIn(join(ROOT, 'apps', 'worker', 'src')),
      ...routesIn(join(ROOT, 'packages', 'observability', 'src')),
    ]);
    for (const [probe, path, p] of httpProbes(c)) {
      assert.ok(routes.has(path), `${probe} ${path} is a worker route (${[...routes].join(' ')})`);
      assert.equal(portNumber(c, p), port);
    }
    assert.equal(Number(worker.spec.template.metadata.annotations['prometheus.io/port']), port);
  });

  it('terminationGracePeriodSeconds covers the drain: gateway preStop + SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS; worker SHUTDOWN_GRACE_MS + 5 s', () => {
    // The closing steps after the grace period (apps/gateway/src/shutdown.ts: hand-off, abort,
    // close, flush, SHUTDOWN_MARGIN_MS at most; apps/worker/src/main.ts: the release waits up to 5 s).
    const GATEWAY_CLOSE_MS = SHUTDOWN_MARGIN_MS;
    const WORKER_RELEASE_MS = 5000;
    const MARGIN_MS = 2000;
    const gc = appContainer(gateway);
    const g = loadConfig(envOf(gc, VALID_SECRETS).env).worker;
    const pre = gc.lifecycle?.preStop?.exec?.command;
    const preStopMs = pre?.[0] === 'sleep' ? Number(pre[1]) * 1000 : 0;
    const gatewayNeeds = preStopMs + g.drainDelayMs + g.shutdownGraceMs + GATEWAY_CLOSE_MS + MARGIN_MS;
    assert.ok(
      gateway.spec.template.spec.terminationGracePeriodSeconds * 1000 >= gatewayNeeds,
      `gateway needs ${gatewayNeeds} ms`,
    );
    const w = loadConfig(envOf(appContainer(worker)).env, { role: 'worker' }).worker;
    const workerNeeds = w.shutdownGraceMs + WORKER_RELEASE_MS + MARGIN_MS;
    assert.ok(
      worker.spec.template.spec.terminationGracePeriodSeconds * 1000 >= workerNeeds,
      `worker needs ${workerNeeds} ms`,
    );
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
    assert.ok(
      limit && Number(mm[1]) < Number(limit[1]) * 1024 * 0.8,
      `maxmemory ${mm[1]}mb leaves room under the ${c.resources.limits.memory} limit`,
    );
    assert.ok(
      (c.volumeMounts as Obj[]).some(
        (m) => m.mountPath === '/data' && ss.spec.volumeClaimTemplates.some((v: Obj) => v.metadata.name === m.name),
      ),
      '/data on a PVC',
    );
  });
});

describe('k8s/ingress-nginx: the optional Ingress (a kustomize Component, not in the default rendering)', () => {
  const withIngress = kubectl ? kubectlWithComponents(kubectl, ['ingress-nginx']) : renderHere(['ingress-nginx']);
  const ingresses = withIngress.filter((o) => o.kind === 'Ingress');

  it('renders with the component on (the same as the offline rendering when kubectl is there), and only then', () => {
    assert.equal(rendered.filter((o) => o.kind === 'Ingress').length, 0, 'the default kustomization has no Ingress');
    assert.equal(ingresses.length, 1);
    assert.equal(withIngress.length, rendered.length + 1, 'the component adds the Ingress and nothing else');
    if (kubectl) {
      const here = renderHere(['ingress-nginx']).find((o) => o.kind === 'Ingress');
      assert.deepEqual(here, ingresses[0]);
    }
    const ing = ingresses[0]!;
    assert.equal(ing.apiVersion, 'networking.k8s.io/v1');
    assert.equal(ing.spec.ingressClassName, 'nginx');
    assert.equal(ing.metadata.labels['app.kubernetes.io/part-of'], 'mcp-task-service');
  });

  it('SSE and body settings: no buffering either way, read and send timeouts >= 1 h, body size = MAX_BODY_BYTES, HTTPS only, no affinity', () => {
    const a = ingresses[0]!.metadata.annotations as Record<string, string>;
    const n = (k: string) => a[`nginx.ingress.kubernetes.io/${k}`];
    assert.equal(n('proxy-buffering'), 'off', 'progress reaches the client as written');
    assert.ok(Number(n('proxy-read-timeout')) >= 3600, 'long SSE responses are not cut');
    assert.ok(Number(n('proxy-send-timeout')) >= 3600);
    const size = /^(\d+)([kmg]?)$/i.exec(n('proxy-body-size') ?? '');
    assert.ok(size, `proxy-body-size ${n('proxy-body-size')}`);
    const bytes = Number(size[1]) * { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[size[2]!.toLowerCase() as 'k']!;
    const cfg = loadConfig(envOf(appContainer(gateway), VALID_SECRETS).env);
    assert.equal(bytes, cfg.maxBodyBytes, 'the proxy refuses exactly what the gateway refuses (MAX_BODY_BYTES)');
    assert.equal(n('force-ssl-redirect'), 'true');
    assert.equal(n('affinity'), undefined, 'no session affinity');
    assert.equal(
      n('proxy-request-buffering'),
      'off',
      "bodies passed on as they arrive, so the gateway's BODY_READ_TIMEOUT_MS bounds a slow one (as in deploy/nginx)",
    );
  });

  it('TLS for every host; /mcp at the host and path of PUBLIC_URL; the backend is the gateway Service; /metrics is not routed', () => {
    const ing = ingresses[0]!;
    const hosts = (ing.spec.rules as Obj[]).map((r) => r.host);
    for (const h of hosts)
      assert.ok(
        (ing.spec.tls as Obj[]).some((t) => t.hosts.includes(h) && t.secretName),
        `TLS (with a Secret) for ${h}`,
      );
    const publicUrl = new URL(dataOf('ConfigMap', 'mcp-task-service-config')!.PUBLIC_URL!);
    assert.equal(publicUrl.protocol, 'https:');
    const rule = (ing.spec.rules as Obj[]).find((r) => r.host === publicUrl.hostname);
    assert.ok(rule, `a rule for the host of PUBLIC_URL (${publicUrl.hostname})`);
    const paths = rule.http.paths as Obj[];
    assert.ok(
      paths.some((p) => p.path === publicUrl.pathname && p.pathType === 'Exact'),
      'the MCP endpoint',
    );
    for (const p of paths) {
      const svc = get('Service', p.backend.service.name);
      assert.ok(svc, `backend Service ${p.backend.service.name} exists`);
      assert.ok(
        (svc.spec.ports as Obj[]).some(
          (sp) => sp.name === p.backend.service.port.name || sp.port === p.backend.service.port.number,
        ),
        `backend port ${JSON.stringify(p.backend.service.port)} is a port of the Service`,
      );
      for (const internal of ['/metrics', '/healthz', '/readyz'])
        assert.ok(
          !(p.pathType === 'Prefix' ? internal.startsWith(p.path) : internal === p.path),
          `${internal} is not routed (${p.path})`,
        );
    }
  });
});

describe('k8s/api-keys-file: API keys from a file in a Secret, re-read without a restart (a kustomize Component, not in the default rendering)', () => {
  const withKeys = kubectl ? kubectlWithComponents(kubectl, ['api-keys-file']) : renderHere(['api-keys-file']);
  const keyed = new Map(withKeys.map((o) => [key(o), o]));
  const gw = keyed.get('Deployment/mcp-gateway')!;
  const c = appContainer(gw);
  const SECRET = 'mcp-task-service-api-keys';

  it('renders with the component on (the same as the offline rendering when kubectl is there); it changes the gateway Deployment only and adds no object: the Secret is made out of band, so `kubectl apply -k` never overwrites the keys', () => {
    if (kubectl) {
      const here = new Map(renderHere(['api-keys-file']).map((o) => [key(o), o]));
      assert.deepEqual([...here.keys()].sort(), [...keyed.keys()].sort());
      for (const [k, o] of keyed) assert.deepEqual(here.get(k), o, k);
    }
    assert.deepEqual([...keyed.keys()].sort(), [...byKey.keys()].sort(), 'no object added or removed');
    assert.equal(keyed.get(`Secret/${SECRET}`), undefined);
    for (const [k, o] of keyed) if (k !== 'Deployment/mcp-gateway') assert.deepEqual(o, byKey.get(k), k);
    assert.equal(envOf(appContainer(gateway)).env.AUTH_API_KEYS_FILE, undefined, 'off by default');
  });

  it('the gateway reads AUTH_API_KEYS_FILE from a read-only Secret volume mounted as a directory (a subPath file never sees an update), readable by its group and nobody else; not optional, so no gateway starts without it; the worker gets none of it', () => {
    const path = envOf(c, VALID_SECRETS).env.AUTH_API_KEYS_FILE!;
    assert.ok(CONFIG_VARIABLES.includes('AUTH_API_KEYS_FILE'));
    assert.ok(path?.startsWith('/'), `an absolute path: ${path}`);
    const spec = podSpec(gw)!;
    const mount = (c.volumeMounts as Obj[]).find((m) => path.startsWith(`${m.mountPath}/`));
    assert.ok(mount, `a volume is mounted above ${path}`);
    assert.equal(mount.readOnly, true);
    assert.equal(mount.subPath ?? mount.subPathExpr, undefined, 'a directory mount, updated in place by the kubelet');
    const secret = (spec.volumes as Obj[]).find((v) => v.name === mount.name)?.secret;
    assert.equal(secret?.secretName, SECRET);
    assert.notEqual(secret.optional, true);
    const file = path.slice(mount.mountPath.length + 1);
    assert.equal(file, 'api-keys', 'the Secret key that k8s/README.md and api-keys.example create');
    assert.equal(secret.items, undefined, 'every key of the Secret appears under its own name');
    const mode = secret.defaultMode ?? 0o644;
    assert.equal(mode & 0o004, 0, 'not readable by others');
    assert.ok(mode & 0o040 && spec.securityContext?.fsGroup !== undefined, 'readable through the pod group (fsGroup)');
    assert.equal(spec.securityContext.runAsNonRoot, true);
    const w = keyed.get('Deployment/mcp-worker')!;
    assert.equal(envOf(appContainer(w)).env.AUTH_API_KEYS_FILE, undefined);
    assert.ok(!(podSpec(w)!.volumes as Obj[]).some((v) => v.secret?.secretName === SECRET));
  });

  it("the configuration loads: production, the file's keys at that path (AUTH_API_KEYS left out of the Secret, which its optional reference allows); api-keys.example as shipped is refused, with its placeholders replaced it loads", () => {
    const ref = (c.env as Obj[]).find((e) => e.name === 'AUTH_API_KEYS')?.valueFrom?.secretKeyRef;
    assert.equal(ref?.optional, true);
    const env = envOf(c, VALID_SECRETS).env;
    delete env.AUTH_API_KEYS;
    const dir = mkdtempSync(join(tmpdir(), 'k8s-keys-'));
    try {
      env.AUTH_API_KEYS_FILE = join(dir, 'api-keys');
      const example = readFileSync(join(K8S, 'api-keys-file', 'api-keys.example'), 'utf8');
      writeFileSync(env.AUTH_API_KEYS_FILE, example);
      assert.throws(
        () => loadConfig(env),
        (e: Error) => e instanceof ConfigError && /AUTH_API_KEYS_FILE/.test(e.message),
      );
      const bobKey = randomBytes(32).toString('hex');
      writeFileSync(
        env.AUTH_API_KEYS_FILE,
        example
          .replace('REPLACE-WITH-openssl-rand-hex-32', randomBytes(32).toString('hex'))
          .replace('REPLACE-WITH-THE-SHA-256-OF-BOBS-KEY', createHash('sha256').update(bobKey).digest('hex')),
      );
      const cfg = loadConfig(env);
      assert.equal(cfg.env, 'production');
      assert.deepEqual(cfg.auth.apiKeys.map((k) => k.name).sort(), ['alice', 'bob']);
      assert.equal(cfg.auth.apiKeysFile?.path, env.AUTH_API_KEYS_FILE);
      assert.ok(cfg.auth.apiKeysFile!.reloadMs <= 5000, 'a change is seen within seconds of reaching the pod');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
