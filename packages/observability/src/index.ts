/**
 * Structured logging (pino) with stable field names and one redaction list.
 *
 * Field names used across the service: `taskId`, `jobId`, `tool`, `principal`,
 * `reqId`, `step`, `status`, `err`. Log events are short verbs (`task.created`),
 * never interpolated strings.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger };

/** Paths never written to logs (tokens, secrets, tool arguments that may hold user data). */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'requestState',
  'config.requestState.keys',
];

/**
 * Creates the process logger.
 * @param name  `gateway` or `worker`; becomes the `svc` field.
 * @param level pino level (`info` by default).
 */
export function createLogger(name: string, level = 'info', extra: LoggerOptions = {}): Logger {
  return pino({
    level,
    base: { svc: name, pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    ...extra,
  });
}
