#!/usr/bin/env node
// Runs the MCP Inspector CLI (@modelcontextprotocol/inspector, pinned in
// tools/inspector/package.json) non-interactively, the way test/e2e/inspector-cli.test.ts does:
//
//   node scripts/inspector.mjs http://127.0.0.1:3000/mcp --transport http --method tools/list \
//        --header "Authorization: Bearer $KEY" [--protocol-era modern] [--format json]
//
// Every argument is passed to `mcp-inspector --cli` unchanged. The Inspector declares
// Node >= 22.19, so it runs on the Node 22 binary that tools/conformance installs (npm package
// `node`), never on the Node 20 of the root install. It keeps a catalog and an OAuth store
// under $HOME/.mcp-inspector, so each run gets a fresh temporary HOME, removed afterwards.
// The exit code is the Inspector's (0 ok, 1 error, 3 auth required, 5 the tool returned
// isError: true; see its --help).
//
// Library use (from a node:test file):
//   import { runInspector } from '../scripts/inspector.mjs';
//   const r = await runInspector([url, '--transport', 'http', '--method', 'tools/list']);
//   // r = { code, stdout, stderr, ms, timedOut }

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureInstalled as ensureNode22, lockProblem, nodeBinaryPath } from './conformance.mjs';
import { entryArgs } from './entry-args.mjs';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
export const INSPECTOR_DIR = path.join(REPO_ROOT, 'tools', 'inspector');
const PKG = '@modelcontextprotocol/inspector';
const defaultLog = (line) => process.stderr.write(`${line}\n`);

/** Path of the Inspector's launcher (its `mcp-inspector` bin). */
export function inspectorBinPath() {
  const dir = path.join(INSPECTOR_DIR, 'node_modules', ...PKG.split('/'));
  const pkgFile = path.join(dir, 'package.json');
  let rel = 'clients/launcher/build/index.js';
  if (existsSync(pkgFile)) {
    const bin = JSON.parse(readFileSync(pkgFile, 'utf8')).bin;
    rel = (typeof bin === 'string' ? bin : bin?.['mcp-inspector']) ?? rel;
  }
  return path.join(dir, rel);
}

/** Returns null when tools/inspector is installed as its lock says, else the reason. */
export function installProblem() {
  const problem = lockProblem(INSPECTOR_DIR);
  if (problem) return problem;
  if (!existsSync(inspectorBinPath())) return `Inspector CLI missing at ${inspectorBinPath()}`;
  return null;
}

/**
 * Installs what the Inspector needs when missing or stale: tools/conformance (its Node 22) and
 * tools/inspector (`npm ci --prefix tools/inspector`, about 11 s). Throws when npm fails.
 */
export function ensureInstalled({ log = defaultLog } = {}) {
  ensureNode22({ log });
  const problem = installProblem();
  if (!problem) return;
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const args = ['ci', '--prefix', INSPECTOR_DIR, '--no-audit', '--no-fund'];
  log(`inspector: ${problem}`);
  log(`inspector: running: npm ${args.join(' ')}`);
  const started = Date.now();
  // Child output goes to our stderr so a node:test parent's stdout stays clean.
  const res = spawnSync(npm, args, { cwd: REPO_ROOT, stdio: ['ignore', 2, 2] });
  if (res.error) throw new Error(`npm ci failed to start: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`npm ${args.join(' ')} exited with ${res.status}`);
  log(`inspector: npm ci done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const still = installProblem();
  if (still) throw new Error(`after npm ci: ${still}`);
}

/**
 * Runs `mcp-inspector --cli ...args` on Node 22 with a fresh temporary HOME and no stdin.
 * @param {string[]} args                 arguments after `--cli`
 * @param {object} [opts]
 * @param {number} [opts.timeoutMs]       kill (SIGKILL) after this many ms (default 60000)
 * @param {boolean} [opts.install]        install tools/* first when missing (default true)
 * @returns {Promise<{code: number|null, stdout: string, stderr: string, ms: number, timedOut: boolean}>}
 */
export async function runInspector(args, { timeoutMs = 60_000, install = true } = {}) {
  if (install) ensureInstalled();
  else {
    const problem = installProblem();
    if (problem) throw new Error(`Inspector not installed: ${problem}`);
  }
  const home = mkdtempSync(path.join(tmpdir(), 'mcp-inspector-home-'));
  const started = Date.now();
  try {
    return await new Promise((resolve, reject) => {
      const child = spawn(nodeBinaryPath(), [inspectorBinPath(), '--cli', ...args], {
        cwd: home,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, HOME: home, USERPROFILE: home, NO_COLOR: '1', FORCE_COLOR: '0', CI: 'true' },
      });
      const out = [];
      const err = [];
      child.stdout.on('data', (b) => out.push(b));
      child.stderr.on('data', (b) => err.push(b));
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, timeoutMs);
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({
          code,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
          ms: Date.now() - started,
          timedOut,
        });
      });
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const HELP = `Usage: node scripts/inspector.mjs <url> --transport http --method tools/list [inspector options]
       node scripts/inspector.mjs --help | --version

Runs the MCP Inspector CLI (pinned in tools/inspector) non-interactively on the Node 22 of
tools/conformance, installing both first when missing; every argument goes to
\`mcp-inspector --cli\` unchanged (e.g. --header "Authorization: Bearer $KEY",
--protocol-era modern, --format json). Exit code: the Inspector's.

Options (alone; with a URL they are the Inspector's):
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // Alone, --help and --version are this script's (answered before anything is installed).
  if (process.argv.length === 3 && /^(-h|--help|-v|--version)$/.test(process.argv[2]))
    entryArgs({ name: 'inspector', usage: HELP });
  runInspector(process.argv.slice(2)).then(
    (r) => {
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      process.exitCode = r.code ?? 1;
    },
    (e) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
