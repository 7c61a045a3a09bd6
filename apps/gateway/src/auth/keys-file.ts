/**
 * Re-reads AUTH_API_KEYS_FILE while the gateway runs (docs/security.md, "Adding and revoking
 * people"): every AUTH_API_KEYS_RELOAD_MS (5 s by default) the file is read whole and, when its
 * content changed, parsed and checked like at start (packages/config api-keys-file.ts). A good
 * file replaces the keys of the previous one (AUTH_API_KEYS stay); a bad or unreadable one
 * keeps the keys in use and logs `auth.keys_reload_failed` with the reason (never a key), once
 * per content. So a key added or removed takes effect within one reload interval plus the
 * time the file takes to change (a mounted Kubernetes Secret: the kubelet's sync period).
 *
 * The content is compared, not the modification time: a Secret volume is updated by swapping
 * a symlink, which a watch on the file itself does not see and which can keep the mtime.
 */
import { readFile } from 'node:fs/promises';
import { parseApiKeysFile, type ApiKeyEntry, type KeySetRules } from '@mcp-tasks/config';
import type { Logger } from '@mcp-tasks/observability';

export interface ApiKeysFileWatch {
  /** Reads the file now (tests, and the first read); resolves once applied or refused. */
  check(): Promise<void>;
  stop(): void;
}

export interface ApiKeysFileOptions {
  path: string;
  reloadMs: number;
  /** AUTH_API_KEYS: kept whatever the file says. */
  fixed: readonly ApiKeyEntry[];
  rules: KeySetRules;
  /** Receives the whole key set (fixed + file) after each good change. */
  onKeys(keys: readonly ApiKeyEntry[]): void;
  log: Logger;
}

/** Starts polling the keys file. */
export function watchApiKeysFile(o: ApiKeysFileOptions): ApiKeysFileWatch {
  let last: string | undefined;
  let running: Promise<void> | undefined;
  const check = async () => {
    let text: string;
    try {
      text = await readFile(o.path, 'utf8');
    } catch (e) {
      const why = `cannot read ${o.path}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`;
      if (last !== why) o.log.error({ path: o.path, reason: why }, 'auth.keys_reload_failed: keeping the keys in use');
      last = why;
      return;
    }
    if (text === last) return;
    last = text;
    const r = parseApiKeysFile(text, o.fixed, o.rules);
    if ('problem' in r) {
      o.log.error({ path: o.path, reason: r.problem }, 'auth.keys_reload_failed: keeping the keys in use');
      return;
    }
    o.onKeys([...o.fixed, ...r.keys]);
    o.log.info(
      { path: o.path, keys: r.keys.length, principals: new Set(r.keys.map((k) => k.name)).size },
      'auth.keys_reloaded',
    );
  };
  const once = () => (running ??= check().finally(() => (running = undefined)));
  const timer = setInterval(() => void once(), o.reloadMs);
  timer.unref();
  return { check: once, stop: () => clearInterval(timer) };
}
