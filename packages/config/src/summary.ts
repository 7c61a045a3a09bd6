/**
 * What a process says about its configuration when it starts (issue 11 §3): which Redis and key
 * prefix it writes to, which tools it loads, how it authenticates. Never a secret: the Redis
 * password is replaced by `***`, API keys are counted, not shown.
 */
import type { AuthConfig } from './auth.js';

/**
 * `url` with any password replaced by `***` (`redis://user:***@host:6379/0`); a URL without
 * credentials is returned unchanged. A value that does not parse as a URL loses everything
 * between `//` and `@`.
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = '***';
    return u.href;
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/**
 * The authentication modes in force, e.g. `['api-keys(2)', 'jwt(https://issuer.example)']`,
 * or `['anonymous(dev-loopback)']` (design D9). Names and counts only.
 */
export function authModes(auth: AuthConfig): string[] {
  const out: string[] = [];
  if (auth.apiKeys.length) out.push(`api-keys(${auth.apiKeys.length})`);
  if (auth.jwt) out.push(`jwt(${auth.jwt.issuer})`);
  if (auth.allowAnonymous) out.push(`anonymous(${auth.anonymous})`);
  return out;
}

/** What `startupSummary` reads from the configuration. */
export interface SummaryInput {
  redisUrl: string;
  keyPrefix: string;
  toolsets: readonly string[];
  toolModules: readonly string[];
  auth: AuthConfig;
}

/**
 * Fields of the start-up log line (`gateway.ready`, `worker.ready`): `redis` (credentials
 * redacted), `keyPrefix`, `toolsets`, `toolModules`, and for a gateway `auth` (authModes).
 */
export function startupSummary(c: SummaryInput, role: 'gateway' | 'worker'): Record<string, unknown> {
  return {
    redis: redactUrl(c.redisUrl),
    keyPrefix: c.keyPrefix,
    toolsets: [...c.toolsets],
    toolModules: [...c.toolModules],
    ...(role === 'gateway' ? { auth: authModes(c.auth) } : {}),
  };
}
