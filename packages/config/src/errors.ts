/** Thrown by `loadConfig` with a one-line, user-facing message that names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
