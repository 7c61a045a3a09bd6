/**
 * A tool's arguments from the command line: `--args '<JSON object>'` as a base, then each
 * `--arg key=value` on top, the value read as the type the tool's `inputSchema` (from
 * `tools/list`) gives that property: `number` / `integer` as numbers, `boolean` as true/false
 * (also yes/no, on/off, 1/0), `object` / `array` as JSON, `string` as written. A dotted key
 * (`a.b=1`) sets a nested property. A property the schema does not know is read as JSON when
 * it parses, else as a string (the server validates; SEP-1303).
 */
import { CliError, EXIT } from './context.js';
import { asList, asSchema, type JsonSchema as Schema } from './json-schema.js';

/** The JSON types a property schema allows (`type`, or the types of its `anyOf`/`oneOf` branches). */
function typesOf(schema: Schema | undefined): Set<string> {
  const out = new Set<string>();
  if (!schema) return out;
  if (typeof schema.type === 'string') out.add(schema.type);
  for (const t of asList(schema.type) ?? []) if (typeof t === 'string') out.add(t);
  for (const k of ['anyOf', 'oneOf'] as const)
    for (const s of asList(schema[k]) ?? []) for (const t of typesOf(asSchema(s))) out.add(t);
  const enumValues = asList(schema.enum);
  if (out.size === 0 && enumValues && enumValues.every((v) => typeof v === 'string')) out.add('string');
  return out;
}

const TRUE = new Set(['true', 'yes', 'y', 'on', '1']);
const FALSE = new Set(['false', 'no', 'n', 'off', '0']);

/**
 * Reads one `--arg` value as the property schema wants it.
 * @throws CliError (usage) naming the argument and the expected type.
 */
export function parseValue(key: string, raw: string, schema: Schema | undefined): unknown {
  const types = typesOf(schema);
  const bad = (what: string) => new CliError(`--arg ${key}=${raw}: ${key} is ${what}`, EXIT.usage);
  if (types.has('null') && raw === 'null') return null;
  if (types.has('integer') || types.has('number')) {
    const n = raw.trim() === '' ? NaN : Number(raw);
    if (Number.isFinite(n)) {
      if (!types.has('number') && !Number.isInteger(n)) throw bad('an integer');
      return n;
    }
    if (!types.has('string')) throw bad(types.has('integer') && !types.has('number') ? 'an integer' : 'a number');
  }
  if (types.has('boolean')) {
    const v = raw.trim().toLowerCase();
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    if (!types.has('string')) throw bad('a boolean (true or false)');
  }
  if (types.has('string')) return raw;
  if (types.has('object') || types.has('array')) {
    try {
      return JSON.parse(raw);
    } catch {
      throw bad(`JSON (${[...types].join(' or ')})`);
    }
  }
  // Unknown property or a schema without a type: JSON when it parses, else the text.
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** The property schema at a dotted path of `inputSchema` (through `properties` only). */
function propertyAt(inputSchema: Schema | undefined, path: string[]): Schema | undefined {
  let node: Schema | undefined = inputSchema;
  for (const key of path) node = asSchema(asSchema(node?.properties)?.[key]);
  return node;
}

/**
 * The `arguments` object of a `tools/call`.
 * @param inputSchema the tool's schema from `tools/list` (may be undefined: values are then read as JSON or text).
 * @param argsJson the `--args` value, a JSON object.
 * @param pairs the `--arg key=value` values, in order (later ones win).
 * @throws CliError (usage) for bad JSON, a pair without `=`, or a value of the wrong type.
 */
export function buildArguments(
  inputSchema: Schema | undefined,
  argsJson: string | undefined,
  pairs: readonly string[],
): Record<string, unknown> {
  let args: Record<string, unknown> = {};
  if (argsJson !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(argsJson);
    } catch (e) {
      throw new CliError(`--args is not JSON: ${(e as Error).message}`, EXIT.usage);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new CliError('--args must be a JSON object, e.g. --args \'{"seconds": 5}\'', EXIT.usage);
    args = parsed as Record<string, unknown>;
  }
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(`--arg ${pair}: write it as key=value`, EXIT.usage);
    const key = pair.slice(0, eq);
    const path = key.split('.');
    const value = parseValue(key, pair.slice(eq + 1), propertyAt(inputSchema, path));
    let target = args;
    for (const p of path.slice(0, -1)) {
      const next = target[p];
      target =
        next !== null && typeof next === 'object' && !Array.isArray(next)
          ? (next as Record<string, unknown>)
          : (target[p] = {});
    }
    target[path[path.length - 1]!] = value;
  }
  return args;
}

/** One line per property of a tool's schema: `name (type, required): description`. For `tools --verbose` and errors. */
export function describeParameters(inputSchema: Schema | undefined): string[] {
  const props = asSchema(inputSchema?.properties);
  if (!props) return [];
  const required = new Set(asList(inputSchema?.required) ?? []);
  return Object.entries(props).map(([name, value]) => {
    const s = asSchema(value) ?? {};
    const type = [...typesOf(s)].join('|') || 'any';
    const desc = typeof s.description === 'string' ? `: ${s.description}` : '';
    return `${name} (${type}${required.has(name) ? ', required' : ''})${desc}`;
  });
}
