/**
 * Command-line arguments of the entry points. The processes are configured by the
 * environment only; their command line takes just `--help` and `--version`, answered before
 * anything starts: no configuration is read, no Redis is contacted, no port is opened.
 * Parsing is node:util `parseArgs` (strict: an unknown option is an error, exit 2).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from './errors.js';
import { loadConfig } from './load-config.js';
import type { Config } from './config-type.js';

/** What `parseEntryArgs` found. */
export type EntryArgs =
  { action: 'run' } | { action: 'help' } | { action: 'version' } | { action: 'error'; message: string };

/** Parses `argv` (without node and the script): `-h`/`--help`, `-v`/`--version`, nothing else. */
export function parseEntryArgs(argv: readonly string[]): EntryArgs {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
      strict: true,
      allowPositionals: false,
    });
    if (values.help) return { action: 'help' };
    if (values.version) return { action: 'version' };
    return { action: 'run' };
  } catch (e) {
    return { action: 'error', message: (e as Error).message.split('\n')[0]! };
  }
}

/** The service's name: MCP `serverInfo.name`, the tracer's name, the OAuth resource name, `--version`. */
export const SERVICE_NAME = 'mcp-task-service';

/**
 * The service's version: `version` of the repository's package.json (three levels above this
 * file, from `src/` and from `dist/` alike), or `unknown` when it cannot be read.
 */
export function serviceVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      name?: string;
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Environment variables every entry point's help names (the rest: `.env.example`). */
export const COMMON_HELP = `Configuration comes from environment variables only; .env.example lists every one with its
default. The main ones:
  REDIS_URL          Redis for task records and queues (redis://127.0.0.1:6379), or instead
  REDIS_CLUSTER_NODES  a Redis Cluster (host:port,...), or REDIS_SENTINELS (host:port,...)
                     with REDIS_SENTINEL_NAME; REDIS_PASSWORD, REDIS_TLS for any of them
  REDIS_KEY_PREFIX   prefix of every key written (mcp); give each deployment its own
  MCP_TOOLSETS       built-in tool sets: demo, conformance, testing, or none (demo)
  MCP_TOOL_MODULES   your own tool modules, comma list of paths or package names
                     (docs/writing-tools.md); the same on gateways and workers
  LOG_LEVEL          fatal, error, warn, info, debug, trace or silent (info)

Options:
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

/**
 * Answers `--help` / `--version` on stdout and exits 0; an unknown option or argument prints
 * one line on stderr and exits 2. Returns (does nothing) when there are no arguments.
 * @param name    the program's name in messages (`gateway`, `worker`, `start`)
 * @param usage   the help text above COMMON_HELP (usage line and what the program does)
 */
export function handleEntryArgs(argv: readonly string[], name: string, usage: string): void {
  const a = parseEntryArgs(argv);
  if (a.action === 'run') return;
  if (a.action === 'help') {
    process.stdout.write(`${usage.trimEnd()}\n\n${COMMON_HELP}\n`);
    process.exit(0);
  }
  if (a.action === 'version') {
    process.stdout.write(`${SERVICE_NAME} ${name} ${serviceVersion()}\n`);
    process.exit(0);
  }
  process.stderr.write(`${name}: ${a.message} (the configuration comes from the environment; try --help)\n`);
  process.exit(2);
}

/**
 * `loadConfig(process.env, {role})` for an entry point: a `ConfigError` is one line on stderr,
 * `<name>: invalid configuration: …`, and exit 1 (no stack trace); any other error is thrown.
 */
export function loadConfigOrExit(name: string, role: 'gateway' | 'worker'): Config {
  try {
    return loadConfig(process.env, { role });
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`${name}: ${e.message}`);
      process.exit(1);
    }
    throw e;
  }
}
