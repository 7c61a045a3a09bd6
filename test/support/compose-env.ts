/**
 * What docker compose makes of docker-compose.yml and a project `.env`, without Docker (CI has
 * none), following the Compose Specification:
 *  - interpolation of every string value (not keys) from the variables of the shell and of the
 *    project's `.env`: `$VAR`, `${VAR}`, `${VAR:-default}` / `${VAR-default}`,
 *    `${VAR:?error}` / `${VAR?error}`, `${VAR:+replacement}` / `${VAR+replacement}`, nested
 *    inside a default, and `$$` for a literal `$`; an unset variable without a default is empty;
 *  - a service's environment: its `env_file` files in order (their values taken literally, not
 *    interpolated), then its `environment` (which wins).
 * `.env` files are read with Node's own dotenv parser (`util.parseEnv`, what `node --env-file`
 * uses), which agrees with compose's for the plain `KEY=value` lines of .env.example.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';
import { parse } from 'yaml';

type Obj = Record<string, any>;
type Vars = Record<string, string | undefined>;

/** Compose refuses the file: a `${VAR:?message}` without a value, or a malformed `$` expression. */
export class ComposeError extends Error {}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

/** Interpolates one string value as compose does. @throws ComposeError. */
export function interpolate(s: string, vars: Vars): string {
  let out = '';
  let i = 0;
  while (i < s.length) {
    if (s[i] !== '$') {
      out += s[i++];
      continue;
    }
    if (s[i + 1] === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (s[i + 1] === '{') {
      let depth = 1;
      let j = i + 2;
      for (; j < s.length && depth > 0; j++) {
        if (s[j] === '{') depth++;
        else if (s[j] === '}') depth--;
      }
      if (depth > 0) throw new ComposeError(`invalid interpolation format: ${s}`);
      out += expand(s.slice(i + 2, j - 1), vars, s);
      i = j;
      continue;
    }
    const name = NAME.exec(s.slice(i + 1))?.[0];
    if (!name) throw new ComposeError(`invalid interpolation format: ${s}`);
    out += vars[name] ?? '';
    i += 1 + name.length;
  }
  return out;
}

/** The inside of one `${...}`. */
function expand(body: string, vars: Vars, whole: string): string {
  const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([\s\S]*))?$/.exec(body);
  if (!m) throw new ComposeError(`invalid interpolation format: ${whole}`);
  const [, name, op, arg = ''] = m as unknown as [string, string, string | undefined, string | undefined];
  const v = vars[name];
  const set = v !== undefined;
  const nonEmpty = set && v !== '';
  switch (op) {
    case undefined:
      return v ?? '';
    case ':-':
      return nonEmpty ? v : interpolate(arg, vars);
    case '-':
      return set ? v : interpolate(arg, vars);
    case ':?':
    case '?':
      if (op === ':?' ? !nonEmpty : !set)
        throw new ComposeError(`required variable ${name} is missing a value: ${interpolate(arg, vars)}`);
      return v!;
    case ':+':
      return nonEmpty ? interpolate(arg, vars) : '';
    case '+':
      return set ? interpolate(arg, vars) : '';
  }
  throw new ComposeError(`invalid interpolation format: ${whole}`);
}

/** Every string value of `node` interpolated (keys are not). */
function interpolateAll(node: unknown, vars: Vars): unknown {
  if (typeof node === 'string') return interpolate(node, vars);
  if (Array.isArray(node)) return node.map((n) => interpolateAll(n, vars));
  if (node && typeof node === 'object')
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolateAll(v, vars)]));
  return node;
}

/** A project: the compose file and its `.env` (text, or undefined for none), in `dir`. */
export interface ComposeProject {
  /** The file after YAML merge keys and interpolation. */
  file: Obj;
  /** The environment a service's containers start with (before the image's own ENV). */
  environmentOf(service: string): Record<string, string>;
}

/**
 * Renders `dir`/docker-compose.yml as `docker compose config` would, with `dotEnv` as the
 * project's `.env` (its text; undefined = no .env file) and `shell` as the shell's variables
 * (they win over `.env`). @throws ComposeError where compose refuses to start.
 */
export function renderCompose(dir: string, dotEnv: string | undefined, shell: Vars = {}): ComposeProject {
  const dotVars = dotEnv === undefined ? {} : (parseEnv(dotEnv) as Vars);
  const vars: Vars = { ...dotVars, ...shell };
  const file = interpolateAll(
    parse(readFileSync(join(dir, 'docker-compose.yml'), 'utf8'), { merge: true }),
    vars,
  ) as Obj;
  return {
    file,
    environmentOf(service) {
      const s = file.services?.[service] as Obj | undefined;
      if (!s) throw new Error(`no service ${service}`);
      const env: Record<string, string> = {};
      const files = s.env_file === undefined ? [] : Array.isArray(s.env_file) ? s.env_file : [s.env_file];
      for (const f of files as (string | { path: string; required?: boolean })[]) {
        const { path, required = true } = typeof f === 'string' ? { path: f } : f;
        // The project's .env is the text given; any other file is read from `dir`.
        const text =
          path === '.env' ? dotEnv : existsSync(join(dir, path)) ? readFileSync(join(dir, path), 'utf8') : undefined;
        if (text === undefined) {
          if (required) throw new ComposeError(`env file ${path} not found`);
          continue;
        }
        Object.assign(env, parseEnv(text));
      }
      const own = s.environment ?? {};
      if (Array.isArray(own)) throw new Error('environment as a list: not supported here');
      for (const [k, v] of Object.entries(own as Record<string, unknown>)) {
        if (v === null || v === undefined) {
          // `KEY:` alone takes the value from the shell or .env, or leaves it unset.
          if (vars[k] !== undefined) env[k] = vars[k]!;
        } else env[k] = String(v);
      }
      return env;
    },
  };
}
