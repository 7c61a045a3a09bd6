#!/usr/bin/env node
// Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// tools/conformance/package.json) against a running server and summarises every scenario's
// checks.json: either the whole 2026-07-28 requirement run (--requirements: 50 scenarios in one
// suite process, what `npm test` runs) or chosen scenarios one at a time.
//
//   node scripts/conformance.mjs --url http://127.0.0.1:3000/mcp --requirements 2026-07-28 [--out DIR]
//   node scripts/conformance.mjs --url http://127.0.0.1:3000/mcp [--scenario NAME ...] [--all-tasks] [--out DIR]
//
// The suite does not load on Node 20 (it needs fs.globSync), so it runs on the Node 22 binary
// that the npm package `node` installs into tools/conformance/node_modules. This script itself
// runs on Node 20 and uses only node builtins. The server under test can run on anything.
//
// Exit code: 1 if any check is FAILURE, a scenario produced no checks.json, or the suite CLI
// exited non-zero; 0 otherwise. WARNING / INFO / SKIPPED checks are reported but do not fail.
//
// Library use (e.g. from a node:test file):
//   import { runRequirements } from '../scripts/conformance.mjs';
//   const all = await runRequirements({ url, out });   // same result shape, plus seconds
//   import { runConformance } from '../scripts/conformance.mjs';
//   const r = await runConformance({ url, scenarios, out });
//   // r = { ok, passed, failed, outDir, scenarios: [{ name, ok, passed, failed, failures: [{id, errorMessage}], ... }] }

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { repoVersion } from './entry-args.mjs';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
export const TOOLS_DIR = path.join(REPO_ROOT, 'tools', 'conformance');
const TOOLS_DIR_REL = path.relative(process.cwd(), TOOLS_DIR) || '.'; // for `npm ci --prefix`
const NODE_MODULES = path.join(TOOLS_DIR, 'node_modules');
const SUITE_PKG = '@modelcontextprotocol/conformance';

/** The 9 tasks scenarios the suite can score (tasks-status-notifications is always SKIPPED). */
export const DEFAULT_SCENARIOS = Object.freeze([
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
]);
export const SKIPPED_TASKS_SCENARIOS = Object.freeze(['tasks-status-notifications']);

/**
 * `--requirements 2026-07-28` of the pinned suite runs exactly these 50 server scenarios, each at
 * its own wire (extension scenarios without `--spec-version`): the 37 the revision requires
 * (scored) and 13 it runs but never scores (the Tasks extension's 10, and 3 pending ones).
 * `runRequirements` refuses a run whose set differs (a new suite version must be reviewed).
 */
export const REQUIREMENTS_REVISION = '2026-07-28';
export const SCORED_2026_SCENARIOS = Object.freeze([
  'server-stateless',
  'completion-complete',
  'tools-list',
  'tools-call-simple-text',
  'tools-call-image',
  'tools-call-audio',
  'tools-call-embedded-resource',
  'tools-call-mixed-content',
  'tools-call-error',
  'tools-call-with-progress',
  'server-sse-multiple-streams',
  'resources-list',
  'resources-read-text',
  'resources-read-binary',
  'resources-templates-read',
  'sep-2164-resource-not-found',
  'prompts-list',
  'prompts-get-simple',
  'prompts-get-with-args',
  'prompts-get-embedded-resource',
  'prompts-get-with-image',
  'dns-rebinding-protection',
  'caching',
  'input-required-result-basic-elicitation',
  'input-required-result-basic-sampling',
  'input-required-result-basic-list-roots',
  'input-required-result-request-state',
  'input-required-result-multiple-input-requests',
  'input-required-result-multi-round',
  'input-required-result-missing-input-response',
  'input-required-result-non-tool-request',
  'input-required-result-result-type',
  'input-required-result-unsupported-methods',
  'input-required-result-tampered-state',
  'input-required-result-capability-check',
  'input-required-result-ignore-extra-params',
  'input-required-result-validate-input',
]);
export const PENDING_2026_SCENARIOS = Object.freeze([
  'json-schema-2020-12',
  'http-header-validation',
  'http-custom-header-server-validation',
]);
export const REQUIREMENTS_2026_SCENARIOS = Object.freeze([
  ...SCORED_2026_SCENARIOS,
  ...DEFAULT_SCENARIOS,
  ...SKIPPED_TASKS_SCENARIOS,
  ...PENDING_2026_SCENARIOS,
]);

/** Default wire revision for non-extension scenarios (the service speaks 2026-07-28 only). */
export const DEFAULT_SPEC_VERSION = '2026-07-28';

// Extension scenarios have no place on the spec timeline: passing --spec-version to them makes
// the suite print "SKIPPED: ... not applicable" and exit 0 without running anything.
function isExtensionScenario(name) {
  return name.startsWith('tasks-') || name.startsWith('sep-2640-skills-');
}

const defaultLog = (line) => process.stderr.write(`${line}\n`);

/** Path for messages: relative to the cwd when below it, absolute otherwise. */
function show(p) {
  const r = path.relative(process.cwd(), p);
  return r && !r.startsWith('..') && !path.isAbsolute(r) ? r : p;
}

// ---------------------------------------------------------------------------------------------
// Installation of tools/conformance (node@22 + the suite)

function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** Path of the Node 22 binary that the npm package `node` installs in tools/conformance. */
export function nodeBinaryPath() {
  const pkgFile = path.join(NODE_MODULES, 'node', 'package.json');
  let rel = 'bin/node';
  if (existsSync(pkgFile)) {
    const bin = readJson(pkgFile).bin;
    rel = (typeof bin === 'string' ? bin : bin?.node) ?? rel;
  }
  return path.join(NODE_MODULES, 'node', rel);
}

function suiteCliPath() {
  const pkgFile = path.join(NODE_MODULES, ...SUITE_PKG.split('/'), 'package.json');
  let rel = 'dist/index.js';
  if (existsSync(pkgFile)) {
    const bin = readJson(pkgFile).bin;
    rel = (typeof bin === 'string' ? bin : bin?.conformance) ?? rel;
  }
  return path.join(NODE_MODULES, ...SUITE_PKG.split('/'), rel);
}

/**
 * Returns null when `dir`/node_modules matches `dir`/package-lock.json (every locked package
 * installed at the locked version and integrity), else the reason. Used for each isolated
 * install under tools/ (this suite, and the Inspector in scripts/inspector.mjs).
 */
export function lockProblem(dir) {
  const rel = path.relative(process.cwd(), dir) || '.';
  const lockFile = path.join(dir, 'package-lock.json');
  if (!existsSync(lockFile)) return `${rel}/package-lock.json is missing`;
  const modules = path.join(dir, 'node_modules');
  if (!existsSync(modules)) return `${rel}/node_modules is missing`;
  const hiddenLock = path.join(modules, '.package-lock.json');
  if (!existsSync(hiddenLock)) return `${rel}/node_modules has no .package-lock.json (incomplete install)`;
  let want;
  let have;
  try {
    want = readJson(lockFile).packages ?? {};
    have = readJson(hiddenLock).packages ?? {};
  } catch (err) {
    return `cannot parse lockfiles: ${err.message}`;
  }
  for (const [key, entry] of Object.entries(want)) {
    if (key === '') continue;
    const got = have[key];
    if (!got) {
      // npm leaves optional packages for another OS or CPU out of node_modules.
      if (entry.optional) continue;
      return `${key} is not installed`;
    }
    if (got.version !== entry.version) return `${key} is ${got.version}, lockfile wants ${entry.version}`;
    if (entry.integrity && got.integrity && got.integrity !== entry.integrity)
      return `${key} integrity differs from lockfile`;
  }
  return null;
}

/** Returns null when tools/conformance/node_modules matches package-lock.json, else the reason. */
export function installProblem() {
  const problem = lockProblem(TOOLS_DIR);
  if (problem) return problem;
  const want = readJson(path.join(TOOLS_DIR, 'package-lock.json')).packages ?? {};
  const node = nodeBinaryPath();
  if (!existsSync(node))
    return `Node 22 binary missing at ${show(node)} (the \`node\` package's install script did not run)`;
  const wantNode = want['node_modules/node']?.version;
  const res = spawnSync(node, ['--version'], { encoding: 'utf8' });
  if (res.status !== 0) return `${show(node)} --version failed`;
  if (wantNode && res.stdout.trim() !== `v${wantNode}`)
    return `Node binary is ${res.stdout.trim()}, lockfile wants v${wantNode}`;
  if (!existsSync(suiteCliPath())) return `suite CLI missing at ${show(suiteCliPath())}`;
  return null;
}

/** Runs `npm ci --prefix tools/conformance` when node_modules is missing or stale. */
export function ensureInstalled({ log = defaultLog } = {}) {
  const problem = installProblem();
  if (!problem) return;
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const args = ['ci', '--prefix', TOOLS_DIR_REL];
  log(`conformance: ${problem}`);
  log(`conformance: running: npm ${args.join(' ')}`);
  const started = Date.now();
  // Child output goes to our stderr so a node:test parent's stdout stays clean.
  const res = spawnSync(npm, args, { cwd: process.cwd(), stdio: ['ignore', 2, 2] });
  if (res.error) throw new Error(`npm ci failed to start: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`npm ${args.join(' ')} exited with ${res.status}`);
  log(`conformance: npm ci done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const still = installProblem();
  if (still) throw new Error(`after npm ci: ${still}`);
}

// ---------------------------------------------------------------------------------------------
// Running scenarios

function runCli(args, { logFile, verbose, killAfterMs }) {
  return new Promise((resolve) => {
    const child = spawn(nodeBinaryPath(), [suiteCliPath(), ...args], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    });
    const chunks = [];
    const onData = (buf) => {
      chunks.push(buf);
      if (verbose) process.stderr.write(buf);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, killAfterMs);
    const finish = (code, spawnError) => {
      clearTimeout(timer);
      // the suite prints hard-coded ANSI colours; keep logs plain
      const output = Buffer.concat(chunks)
        .toString('utf8')
        .replace(/\x1b\[[0-9;]*m/g, '');
      try {
        writeFileSync(logFile, output);
      } catch {
        /* best effort */
      }
      resolve({ code, output, killed, spawnError });
    };
    child.on('error', (err) => finish(null, err));
    child.on('close', (code, signal) => finish(code ?? (signal ? 128 : 1)));
  });
}

function findChecksFile(scenarioDir, name) {
  if (!existsSync(scenarioDir)) return null;
  const prefix = `server-${name}-`;
  const dirs = readdirSync(scenarioDir)
    .filter((d) => d.startsWith(prefix) && existsSync(path.join(scenarioDir, d, 'checks.json')))
    .map((d) => ({ d, t: statSync(path.join(scenarioDir, d, 'checks.json')).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  return dirs.length ? path.join(scenarioDir, dirs[0].d, 'checks.json') : null;
}

function excerpt(text, head, tail) {
  const lines = text.trimEnd().split('\n');
  if (lines.length <= head + tail + 1) return lines;
  return [...lines.slice(0, head), `… (${lines.length - head - tail} lines)`, ...lines.slice(-tail)];
}

/** An empty per-scenario result. */
function newResult(name, { exitCode = null, seconds = 0, logFile = null } = {}) {
  return {
    name,
    ok: false,
    passed: 0,
    failed: 0,
    warnings: 0,
    skipped: 0,
    info: 0,
    failures: [],
    warningChecks: [],
    /** Every SKIPPED check as the suite wrote it (id and reason). */
    skippedChecks: [],
    exitCode,
    seconds,
    checksFile: null,
    logFile,
    error: undefined,
  };
}

/** Reads a checks.json into `result.checksFile`; null (and `result.error`) when unreadable. */
function readChecks(result, checksFile) {
  result.checksFile = checksFile;
  try {
    const checks = JSON.parse(readFileSync(checksFile, 'utf8'));
    if (!Array.isArray(checks)) throw new Error('not an array');
    return checks;
  } catch (err) {
    result.error = `unreadable ${checksFile}: ${err.message}`;
    return null;
  }
}

/** Counts a scenario's checks by status. */
function tally(result, checks) {
  for (const c of checks) {
    switch (c.status) {
      case 'SUCCESS':
        result.passed++;
        break;
      case 'FAILURE':
        result.failed++;
        result.failures.push({ id: c.id, errorMessage: c.errorMessage ?? '' });
        break;
      case 'WARNING':
        result.warnings++;
        result.warningChecks.push({ id: c.id, errorMessage: c.errorMessage ?? '' });
        break;
      case 'SKIPPED':
        result.skipped++;
        result.skippedChecks.push({ id: c.id, errorMessage: c.errorMessage ?? c.details?.note ?? '' });
        break;
      default:
        result.info++;
    }
  }
}

/** A runner-level problem counts as one failed check, so `failed === 0` really means green. */
function addRunnerError(result, msg) {
  result.error = result.error ? `${result.error}; ${msg}` : msg;
  result.failed++;
  result.failures.push({ id: 'runner-error', errorMessage: msg });
}

async function runScenario(name, { url, outDir, timeoutMs, specVersion, verbose }) {
  const scenarioDir = path.join(outDir, name);
  mkdirSync(scenarioDir, { recursive: true });
  const args = ['server', '--url', url, '--scenario', name, '-o', scenarioDir];
  if (timeoutMs) args.push('--timeout', String(timeoutMs));
  if (specVersion && !isExtensionScenario(name)) args.push('--spec-version', specVersion);
  const started = Date.now();
  const logFile = path.join(scenarioDir, 'cli.log');
  const run = await runCli(args, { logFile, verbose, killAfterMs: (timeoutMs ?? 30_000) + 60_000 });
  const seconds = (Date.now() - started) / 1000;

  const result = newResult(name, { exitCode: run.code, seconds, logFile });
  const checksFile = findChecksFile(scenarioDir, name);
  const checks = checksFile ? readChecks(result, checksFile) : null;
  if (checks) tally(result, checks);

  const runnerError = (msg) => addRunnerError(result, msg);
  if (run.spawnError) runnerError(`could not start the suite: ${run.spawnError.message}`);
  else if (run.killed) runnerError(`suite CLI killed after ${((timeoutMs ?? 30_000) + 60_000) / 1000} s`);
  if (!checks && !run.spawnError) {
    const skippedLine = run.output.split('\n').find((l) => l.startsWith('SKIPPED:'));
    runnerError(
      skippedLine ? `no checks.json (${skippedLine.trim()})` : `no checks.json produced (see ${show(logFile)})`,
    );
  }
  if (!run.spawnError && !run.killed && run.code !== 0 && result.failed === 0) {
    runnerError(`suite CLI exited with ${run.code} (see ${show(logFile)})`);
  }
  result.ok = result.failed === 0 && run.code === 0;
  result.tail = result.ok ? undefined : excerpt(run.output, 4, 10);
  return result;
}

function formatScenario(r) {
  const extra = [];
  if (r.warnings) extra.push(`${r.warnings} warning${r.warnings === 1 ? '' : 's'}`);
  if (r.skipped) extra.push(`${r.skipped} skipped`);
  if (r.info) extra.push(`${r.info} info`);
  const lines = [
    `${r.ok ? '✓' : '✗'} ${r.name}: ${r.passed} passed, ${r.failed} failed${extra.length ? ` (${extra.join(', ')})` : ''}${r.seconds ? ` [${r.seconds.toFixed(1)} s]` : ''}`,
  ];
  for (const f of r.failures) lines.push(`    FAILURE ${f.id}: ${oneLine(f.errorMessage)}`);
  for (const w of r.warningChecks) lines.push(`    WARNING ${w.id}: ${oneLine(w.errorMessage)}`);
  for (const k of r.skippedChecks ?? []) lines.push(`    SKIPPED by the suite ${k.id}: ${oneLine(k.errorMessage)}`);
  if (!r.ok && r.checksFile === null && r.tail?.length) {
    lines.push('    suite output:');
    for (const l of r.tail) lines.push(`      | ${l}`);
  }
  return lines.join('\n');
}

function oneLine(s) {
  const t = String(s ?? '')
    .replace(/\s+/g, ' ')
    .trim();
  return t.length > 600 ? `${t.slice(0, 600)}…` : t;
}

/**
 * Runs the given scenarios one after another against `url`.
 * @param {object} opts
 * @param {string} opts.url                  MCP endpoint, e.g. http://127.0.0.1:3000/mcp
 * @param {string[]} [opts.scenarios]        default: DEFAULT_SCENARIOS (the 9 countable tasks scenarios)
 * @param {string} [opts.out]                results folder; default results/conformance/<timestamp>
 * @param {number} [opts.timeoutMs]          per-scenario timeout passed to the suite (its default: 30000)
 * @param {string|null} [opts.specVersion]   --spec-version for NON-extension scenarios (default 2026-07-28; null = suite default)
 * @param {boolean} [opts.install]           run `npm ci` when tools/conformance is missing/stale (default true)
 * @param {boolean} [opts.verbose]           stream the suite's own output to stderr
 * @param {(line: string) => void} [opts.log] progress/summary lines (default: stderr)
 * @returns {Promise<{ok: boolean, passed: number, failed: number, outDir: string,
 *   scenarios: Array<{name: string, ok: boolean, passed: number, failed: number,
 *   failures: Array<{id: string, errorMessage: string}>, warnings: number,
 *   warningChecks: Array<{id: string, errorMessage: string}>, skipped: number, info: number,
 *   exitCode: number|null, seconds: number, checksFile: string|null, logFile: string, error?: string}>}>}
 */
export async function runConformance({
  url,
  scenarios = DEFAULT_SCENARIOS,
  out,
  timeoutMs,
  specVersion = DEFAULT_SPEC_VERSION,
  install = true,
  verbose = false,
  log = defaultLog,
} = {}) {
  if (!url) throw new Error('runConformance: url is required');
  new URL(url); // throws on a malformed URL
  if (!Array.isArray(scenarios) || scenarios.length === 0) throw new Error('runConformance: no scenarios');
  if (install) ensureInstalled({ log });
  else {
    const problem = installProblem();
    if (problem) throw new Error(`conformance suite not installed: ${problem}`);
  }
  const outDir = path.resolve(
    out ?? path.join(REPO_ROOT, 'results', 'conformance', new Date().toISOString().replace(/[:.]/g, '-')),
  );
  mkdirSync(outDir, { recursive: true });

  const results = [];
  for (const name of scenarios) {
    const r = await runScenario(name, { url, outDir, timeoutMs, specVersion, verbose });
    log(formatScenario(r));
    results.push(r);
  }
  const passed = results.reduce((n, r) => n + r.passed, 0);
  const failed = results.reduce((n, r) => n + r.failed, 0);
  return { ok: results.every((r) => r.ok), passed, failed, outDir, scenarios: results };
}

/** Scenario name of a result folder `server-<scenario>-<ISO timestamp with - for : and .>`. */
function scenarioOfDir(dir) {
  const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(dir);
  return m ? m[1] : undefined;
}

/**
 * Runs the suite once with `--requirements <revision>`: exactly the scenarios that revision's
 * frozen requirement set lists (scored) plus the ones it runs unscored (the Tasks extension,
 * pending), each at its own wire. Stricter than the suite's exit code, which ignores unscored
 * scenarios: every FAILURE of every scenario fails the run, as does a scenario missing from or
 * added to `expected`, an unreadable checks.json, a non-zero exit, or running past `killAfterMs`.
 * @param {object} opts
 * @param {string} opts.url
 * @param {string} [opts.revision]           default REQUIREMENTS_REVISION (2026-07-28)
 * @param {readonly string[]} [opts.expected] default REQUIREMENTS_2026_SCENARIOS (the 50)
 * @param {string} [opts.out]                results folder; default results/conformance/<timestamp>
 * @param {number} [opts.timeoutMs]          per-scenario timeout given to the suite (its default 30000)
 * @param {number} [opts.killAfterMs]        bound on the whole run (default 300000 ms)
 * @param {boolean} [opts.install]           `npm ci` tools/conformance when missing/stale (default true)
 * @param {boolean} [opts.verbose]
 * @param {(line: string) => void} [opts.log]
 * @returns {Promise<{ok: boolean, passed: number, failed: number, outDir: string, seconds: number,
 *   exitCode: number|null, logFile: string, scenarios: ReturnType<typeof newResult>[]}>} scenarios in `expected` order,
 *   then any unexpected ones.
 */
export async function runRequirements({
  url,
  revision = REQUIREMENTS_REVISION,
  expected = REQUIREMENTS_2026_SCENARIOS,
  out,
  timeoutMs,
  killAfterMs = 300_000,
  install = true,
  verbose = false,
  log = defaultLog,
} = {}) {
  if (!url) throw new Error('runRequirements: url is required');
  new URL(url);
  if (install) ensureInstalled({ log });
  else {
    const problem = installProblem();
    if (problem) throw new Error(`conformance suite not installed: ${problem}`);
  }
  const outDir = path.resolve(
    out ?? path.join(REPO_ROOT, 'results', 'conformance', new Date().toISOString().replace(/[:.]/g, '-')),
  );
  mkdirSync(outDir, { recursive: true });
  const args = ['server', '--url', url, '--requirements', revision, '-o', outDir];
  if (timeoutMs) args.push('--timeout', String(timeoutMs));
  const logFile = path.join(outDir, 'cli.log');
  const started = Date.now();
  const run = await runCli(args, { logFile, verbose, killAfterMs });
  const seconds = (Date.now() - started) / 1000;

  const found = new Map();
  for (const d of existsSync(outDir) ? readdirSync(outDir) : []) {
    const name = scenarioOfDir(d);
    const file = path.join(outDir, d, 'checks.json');
    if (!name || !existsSync(file)) continue;
    const r = newResult(name, { exitCode: run.code, logFile });
    const checks = readChecks(r, file);
    if (checks) tally(r, checks);
    else addRunnerError(r, r.error);
    if (found.has(name)) addRunnerError(r, 'the suite ran this scenario twice');
    found.set(name, r);
  }
  const scenarios = [];
  for (const name of expected) {
    const r = found.get(name) ?? newResult(name, { exitCode: run.code, logFile });
    if (!found.has(name)) addRunnerError(r, `no checks.json: the suite did not run ${name}`);
    found.delete(name);
    scenarios.push(r);
  }
  for (const r of found.values()) {
    addRunnerError(
      r,
      `not in the expected set for ${revision}: review the suite version (tools/conformance) and scripts/conformance.mjs`,
    );
    scenarios.push(r);
  }
  for (const r of scenarios) r.ok = r.failed === 0;
  const overall = newResult(`(run of --requirements ${revision})`, { exitCode: run.code, logFile });
  if (run.spawnError) addRunnerError(overall, `could not start the suite: ${run.spawnError.message}`);
  else if (run.killed) addRunnerError(overall, `suite CLI killed after ${killAfterMs / 1000} s`);
  else if (run.code !== 0)
    addRunnerError(overall, `suite CLI exited with ${run.code} (a scored scenario failed; see ${show(logFile)})`);
  if (overall.failed) {
    overall.tail = excerpt(run.output, 4, 10);
    scenarios.push(overall);
  }
  for (const r of scenarios) log(formatScenario(r));
  const passed = scenarios.reduce((n, r) => n + r.passed, 0);
  const failed = scenarios.reduce((n, r) => n + r.failed, 0);
  log(
    `conformance --requirements ${revision}: ${scenarios.filter((r) => r !== overall).length} scenarios, ${passed} checks passed, ${failed} failed in ${seconds.toFixed(1)} s`,
  );
  return { ok: failed === 0, passed, failed, outDir, seconds, exitCode: run.code, logFile, scenarios };
}

// ---------------------------------------------------------------------------------------------
// CLI

const USAGE = `usage: node scripts/conformance.mjs --url URL [--requirements ${REQUIREMENTS_REVISION}] [--out DIR] [--timeout MS] [--verbose]
       node scripts/conformance.mjs --url URL [--scenario NAME ...] [--all-tasks] [--out DIR]
                                     [--timeout MS] [--spec-version REV|suite] [--verbose]

  --url URL           MCP endpoint of the running server (required), e.g. http://127.0.0.1:3000/mcp
  --requirements REV  run the whole suite once for revision REV (only ${REQUIREMENTS_REVISION}): its
                      ${SCORED_2026_SCENARIOS.length} scored scenarios plus the ${REQUIREMENTS_2026_SCENARIOS.length - SCORED_2026_SCENARIOS.length} it runs unscored (tasks-*,
                      pending), ${REQUIREMENTS_2026_SCENARIOS.length} in all; every FAILURE fails, scored or not.
                      Writes DIR/server-<scenario>-<ts>/checks.json and DIR/cli.log
  --scenario NAME     scenario to run; repeatable. Default: the 9 countable tasks scenarios
                      (${DEFAULT_SCENARIOS.join(', ')})
  --all-tasks         also run tasks-status-notifications (the suite always SKIPs it)
  --out DIR           results folder (default results/conformance/<timestamp>); each scenario
                      writes DIR/<scenario>/server-<scenario>-<ts>/checks.json and DIR/<scenario>/cli.log
  --timeout MS        per-scenario timeout given to the suite (suite default 30000)
  --spec-version REV  wire revision for non-extension scenarios such as tools-call-with-progress
                      (default ${DEFAULT_SPEC_VERSION}; "suite" = the suite's own default, 2025-11-25 for
                      2025-era scenarios). Never passed to tasks-* (the suite would skip them).
  --verbose           stream the suite's own output
  -h, --help          print this help and exit
  -v, --version       print the version and exit

Exit 1 if any check FAILED, a scenario produced no checks.json, or the suite exited non-zero.`;

async function main(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        url: { type: 'string' },
        requirements: { type: 'string' },
        scenario: { type: 'string', multiple: true },
        'all-tasks': { type: 'boolean', default: false },
        out: { type: 'string' },
        timeout: { type: 'string' },
        'spec-version': { type: 'string' },
        verbose: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', short: 'v', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    console.error(`${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.version) {
    console.log(`mcp-task-service conformance ${repoVersion()}`);
    return 0;
  }
  if (!values.url) {
    console.error(`--url is required\n\n${USAGE}`);
    return 2;
  }
  try {
    new URL(values.url);
  } catch {
    console.error(`invalid --url: ${values.url}`);
    return 2;
  }
  let timeoutMs;
  if (values.timeout !== undefined) {
    timeoutMs = Number(values.timeout);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
      console.error(`invalid --timeout: ${values.timeout}`);
      return 2;
    }
  }
  if (values.requirements !== undefined) {
    if (values.requirements !== REQUIREMENTS_REVISION) {
      console.error(`--requirements: only ${REQUIREMENTS_REVISION} is known to this runner`);
      return 2;
    }
    if (values.scenario?.length || values['all-tasks'] || values['spec-version'] !== undefined) {
      console.error('--requirements runs a fixed set: it takes no --scenario, --all-tasks or --spec-version');
      return 2;
    }
    let r;
    try {
      r = await runRequirements({
        url: values.url,
        revision: values.requirements,
        out: values.out,
        timeoutMs,
        verbose: values.verbose,
        log: (line) => console.log(line),
      });
    } catch (err) {
      console.error(`conformance: ${err.message}`);
      console.log('conformance: 0 passed, 1 failed');
      return 1;
    }
    console.log(`results: ${show(r.outDir)}`);
    console.log(`conformance: ${r.passed} passed, ${r.failed} failed`);
    return r.ok ? 0 : 1;
  }
  const scenarios = [...(values.scenario?.length ? values.scenario : DEFAULT_SCENARIOS)];
  if (values['all-tasks']) for (const s of SKIPPED_TASKS_SCENARIOS) if (!scenarios.includes(s)) scenarios.push(s);
  const sv = values['spec-version'];
  const specVersion = sv === undefined ? DEFAULT_SPEC_VERSION : sv === 'suite' ? null : sv;

  let result;
  try {
    result = await runConformance({
      url: values.url,
      scenarios,
      out: values.out,
      timeoutMs,
      specVersion,
      verbose: values.verbose,
      log: (line) => console.log(line),
    });
  } catch (err) {
    console.error(`conformance: ${err.message}`);
    console.log('conformance: 0 passed, 1 failed');
    return 1;
  }
  console.log(`results: ${show(result.outDir)}`);
  console.log(`conformance: ${result.passed} passed, ${result.failed} failed`);
  return result.ok ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
