/**
 * Completion webhooks: where a finished task is announced, how it is signed
 * (Standard Webhooks, `whsec_` secrets), and how deliveries are retried. Read by gateways and
 * workers alike (both enqueue deliveries; workers send them): set the same values everywhere.
 *
 * Variables (all optional; none set = no webhooks):
 *   TASK_WEBHOOK_URL            http(s) URL that receives every finished task
 *   TASK_WEBHOOK_SECRET         `whsec_<base64 of 24-64 random bytes>`, required with the URL
 *   TASK_WEBHOOKS_BY_PRINCIPAL  JSON `{"<principal>": {"url": "...", "secret": "whsec_..."}}`:
 *                               a principal listed here gets its own target instead of the global one
 *   TASK_WEBHOOK_INCLUDE_RESULT `true` adds the task's result (or error) to the body (default false)
 *   TASK_WEBHOOK_TIMEOUT_MS     one delivery attempt's HTTP timeout, ms (default 10000)
 *   TASK_WEBHOOK_ATTEMPTS       attempts per delivery, the first included (default 12)
 *   TASK_WEBHOOK_BACKOFF_MS     first retry delay, doubled each retry (default 2000)
 *   TASK_WEBHOOK_CONCURRENCY    deliveries one worker process sends at once (default 16)
 */
import { z } from 'zod';

/** Where a delivery goes. `secret` is non-enumerable (kept out of JSON, inspect and spreads). */
export interface WebhookTarget {
  readonly url: string;
  readonly secret: string;
}

/** `config.webhooks`. */
export interface WebhookConfig {
  /** True when any target is configured (deliveries are enqueued). */
  enabled: boolean;
  /** TASK_WEBHOOK_URL / TASK_WEBHOOK_SECRET. */
  global?: WebhookTarget;
  /** TASK_WEBHOOKS_BY_PRINCIPAL: replaces `global` for the principals it names. */
  byPrincipal: Readonly<Record<string, WebhookTarget>>;
  includeResult: boolean;
  /** ms. */
  timeoutMs: number;
  attempts: number;
  /** ms; BullMQ exponential backoff: retry n waits backoffMs × 2^(n-1). */
  backoffMs: number;
  concurrency: number;
}

/** Smallest and largest secret accepted (bytes after base64 decoding, the Standard Webhooks range). */
export const WEBHOOK_SECRET_BYTES = { min: 24, max: 64 } as const;

const SECRET_RE = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/** Why `secret` is not a usable Standard Webhooks secret, or undefined when it is. Never echoes it. */
export function webhookSecretProblem(secret: string): string | undefined {
  const m = SECRET_RE.exec(secret);
  if (!m) return 'must be "whsec_" followed by base64 (generate one with: echo "whsec_$(openssl rand -base64 32)")';
  const n = Buffer.from(m[1]!, 'base64').length;
  if (n < WEBHOOK_SECRET_BYTES.min || n > WEBHOOK_SECRET_BYTES.max) {
    return `must decode to ${WEBHOOK_SECRET_BYTES.min}-${WEBHOOK_SECRET_BYTES.max} bytes (got ${n}); generate one with: echo "whsec_$(openssl rand -base64 32)"`;
  }
  return undefined;
}

/** Why `url` cannot receive webhooks, or undefined. Never echoes it (it may carry a token). */
export function webhookUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'must be an absolute http:// or https:// URL';
  return undefined;
}

function target(url: string, secret: string): WebhookTarget {
  const t = { url } as WebhookTarget;
  Object.defineProperty(t, 'secret', { value: secret, enumerable: false });
  return Object.freeze(t);
}

const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const WEBHOOK_VARIABLES_SCHEMA = z.object({
  TASK_WEBHOOK_URL: z.string().optional(),
  TASK_WEBHOOK_SECRET: z.string().optional(),
  TASK_WEBHOOKS_BY_PRINCIPAL: z.string().default('{}'),
  TASK_WEBHOOK_INCLUDE_RESULT: bool.default(false),
  TASK_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(10_000),
  TASK_WEBHOOK_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(12),
  TASK_WEBHOOK_BACKOFF_MS: z.coerce.number().int().min(1).max(3_600_000).default(2000),
  TASK_WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
});

/**
 * Parses the webhook variables of `env` (empty values already removed).
 * @returns the config, or a one-line problem naming the variable (never a secret or a URL).
 */
export function parseWebhookConfig(env: Record<string, string | undefined>): WebhookConfig | { problem: string } {
  const parsed = WEBHOOK_VARIABLES_SCHEMA.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { problem: `${issue.path.join('.')}: ${issue.message}` };
  }
  const e = parsed.data;
  let global: WebhookTarget | undefined;
  if (e.TASK_WEBHOOK_URL !== undefined || e.TASK_WEBHOOK_SECRET !== undefined) {
    if (e.TASK_WEBHOOK_URL === undefined)
      return { problem: 'TASK_WEBHOOK_URL: required when TASK_WEBHOOK_SECRET is set' };
    if (e.TASK_WEBHOOK_SECRET === undefined)
      return { problem: 'TASK_WEBHOOK_SECRET: required when TASK_WEBHOOK_URL is set' };
    const up = webhookUrlProblem(e.TASK_WEBHOOK_URL);
    if (up) return { problem: `TASK_WEBHOOK_URL: ${up}` };
    const sp = webhookSecretProblem(e.TASK_WEBHOOK_SECRET);
    if (sp) return { problem: `TASK_WEBHOOK_SECRET: ${sp}` };
    global = target(e.TASK_WEBHOOK_URL, e.TASK_WEBHOOK_SECRET);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(e.TASK_WEBHOOKS_BY_PRINCIPAL);
  } catch {
    return {
      problem:
        'TASK_WEBHOOKS_BY_PRINCIPAL: must be a JSON object such as {"key:alice":{"url":"https://...","secret":"whsec_..."}}',
    };
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    return {
      problem:
        'TASK_WEBHOOKS_BY_PRINCIPAL: must be a JSON object such as {"key:alice":{"url":"https://...","secret":"whsec_..."}}',
    };
  }
  const byPrincipal = Object.create(null) as Record<string, WebhookTarget>;
  for (const [principal, v] of Object.entries(raw as Record<string, unknown>)) {
    const entry = v as { url?: unknown; secret?: unknown } | null;
    if (!entry || typeof entry !== 'object' || typeof entry.url !== 'string' || typeof entry.secret !== 'string') {
      return {
        problem: `TASK_WEBHOOKS_BY_PRINCIPAL: the entry of "${principal}" must be {"url": "...", "secret": "whsec_..."}`,
      };
    }
    const up = webhookUrlProblem(entry.url);
    if (up) return { problem: `TASK_WEBHOOKS_BY_PRINCIPAL: the url of "${principal}" ${up}` };
    const sp = webhookSecretProblem(entry.secret);
    if (sp) return { problem: `TASK_WEBHOOKS_BY_PRINCIPAL: the secret of "${principal}" ${sp}` };
    byPrincipal[principal] = target(entry.url, entry.secret);
  }
  return {
    enabled: global !== undefined || Object.keys(byPrincipal).length > 0,
    ...(global ? { global } : {}),
    byPrincipal: Object.freeze(byPrincipal),
    includeResult: e.TASK_WEBHOOK_INCLUDE_RESULT,
    timeoutMs: e.TASK_WEBHOOK_TIMEOUT_MS,
    attempts: e.TASK_WEBHOOK_ATTEMPTS,
    backoffMs: e.TASK_WEBHOOK_BACKOFF_MS,
    concurrency: e.TASK_WEBHOOK_CONCURRENCY,
  };
}

/** The target of a principal's finished tasks: its own entry, else the global one, else none. */
export function webhookTargetFor(c: WebhookConfig, principal: string): WebhookTarget | undefined {
  return Object.hasOwn(c.byPrincipal, principal) ? c.byPrincipal[principal] : c.global;
}
