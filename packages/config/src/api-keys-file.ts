/**
 * API keys from a file (AUTH_API_KEYS_FILE), re-read by the gateway while it runs, so a team
 * adds or revokes a person without a restart (docs/security.md, "Adding and revoking people").
 *
 * Format: one `principal:key` or `principal:sha256:<64 hex>` per line (commas separate entries
 * too, so an AUTH_API_KEYS value can be pasted); blank lines and lines starting with `#` are
 * ignored. An empty file is valid: nobody gets in with a key from it.
 *
 * The keys of the file are added to those of AUTH_API_KEYS (which stay fixed). The same rules as
 * for AUTH_API_KEYS hold across both, plus, checked the same way at start and on every reload:
 *  - no key may name two principals;
 *  - no key may be an admin key (ADMIN_API_KEYS): an admin credential is no MCP credential;
 *  - in production, a raw key must pass the strength check (key-strength.ts).
 * A file that breaks a rule stops the gateway at start; on a reload it is ignored (the keys in
 * use stay) and the gateway logs why.
 */
import { readFileSync } from 'node:fs';
import { apiKeysSchema, type ApiKeyEntry } from './auth-schema.js';
import { weakKeyProblem } from './key-strength.js';

/** What every key set must respect besides its own syntax. */
export interface KeySetRules {
  /** NODE_ENV=production: raw keys must pass the strength check. */
  production: boolean;
  /** Digests of the admin keys (ADMIN_API_KEYS), none of which may be an MCP key. */
  adminDigests?: readonly Uint8Array[];
}

/** The comma- or line-separated entries of `text`, without blank and `#` lines. */
function entriesOf(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .flatMap((l) => l.split(','))
    .map((e) => e.trim())
    .filter(Boolean);
}

/**
 * Why the raw keys of `value` (an AUTH_API_KEYS or ADMIN_API_KEYS value, or a keys file's
 * entries joined by commas) are too weak for production, or `undefined`. Never contains a key.
 */
export function weakKeysProblem(value: string, source: string): string | undefined {
  for (const [i, entry] of entriesOf(value).entries()) {
    const colon = entry.indexOf(':');
    const rest = entry.slice(colon + 1);
    if (colon <= 0 || rest.startsWith('sha256:')) continue;
    const problem = weakKeyProblem(rest);
    if (problem) return `${source}: entry ${i + 1} (principal "${entry.slice(0, colon)}"): the key ${problem}`;
  }
  return undefined;
}

/** Why `keys` (from `source`) share a key with the admin keys, or `undefined`. */
export function adminOverlapProblem(keys: readonly ApiKeyEntry[], rules: KeySetRules, source: string) {
  const admin = new Set((rules.adminDigests ?? []).map((d) => Buffer.from(d).toString('hex')));
  const clash = keys.find((k) => admin.has(k.digest.toString('hex')));
  return clash
    ? `${source}: the key of principal "${clash.name}" is also an admin key (ADMIN_API_KEYS); give admins keys of their own`
    : undefined;
}

/**
 * Parses a keys file's text and checks it against the rules and the fixed keys of AUTH_API_KEYS.
 * @returns the file's keys, or a one-line problem naming the entry (never a key).
 */
export function parseApiKeysFile(
  text: string,
  fixed: readonly ApiKeyEntry[],
  rules: KeySetRules,
  source = 'AUTH_API_KEYS_FILE',
): { keys: ApiKeyEntry[] } | { problem: string } {
  const entries = entriesOf(text);
  if (entries.length === 0) return { keys: [] };
  const parsed = apiKeysSchema.safeParse(entries.join(','));
  if (!parsed.success) return { problem: `${source}: ${parsed.error.issues[0]!.message}` };
  const keys = parsed.data;
  const weak = rules.production ? weakKeysProblem(entries.join(','), source) : undefined;
  if (weak) return { problem: weak };
  const fixedDigests = new Map(fixed.map((k) => [k.digest.toString('hex'), k.name]));
  for (const k of keys) {
    const other = fixedDigests.get(k.digest.toString('hex'));
    if (other !== undefined && other !== k.name)
      return { problem: `${source}: the key of principal "${k.name}" is also the key of "${other}" in AUTH_API_KEYS` };
  }
  const overlap = adminOverlapProblem(keys, rules, source);
  return overlap ? { problem: overlap } : { keys };
}

/** Reads and parses the keys file at `path`. @returns as parseApiKeysFile, or the read error. */
export function readApiKeysFile(
  path: string,
  fixed: readonly ApiKeyEntry[],
  rules: KeySetRules,
): { keys: ApiKeyEntry[]; text: string } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return { problem: `AUTH_API_KEYS_FILE: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}` };
  }
  const r = parseApiKeysFile(text, fixed, rules);
  return 'problem' in r ? r : { keys: r.keys, text };
}
