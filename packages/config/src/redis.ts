/**
 * The Redis topology (case N-10): one Redis, a Redis Cluster, or a master found
 * through Sentinel. Exactly one applies:
 *
 *   REDIS_URL                 one Redis (default redis://127.0.0.1:6379); `rediss://` = TLS
 *   REDIS_CLUSTER_NODES       `host:port,host:port,...`: seed nodes of a Redis Cluster (the
 *                             client discovers the rest); port defaults to 6379
 *   REDIS_SENTINELS           `host:port,...`: Sentinels to ask for the master (port defaults
 *                             to 26379), with REDIS_SENTINEL_NAME, the master group name
 *                             (required with REDIS_SENTINELS)
 *
 * and for every topology (each one optional; for REDIS_URL they override the URL's own):
 *   REDIS_USERNAME            ACL user name of the data nodes
 *   REDIS_PASSWORD            password of the data nodes (never logged: see `describeRedis`)
 *   REDIS_SENTINEL_PASSWORD   password of the Sentinels (only with REDIS_SENTINELS)
 *   REDIS_TLS                 `true`: TLS to the data nodes (and the Sentinels); default false
 *                             (a `rediss://` REDIS_URL turns it on by itself)
 *   REDIS_WAIT_REPLICAS       replicas that must acknowledge a task's creation writes (Redis
 *                             `WAIT`) before its handle is returned; default 0 (off). With
 *                             Sentinel, the number of replicas keeps a failover from losing a
 *                             task whose handle a client holds (the old master accepts writes
 *                             until it is demoted; with fewer, a replica still following it can
 *                             acknowledge).
 *                             Not with REDIS_CLUSTER_NODES.
 *   REDIS_WAIT_TIMEOUT_MS     how long that `WAIT` may take (ms, 10-1500, default 1000; the
 *                             gateway's commands time out after 2 s); fewer replicas by then:
 *                             the creation is refused (-32603) and undone
 *
 * Conflicting settings are refused at start with one line naming the variables: cluster and
 * sentinel together, REDIS_URL together with either, a Sentinel name or password without
 * Sentinels, Sentinels without a name.
 */
import { z } from 'zod';

/** One `host:port` of REDIS_CLUSTER_NODES or REDIS_SENTINELS. */
export interface RedisAddress {
  host: string;
  port: number;
}

/** What every topology shares: credentials and TLS of the data nodes. */
interface RedisCommon {
  username?: string;
  /** Never logged or returned (see `describeRedis`). */
  password?: string;
  tls: boolean;
  /** REDIS_WAIT_REPLICAS: replicas that must acknowledge a creation's writes (0 or absent: no `WAIT`). */
  waitReplicas?: number;
  /** REDIS_WAIT_TIMEOUT_MS: how long that `WAIT` may block (ms; default 1000). */
  waitTimeoutMs?: number;
}

/** `config.redis`: the validated topology. */
export type RedisConfig =
  | ({ mode: 'single'; url: string } & RedisCommon)
  | ({ mode: 'cluster'; nodes: RedisAddress[] } & RedisCommon)
  | ({ mode: 'sentinel'; sentinels: RedisAddress[]; name: string; sentinelPassword?: string } & RedisCommon);

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Parses a comma list of `host:port` (`[v6]:port` allowed); the port defaults to `defaultPort`. */
function addressList(defaultPort: number) {
  return z.string().transform((v, ctx) => {
    const out: RedisAddress[] = [];
    for (const item of v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+)(?::(\d{1,5}))?$/.exec(item);
      const port = m?.[2] === undefined ? defaultPort : Number(m[2]);
      if (!m || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `"${item}" is not host:port` });
        return z.NEVER;
      }
      out.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
    }
    if (!out.length) {
      ctx.addIssue({ code: 'custom', message: 'must name at least one host:port' });
      return z.NEVER;
    }
    return out;
  });
}

export const REDIS_VARIABLES_SCHEMA = z.object({
  REDIS_URL: z
    .string()
    .optional()
    .refine((v) => v === undefined || /^rediss?:\/\//.test(v), 'must start with redis:// or rediss://'),
  REDIS_CLUSTER_NODES: addressList(6379).optional(),
  REDIS_SENTINELS: addressList(26379).optional(),
  REDIS_SENTINEL_NAME: z.string().min(1).optional(),
  REDIS_USERNAME: z.string().min(1).optional(),
  REDIS_PASSWORD: z.string().min(1).optional(),
  REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
  REDIS_TLS: z.stringbool({ truthy: ['true'], falsy: ['false'], error: 'must be true or false' }).default(false),
  REDIS_WAIT_REPLICAS: z.coerce.number().int().min(0).max(16).default(0),
  // At most 1.5 s: the request connection gives any command 2 s (REQUEST_COMMAND_TIMEOUT_MS).
  REDIS_WAIT_TIMEOUT_MS: z.coerce.number().int().min(10).max(1500).default(1000),
});

/**
 * Parses the Redis variables of `env` (empty values already removed).
 * @returns the topology, or a one-line problem naming the variable(s).
 */
export function parseRedisConfig(env: Record<string, string | undefined>): RedisConfig | { problem: string } {
  const parsed = REDIS_VARIABLES_SCHEMA.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { problem: `${issue.path.join('.')}: ${issue.message}` };
  }
  const e = parsed.data;
  const common: RedisCommon = {
    ...(e.REDIS_USERNAME ? { username: e.REDIS_USERNAME } : {}),
    ...(e.REDIS_PASSWORD ? { password: e.REDIS_PASSWORD } : {}),
    tls: e.REDIS_TLS,
    ...(e.REDIS_WAIT_REPLICAS > 0
      ? { waitReplicas: e.REDIS_WAIT_REPLICAS, waitTimeoutMs: e.REDIS_WAIT_TIMEOUT_MS }
      : {}),
  };
  if (e.REDIS_CLUSTER_NODES && e.REDIS_SENTINELS)
    return {
      problem: 'REDIS_CLUSTER_NODES and REDIS_SENTINELS: set one of them (a Redis Cluster or Sentinel), not both',
    };
  if (e.REDIS_URL && (e.REDIS_CLUSTER_NODES || e.REDIS_SENTINELS)) {
    return {
      problem: `REDIS_URL and ${e.REDIS_CLUSTER_NODES ? 'REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS'}: set one of them, not both (unset REDIS_URL)`,
    };
  }
  if (!e.REDIS_SENTINELS) {
    const stray = (['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_PASSWORD'] as const).find((k) => e[k] !== undefined);
    if (stray) return { problem: `${stray}: only used with REDIS_SENTINELS, which is not set` };
  }
  if (e.REDIS_CLUSTER_NODES) {
    // A creation writes to two slots (record, job), likely on two masters: one WAIT cannot cover both.
    if (e.REDIS_WAIT_REPLICAS > 0)
      return {
        problem:
          'REDIS_WAIT_REPLICAS: not supported with REDIS_CLUSTER_NODES (a creation writes to more than one master); unset it or set 0',
      };
    return { mode: 'cluster', nodes: e.REDIS_CLUSTER_NODES, ...common };
  }
  if (e.REDIS_SENTINELS) {
    if (!e.REDIS_SENTINEL_NAME)
      return {
        problem: 'REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master group name the Sentinels monitor)',
      };
    return {
      mode: 'sentinel',
      sentinels: e.REDIS_SENTINELS,
      name: e.REDIS_SENTINEL_NAME,
      ...(e.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: e.REDIS_SENTINEL_PASSWORD } : {}),
      ...common,
    };
  }
  const url = e.REDIS_URL ?? DEFAULT_REDIS_URL;
  return { mode: 'single', url, ...common, tls: common.tls || url.startsWith('rediss://') };
}

const hostPort = (a: RedisAddress) => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`);

/** `url` with any password replaced by `***`; a value that does not parse loses everything between `//` and `@`. */
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
 * One line naming the Redis a process uses, never a password: `redis://127.0.0.1:6379`,
 * `cluster 10.0.0.1:7000,10.0.0.2:7000 (tls)`, `sentinel mymaster via 10.0.0.5:26379`.
 * Used by the start-up summary and by connection errors.
 */
export function describeRedis(c: RedisConfig): string {
  const extra = [
    c.tls && !(c.mode === 'single' && c.url.startsWith('rediss://')) ? 'tls' : '',
    c.username ? `user ${c.username}` : '',
    c.password ? 'password ***' : '',
  ].filter(Boolean);
  const tail = extra.length ? ` (${extra.join(', ')})` : '';
  switch (c.mode) {
    case 'single':
      return `${redactUrl(c.url)}${tail}`;
    case 'cluster':
      return `cluster ${c.nodes.map(hostPort).join(',')}${tail}`;
    case 'sentinel':
      return `sentinel ${c.name} via ${c.sentinels.map(hostPort).join(',')}${tail}`;
  }
}
