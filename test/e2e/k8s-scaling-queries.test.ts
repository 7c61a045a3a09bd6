// @needs redis
/**
 * The queries that scale the workers in Kubernetes, checked against the live `/metrics` of a
 * real gateway and a real worker (real Redis, one step running and one waiting): the KEDA
 * ScaledObject's Prometheus query (k8s/worker-scaledobject.yaml) and the prometheus-adapter rule
 * in k8s/README.md (its seriesQuery, and its metricsQuery with the adapter's templates filled
 * in). Each selector of each query, parsed with Prometheus' own PromQL grammar, must:
 *  - name a metric the processes export, and select at least one of its series;
 *  - match only on labels the metric has (a matcher on a label it lacks, such as `queue`,
 *    selects nothing), every alternative of a `a|b` regular expression being a value the label
 *    takes (a state the metric does not have, such as `prioritized`, is a mistake);
 *  - select series that add up to the steps waiting or running (1 + 1 here).
 * Labels that Prometheus adds when it scrapes a pod (namespace, pod, …) are not in `/metrics`
 * and are left to the scrape configuration.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT, startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool } from '../support/mcp.js';
import { scrape, type Sample } from '../support/prom.js';
import { matchesSample, vectorSelectors } from '../support/promql.js';

/** Target labels a Prometheus scrape of a pod adds (kubernetes_sd relabelling); never in `/metrics`. */
const TARGET_LABELS = new Set(['namespace', 'pod', 'instance', 'job', 'container', 'node']);

type Obj = Record<string, any>;

/** The KEDA trigger queries of k8s/worker-scaledobject.yaml. */
function kedaQueries(): string[] {
  const so = parse(readFileSync(join(ROOT, 'k8s', 'worker-scaledobject.yaml'), 'utf8')) as Obj;
  return (so.spec.triggers as Obj[]).filter((t) => t.type === 'prometheus').map((t) => t.metadata.query as string);
}

/** The prometheus-adapter `externalRules` block of k8s/README.md, its templates filled in as the adapter does. */
function adapterQueries(): { name: string; queries: string[] }[] {
  const md = readFileSync(join(ROOT, 'k8s', 'README.md'), 'utf8');
  const block = [...md.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => /^externalRules:/m.test(b));
  assert.ok(block, 'k8s/README.md has the adapter rule (a yaml block with externalRules)');
  return (parse(block).externalRules as Obj[]).map((rule) => {
    const series = vectorSelectors(rule.seriesQuery);
    assert.equal(series.length, 1, rule.seriesQuery);
    const metric = series[0]!.matchers.find((m) => m.label === '__name__' && m.op === '=')?.value;
    assert.ok(metric, `the seriesQuery names one metric: ${rule.seriesQuery}`);
    assert.match(metric, new RegExp(rule.name.matches), 'name.matches keeps the metric');
    // <<.LabelMatchers>> holds the namespace matcher (resources.overrides), a target label.
    const metricsQuery = String(rule.metricsQuery)
      .replaceAll('<<.Series>>', metric)
      .replaceAll('<<.LabelMatchers>>', 'namespace="mcp"');
    return { name: rule.name.as as string, queries: [rule.seriesQuery as string, metricsQuery] };
  });
}

/**
 * Checks every selector of `query` against `samples` (module comment); returns the sum of the
 * samples the last selector chooses (the query's value for one process, for these queries).
 */
function checkQuery(query: string, samples: Sample[], where: string): number {
  const selectors = vectorSelectors(query);
  assert.ok(selectors.length > 0, `${query}: has a selector`);
  let total = 0;
  for (const sel of selectors) {
    const what = `${where}: ${sel.text} (in ${query})`;
    const own = sel.matchers.filter((m) => !TARGET_LABELS.has(m.label));
    const names = own.filter((m) => m.label === '__name__');
    assert.ok(names.length > 0, `${what}: names its metric`);
    const series = samples.filter((s) => names.every((m) => matchesSample(m, s)));
    assert.ok(series.length > 0, `${what}: the metric is exported`);
    for (const m of own.filter((x) => x.label !== '__name__')) {
      const values = new Set(series.map((s) => s.labels[m.label]).filter((v) => v !== undefined));
      assert.ok(values.size > 0, `${what}: label ${m.label} is not a label of the metric`);
      if (m.op === '=~' && /^[\w|]+$/.test(m.value))
        for (const alt of m.value.split('|'))
          assert.ok(values.has(alt), `${what}: ${m.label}="${alt}" is not a value the metric has (${[...values]})`);
      if (m.op === '=')
        assert.ok(values.has(m.value), `${what}: ${m.label}="${m.value}" never occurs (${[...values]})`);
    }
    const chosen = series.filter((s) => own.every((m) => matchesSample(m, s)));
    assert.ok(chosen.length > 0, `${what}: selects no series`);
    total = chosen.reduce((a, s) => a + s.value, 0);
  }
  return total;
}

describe('k8s scaling queries match the metrics the processes export', () => {
  let c: Cluster;
  let targets: { where: string; url: string }[];
  before(async () => {
    // One step at a time: one slow_compute runs, the next waits (both outlive the test).
    c = await startCluster({ gateways: 1, workers: 1, env: { WORKER_CONCURRENCY: '1' } });
    for (let i = 0; i < 2; i++) {
      const r = await callTool(c.urls[0]!, 'slow_compute', { seconds: 120 });
      assert.equal(r.body.result?.status, 'working', JSON.stringify(r.body));
    }
    targets = [
      { where: 'gateway', url: c.urls[0]!.replace(/\/mcp$/, '/metrics') },
      { where: 'worker', url: `${c.workers[0]!.opsUrl}/metrics` },
    ];
    for (const t of targets)
      await waitFor(
        async () => {
          const s = await scrape(t.url);
          return (
            s.value('mcp_queue_jobs', { state: 'active' }) === 1 &&
            s.value('mcp_queue_jobs', { state: 'waiting' }) === 1
          );
        },
        30_000,
        200,
        `${t.where}: one step running, one waiting`,
      );
  });
  after(async () => c?.stop());

  it('the KEDA ScaledObject query: steps waiting or running', async () => {
    const queries = kedaQueries();
    assert.ok(queries.length > 0);
    for (const t of targets) {
      const { samples } = await scrape(t.url);
      for (const q of queries) assert.equal(checkQuery(q, samples, t.where), 2, `${t.where}: ${q}`);
    }
  });

  it('the prometheus-adapter rule in k8s/README.md: seriesQuery finds the metric, metricsQuery counts steps waiting or running', async () => {
    const rules = adapterQueries();
    assert.deepEqual(
      rules.map((r) => r.name),
      ['mcp_tools_queue_jobs'],
      'the name the HPA example asks for',
    );
    for (const t of targets) {
      const { samples } = await scrape(t.url);
      for (const r of rules) {
        const [seriesQuery, metricsQuery] = r.queries as [string, string];
        assert.ok(checkQuery(seriesQuery, samples, t.where) >= 2);
        assert.equal(checkQuery(metricsQuery, samples, t.where), 2, `${t.where}: ${metricsQuery}`);
      }
    }
  });
});
