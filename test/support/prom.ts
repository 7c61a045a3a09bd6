/**
 * Reads a Prometheus text exposition (what `/metrics` serves) for assertions: every sample as
 * name, labels and value. Only what the tests need (no escapes beyond `\"` in label values).
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  status: number;
  contentType: string;
  text: string;
  samples: Sample[];
  /** The value of the one sample named `name` whose labels include `labels`; undefined when none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** The sum over samples named `name` whose labels include `labels` (0 when none). */
  sum(name: string, labels?: Record<string, string>): number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\"/g, '"');
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

const matches = (s: Sample, name: string, labels: Record<string, string>) =>
  s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);

/** GETs `url` (a `/metrics` endpoint) and parses it. */
export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(url);
  const text = await res.text();
  const samples = parseProm(text);
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    text,
    samples,
    value: (name, labels = {}) => samples.find((s) => matches(s, name, labels))?.value,
    sum: (name, labels = {}) => samples.filter((s) => matches(s, name, labels)).reduce((a, s) => a + s.value, 0),
  };
}
