/**
 * The vector selectors of a PromQL query (metric name and label matchers), parsed with the
 * Prometheus project's own grammar (@prometheus-io/lezer-promql), and whether a scraped sample
 * matches them, as Prometheus decides: a missing label is the empty string, regular expressions
 * are anchored at both ends. For checking the queries our manifests and docs give autoscalers
 * against a live `/metrics`.
 */
import { parser } from '@prometheus-io/lezer-promql';
import type { Sample } from './prom.js';

export type MatchOp = '=' | '!=' | '=~' | '!~';
export interface Matcher {
  label: string;
  op: MatchOp;
  value: string;
}
/** One vector selector: its text, and its matchers (the metric name as a `__name__` matcher). */
export interface Selector {
  text: string;
  matchers: Matcher[];
}

/** A PromQL string literal's value ("…" and '…' with escapes, `…` raw). */
function stringValue(literal: string): string {
  if (literal.startsWith('`')) return literal.slice(1, -1);
  if (literal.startsWith("'")) return JSON.parse(`"${literal.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"`);
  return JSON.parse(literal) as string;
}

/**
 * Every vector selector of `query`, in order.
 * @throws when the query does not parse (the grammar's error nodes), naming where.
 */
export function vectorSelectors(query: string): Selector[] {
  const tree = parser.parse(query);
  const text = (n: { from: number; to: number }) => query.slice(n.from, n.to);
  const out: Selector[] = [];
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError) throw new Error(`PromQL syntax error at ${ref.from} in: ${query}`);
      if (ref.name !== 'VectorSelector') return;
      const node = ref.node;
      const matchers: Matcher[] = [];
      const name = node.getChild('Identifier');
      if (name) matchers.push({ label: '__name__', op: '=', value: text(name) });
      for (const m of node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []) {
        matchers.push({
          label: text(m.getChild('LabelName')!),
          op: text(m.getChild('MatchOp')!) as MatchOp,
          value: stringValue(text(m.getChild('StringLiteral')!)),
        });
      }
      out.push({ text: text(node), matchers });
    },
  });
  return out;
}

/** Whether `sample` (its name and labels) satisfies `m`. */
export function matchesSample(m: Matcher, sample: Sample): boolean {
  const v = m.label === '__name__' ? sample.name : (sample.labels[m.label] ?? '');
  switch (m.op) {
    case '=':
      return v === m.value;
    case '!=':
      return v !== m.value;
    case '=~':
      return new RegExp(`^(?:${m.value})$`).test(v);
    case '!~':
      return !new RegExp(`^(?:${m.value})$`).test(v);
  }
}
