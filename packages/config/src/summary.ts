/**
 * What a process says about its configuration when it starts: which Redis (topology,
 * redis.ts `describeRedis`) and key prefix it writes to, which tools it loads, how it authenticates. Never a secret: the Redis
 * password is replaced by `***`, API keys are counted, not shown.
 */
import type { AuthConfig } from './auth.js';
import { describeRedis, type RedisConfig } from './redis.js';

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
  redis: RedisConfig;
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
    redis: describeRedis(c.redis),
    keyPrefix: c.keyPrefix,
    toolsets: [...c.toolsets],
    toolModules: [...c.toolModules],
    ...(role === 'gateway' ? { auth: authModes(c.auth) } : {}),
  };
}
