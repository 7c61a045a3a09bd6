/**
 * JSON request bodies of a chosen shape for the body-limit tests: a small tree type serialised
 * by hand (so a body can hold what `JSON.stringify` of a JavaScript object cannot: a `__proto__`
 * key, a key written with `\u` escapes), its nesting depth and object-key count computed the
 * way the gateway counts them (the top-level value is depth 1; every object key counts, in the
 * whole body), and a padding that brings a body to an exact size in bytes (UTF-8).
 */

/** A JSON value: an object (ordered entries), an array, or a scalar written as JSON text. */
export type Shape = { obj: [string, Shape][]; escapeKeys?: boolean } | { arr: Shape[] } | { raw: string };

export const obj = (entries: [string, Shape][], escapeKeys = false): Shape => ({ obj: entries, escapeKeys });
export const arr = (items: Shape[]): Shape => ({ arr: items });
export const str = (v: string): Shape => ({ raw: JSON.stringify(v) });
export const num = (v: number): Shape => ({ raw: String(v) });

/** A key written with every character as a `\uXXXX` escape (the same key once parsed). */
const escaped = (k: string) => `"${[...k].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`;

/** The JSON text of `s`. */
export function serialise(s: Shape): string {
  if ('raw' in s) return s.raw;
  if ('arr' in s) return `[${s.arr.map(serialise).join(',')}]`;
  return `{${s.obj.map(([k, v]) => `${s.escapeKeys ? escaped(k) : JSON.stringify(k)}:${serialise(v)}`).join(',')}}`;
}

/** Nesting depth: objects and arrays, the outermost at 1; a scalar alone is 0. */
export function depthOf(s: Shape): number {
  if ('raw' in s) return 0;
  const children = 'arr' in s ? s.arr : s.obj.map(([, v]) => v);
  return 1 + Math.max(0, ...children.map(depthOf));
}

/** Object keys in the whole value. */
export function keysOf(s: Shape): number {
  if ('raw' in s) return 0;
  if ('arr' in s) return s.arr.reduce((n, c) => n + keysOf(c), 0);
  return s.obj.reduce((n, [, v]) => n + 1 + keysOf(v), 0);
}

/** Whether `s` holds a `__proto__` key, or a `constructor` key whose object has a `prototype` key. */
export function poisoned(s: Shape): boolean {
  if ('raw' in s) return false;
  if ('arr' in s) return s.arr.some(poisoned);
  return s.obj.some(
    ([k, v]) =>
      k === '__proto__' ||
      (k === 'constructor' && 'obj' in v && v.obj.some(([k2]) => k2 === 'prototype')) ||
      poisoned(v),
  );
}

/**
 * A JSON-RPC request for `method` whose `params` hold `_meta` (a 2026-07-28 envelope; the
 * client declares the tasks extension, so a tools/call starts a task) and `extra`, and a `pad` string of ASCII letters so that the body is exactly `bytes` long (UTF-8)
 * when `bytes` is given and reachable (else as short as it gets).
 */
export function envelope(method: string, extra: [string, Shape][] = [], bytes?: number): Shape {
  const build = (pad: number): Shape =>
    obj([
      ['jsonrpc', str('2.0')],
      ['id', str('shape')],
      ['method', str(method)],
      [
        'params',
        obj([
          [
            '_meta',
            obj([
              ['io.modelcontextprotocol/protocolVersion', str('2026-07-28')],
              [
                'io.modelcontextprotocol/clientInfo',
                obj([
                  ['name', str('shapes')],
                  ['version', str('0')],
                ]),
              ],
              [
                'io.modelcontextprotocol/clientCapabilities',
                obj([['extensions', obj([['io.modelcontextprotocol/tasks', obj([])]])]]),
              ],
            ]),
          ],
          ...extra,
          ...(bytes === undefined ? [] : ([['pad', str('p'.repeat(pad))]] as [string, Shape][])),
        ]),
      ],
    ]);
  if (bytes === undefined) return build(0);
  const base = Buffer.byteLength(serialise(build(0)));
  return build(Math.max(0, bytes - base));
}

/** `levels` containers nested in each other (objects with one key `d`, or arrays, alternating from `objectFirst`). */
export function chain(levels: number, objectAt: (level: number) => boolean = () => false, leaf: Shape = num(0)): Shape {
  let s = leaf;
  for (let i = levels - 1; i >= 0; i--) s = objectAt(i) ? obj([['d', s]]) : arr([s]);
  return s;
}

/** An object of `n` keys `<prefix><i>` with number values. */
export function manyKeys(n: number, prefix = 'k'): Shape {
  return obj(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, num(i)] as [string, Shape]));
}
