/**
 * Typed configuration from the environment, validated once at start (design §5).
 *
 * Every variable is documented in `.env.example` and docs/configuration.md. `loadConfig()`
 * (load-config.ts) throws a `ConfigError` whose message is one line naming the variable and
 * what is wrong; the apps print that line and exit 1 (no stack trace). The core settings'
 * schema is env-schema.ts, the `Config` shape config-type.ts. This file only re-exports.
 */
export { ConfigError } from './errors.js';
export { TOOLSETS, DEFAULT_WORKER_HTTP_PORT, MAX_TOOL_TIMEOUT_MS } from './env-schema.js';
export type { Toolset } from './env-schema.js';
export type { Config } from './config-type.js';
export { loadConfig, CONFIG_VARIABLES, LOOPBACK_HOSTS } from './load-config.js';
export * from './auth.js';
export * from './webhooks.js';
export * from './admin.js';
export * from './api-keys-file.js';
export * from './key-strength.js';
export * from './redis.js';
export * from './cli.js';
export * from './summary.js';
