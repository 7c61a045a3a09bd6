/**
 * The queue view: Bull Board on a separate admin listener of the gateway, off
 * unless `ADMIN_API_KEYS` is set.
 *
 * Variables:
 *   ADMIN_API_KEYS   the admin credentials, same format as AUTH_API_KEYS (`name:key` or
 *                    `name:sha256:<hex>`); unset = no admin listener at all
 *   ADMIN_HOST       address of the admin listener (default 127.0.0.1)
 *   ADMIN_PORT       its port (default 3100; 0 = any free port, named in the `admin.ready` log line)
 *   ADMIN_READ_ONLY  `false` lets admins retry, promote, clean or remove jobs (default true)
 */
import { z } from 'zod';
import { apiKeysSchema, type ApiKeyEntry } from './auth-schema.js';

/** `config.admin`, present only when ADMIN_API_KEYS is set. */
export interface AdminConfig {
  /** Digests of the admin keys (never the keys). */
  apiKeys: ApiKeyEntry[];
  host: string;
  port: number;
  readOnly: boolean;
}

export const ADMIN_VARIABLES_SCHEMA = z.object({
  ADMIN_API_KEYS: apiKeysSchema.optional(),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1'),
  ADMIN_PORT: z.coerce.number().int().min(0).max(65535).default(3100),
  ADMIN_READ_ONLY: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
});

/**
 * Parses the admin variables of `env` (empty values already removed).
 * @returns the config (`undefined` = admin view off), or a one-line problem naming the variable.
 */
export function parseAdminConfig(
  env: Record<string, string | undefined>,
): AdminConfig | undefined | { problem: string } {
  const parsed = ADMIN_VARIABLES_SCHEMA.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { problem: `${issue.path.join('.')}: ${issue.message}` };
  }
  const e = parsed.data;
  if (!e.ADMIN_API_KEYS) {
    const stray = ['ADMIN_HOST', 'ADMIN_PORT', 'ADMIN_READ_ONLY'].find((k) => env[k] !== undefined);
    if (stray) return { problem: `${stray}: the admin view is off until ADMIN_API_KEYS is set` };
    return undefined;
  }
  return { apiKeys: e.ADMIN_API_KEYS, host: e.ADMIN_HOST, port: e.ADMIN_PORT, readOnly: e.ADMIN_READ_ONLY };
}
