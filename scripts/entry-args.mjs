/**
 * `--help` and `--version` of the plain-Node scripts a person runs (`npm start`, `npm run stack`,
 * `node scripts/conformance.mjs`, …), answered before anything starts, the same way as the
 * gateway and the worker (packages/config/src/cli.ts): help on stdout, the version as
 * `mcp-task-service <name> <version>`, exit 0; an unknown option one line on stderr, exit 2.
 * Parsing is node:util `parseArgs` (strict). Plain Node, no dependencies: these scripts run
 * before anything is built.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/**
 * Parses `argv` with `options` plus `-h/--help` and `-v/--version`; answers help and version
 * and exits. Returns parseArgs' `{ values, positionals }` when the script is to run.
 * @param o.name     the script's name in the version line and in messages (`stack`)
 * @param o.usage    the help text
 * @param o.options  the script's own parseArgs options
 * @param o.hint     what follows an unknown option's message (default `try --help`)
 */
export function entryArgs({
  argv = process.argv.slice(2),
  name,
  usage,
  options = {},
  allowPositionals = false,
  hint = 'try --help',
}) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
      strict: true,
      allowPositionals,
    });
  } catch (e) {
    process.stderr.write(`${name}: ${e.message.split('\n')[0]} (${hint})\n`);
    process.exit(2);
  }
  if (parsed.values.help) {
    process.stdout.write(`${usage.trimEnd()}\n`);
    process.exit(0);
  }
  if (parsed.values.version) {
    process.stdout.write(`mcp-task-service ${name} ${repoVersion()}\n`);
    process.exit(0);
  }
  return parsed;
}

/** `version` of the repository's package.json. */
export function repoVersion() {
  return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
}
