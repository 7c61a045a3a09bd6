#!/usr/bin/env node
/**
 * The Python MCP clients for test/e2e/python-clients.test.ts (issue 19 §8): a venv in
 * tools/python/.venv with tools/python/requirements.txt (the official SDK `mcp` 2.3.0, FastMCP
 * 4.0.10 and their dependencies, all pinned). `.ci/run` runs it; run it by hand the same way:
 *
 *   node scripts/python-clients.mjs
 *
 * Where the packages come from: PYTHON_CLIENTS_INDEX_URL when set (a PEP 503 index URL, e.g.
 * https://pypi.org/simple); else this machine's local wheel mirror when it exists
 * (file:///opt/pypi/simple, file:///opt/pypi-more/simple and /opt/wheels, the mirror pip is
 * configured for here), named explicitly so the install does not depend on a pip.conf; else
 * whatever pip is configured for. Nothing is installed when the venv already has the pinned
 * versions. When they cannot be had, it says so on one line, with pip's last lines, and exits 1.
 * Plain Node, no dependencies.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { entryArgs } from './entry-args.mjs';

export const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');
export const VENV = join(ROOT, 'tools', 'python', '.venv');
export const PYTHON = join(VENV, 'bin', 'python');
const REQUIREMENTS = join(ROOT, 'tools', 'python', 'requirements.txt');
/** The versions the test is written for. */
export const PINNED = { mcp: '2.3.0', fastmcp: '4.0.10' };

/**
 * Why the venv cannot run the clients (missing, or other versions), or undefined when it can.
 * Runs the venv's Python once (about 0.1 s).
 */
export function pythonClientsProblem() {
  if (!existsSync(PYTHON)) return `no venv at tools/python/.venv`;
  const r = spawnSync(PYTHON, ['-c', 'import importlib.metadata as m; print(m.version("mcp"), m.version("fastmcp"))'], {
    encoding: 'utf8',
  });
  if (r.status !== 0) return `tools/python/.venv lacks mcp or fastmcp (${(r.stderr || '').trim().split('\n').pop()})`;
  const [mcp, fastmcp] = r.stdout.trim().split(/\s+/);
  if (mcp !== PINNED.mcp || fastmcp !== PINNED.fastmcp)
    return `tools/python/.venv has mcp ${mcp} and fastmcp ${fastmcp}, not ${PINNED.mcp} and ${PINNED.fastmcp}`;
  return undefined;
}

/** pip's index options: PYTHON_CLIENTS_INDEX_URL, else the local mirror when present, else none (pip's own configuration). */
function indexArgs() {
  if (process.env.PYTHON_CLIENTS_INDEX_URL) return ['--index-url', process.env.PYTHON_CLIENTS_INDEX_URL];
  if (!existsSync('/opt/pypi/simple')) return [];
  return [
    '--index-url',
    'file:///opt/pypi/simple',
    ...(existsSync('/opt/pypi-more/simple') ? ['--extra-index-url', 'file:///opt/pypi-more/simple'] : []),
    ...(existsSync('/opt/wheels') ? ['--find-links', '/opt/wheels'] : []),
  ];
}

function fail(message, output = '') {
  console.error(`python-clients: ${message}`);
  const tail = output.trim().split('\n').slice(-8).join('\n');
  if (tail) console.error(tail.replace(/^/gm, '  pip: '));
  process.exit(1);
}

function main() {
  if (!pythonClientsProblem()) {
    console.log(`python-clients: tools/python/.venv has mcp ${PINNED.mcp} and fastmcp ${PINNED.fastmcp}`);
    return;
  }
  const python3 = spawnSync('python3', ['-c', 'import sys; print(sys.version_info >= (3, 10))'], { encoding: 'utf8' });
  if (python3.status !== 0 || python3.stdout.trim() !== 'True')
    fail(
      'python3 (3.10 or newer, with the venv module) is needed for the Python MCP clients; install python3 and python3-venv',
    );
  if (!existsSync(PYTHON)) {
    const v = spawnSync('python3', ['-m', 'venv', VENV], { encoding: 'utf8' });
    if (v.status !== 0) fail('python3 -m venv failed (Debian/Ubuntu: apt-get install python3-venv)', v.stderr);
  }
  const args = ['-m', 'pip', 'install', '--disable-pip-version-check', '-q', ...indexArgs(), '-r', REQUIREMENTS];
  console.log(`python-clients: pip ${args.slice(2).join(' ')}`);
  const r = spawnSync(PYTHON, args, { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0)
    fail(
      `the packages cannot be had (mcp==${PINNED.mcp}, fastmcp==${PINNED.fastmcp} and their pinned dependencies); set PYTHON_CLIENTS_INDEX_URL to an index that has them`,
      `${r.stdout ?? ''}\n${r.stderr ?? ''}`,
    );
  const problem = pythonClientsProblem();
  if (problem) fail(problem);
  console.log(`python-clients: installed mcp ${PINNED.mcp} and fastmcp ${PINNED.fastmcp} into tools/python/.venv`);
}

const HELP = `Usage: node scripts/python-clients.mjs [--help | --version]

Installs the Python MCP clients test/e2e/python-clients.test.ts runs (mcp ${PINNED.mcp}, fastmcp
${PINNED.fastmcp}, pinned in tools/python/requirements.txt) into tools/python/.venv; does
nothing when the venv has them. Packages come from PYTHON_CLIENTS_INDEX_URL when set, else the
local wheel mirror, else pip's own configuration. Needs python3 3.10+ with venv.

Options:
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  entryArgs({ name: 'python-clients', usage: HELP });
  main();
}
