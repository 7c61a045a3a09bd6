#!/usr/bin/env node
/**
 * `mcp-tasks`: a terminal client for the MCP task service. Commands: `call`,
 * `get`, `cancel`, `watch`, `tools`; `--help` on each, `--version`. The endpoint comes from
 * `--url` or `MCP_TASKS_URL` (default http://127.0.0.1:3000/mcp), the credential from
 * `MCP_TASKS_TOKEN` (sent as `Authorization: Bearer …`; never a flag, so it stays out of shell
 * history and `ps`). Results go to stdout, everything else (progress, prompts, notes) to stderr.
 */
import { Command, Option } from 'commander';
import { runCall } from './commands/call.js';
import { runCancel } from './commands/cancel.js';
import { runGet } from './commands/get.js';
import { runTools } from './commands/tools.js';
import { runWatch } from './commands/watch.js';
import { cliVersion, DEFAULT_URL, describeError, EXIT, TOKEN_ENV, URL_ENV } from './context.js';
import type { Ending } from './render.js';

const collect = (value: string, previous: string[] = []) => [...previous, value];

const ENVIRONMENT_HELP = `
Environment:
  ${URL_ENV}     the MCP endpoint (default ${DEFAULT_URL}); --url wins
  ${TOKEN_ENV}   credential sent as "Authorization: Bearer <token>" (an API key or a JWT)

Exit codes:
  0 done   1 tool error, failed task or request error   2 bad usage   3 cancelled
  4 the task waits for an answer and stdin is not a terminal   130 left running after Ctrl-C`;

/** Prints an ending and exits with its code once the output is flushed. */
function finish(e: Ending): void {
  if (e.stderr) process.stderr.write(`${e.stderr}\n`);
  if (e.stdout !== undefined) process.stdout.write(`${e.stdout}\n`, () => process.exit(e.exitCode));
  else process.exit(e.exitCode);
}

/**
 * A command's action: runs `work` with the `--url` the command line gives (its last argument is the
 * Command) and ends the process as the result says; an error is printed and exits with its exit code.
 */
const run =
  (work: (url: string) => Promise<Ending>) =>
  async (...a: unknown[]) => {
    const cmd = a[a.length - 1] as Command;
    const url = String(cmd.optsWithGlobals().url);
    try {
      finish(await work(url));
    } catch (e) {
      finish({
        stderr: `mcp-tasks: ${describeError(e, url)}`,
        exitCode: (e as { exitCode?: number }).exitCode ?? EXIT.error,
      });
    }
  };

/** The program; `argv` as `process.argv`. */
export function buildProgram(): Command {
  const program = new Command('mcp-tasks')
    .description('Call long-running MCP tools as tasks from the terminal: progress, questions, cancel, notifications.')
    .version(cliVersion(), '-V, --version', 'print the version')
    .addOption(new Option('--url <url>', 'MCP endpoint').env(URL_ENV).default(DEFAULT_URL))
    .showHelpAfterError('(add --help for usage)')
    // Help and version exit 0; every command-line mistake exits 2 (EXIT.usage).
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT.usage))
    .addHelpText('after', ENVIRONMENT_HELP);

  program
    .command('call')
    .description(
      'call a tool: as a task with a progress bar and prompts when the server runs it as one, else on the request',
    )
    .argument('<tool>', 'tool name (see `mcp-tasks tools`)')
    .option('--args <json>', 'all arguments as one JSON object')
    .option('--arg <key=value>', "one argument, typed by the tool's schema (repeatable; wins over --args)", collect)
    .option('--json', 'print the raw result (CallToolResult, or the final task when it did not complete) as JSON')
    .addHelpText(
      'after',
      `
Examples:
  mcp-tasks call countdown --arg seconds=5
  mcp-tasks call deep_research --arg topic="tidal energy"
  mcp-tasks call add --args '{"a": 1, "b": 2}' --json

Ctrl-C while a task runs asks whether to cancel it or leave it running (its id is printed).
${ENVIRONMENT_HELP}`,
    )
    .action((tool: string, flags: { args?: string; arg?: string[]; json?: boolean }, cmd: Command) =>
      run((url) => runCall(url, tool, { ...flags, arg: flags.arg ?? [] }))(cmd),
    );

  program
    .command('get')
    .description('show a task: status, message, questions, result or error')
    .argument('<taskId>')
    .option('--json', 'print the raw tasks/get result')
    .addHelpText('after', ENVIRONMENT_HELP)
    .action((taskId: string, flags: { json?: boolean }, cmd: Command) => run((url) => runGet(url, taskId, flags))(cmd));

  program
    .command('cancel')
    .description('cancel a task and wait (up to 5 s) to see it end')
    .argument('<taskId>')
    .option('--json', 'print the task as it ended')
    .addHelpText('after', ENVIRONMENT_HELP)
    .action((taskId: string, flags: { json?: boolean }, cmd: Command) =>
      run((url) => runCancel(url, taskId, flags))(cmd),
    );

  program
    .command('watch')
    .description('follow a task to its end (live stream, else polling); answers its questions on a terminal')
    .argument('<taskId>')
    .option(
      '--notify',
      'raise a desktop notification when it ends or asks something (a terminal bell where there is no desktop)',
    )
    .option('--json', 'print the raw result as JSON')
    .addHelpText('after', ENVIRONMENT_HELP)
    .action((taskId: string, flags: { notify?: boolean; json?: boolean }, cmd: Command) =>
      run((url) => runWatch(url, taskId, flags))(cmd),
    );

  program
    .command('tools')
    .description("list the tools with their task support, or show one tool's parameters")
    .argument('[tool]', 'a tool to describe')
    .option('--json', 'print the raw tools/list entries')
    .addHelpText('after', ENVIRONMENT_HELP)
    .action((tool: string | undefined, flags: { json?: boolean }, cmd: Command) =>
      run((url) => runTools(url, tool, flags))(cmd),
    );

  return program;
}

await buildProgram().parseAsync(process.argv);
