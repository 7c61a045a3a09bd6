// @needs redis
/**
 * API keys reloaded without a restart (AUTH_API_KEYS_FILE): a real gateway, its keys file
 * mounted the way Kubernetes mounts a Secret (the file is a symlink through `..data`, swapped
 * atomically for each update). Asserted: a person added to the file gets in, a person removed
 * is refused, each within AUTH_API_KEYS_RELOAD_MS (1 s here) plus the time to notice; a bad
 * file keeps the keys in use and logs `auth.keys_reload_failed` (never the key); the
 * AUTH_API_KEYS keys stay whatever the file says; a bad file at start stops the gateway with
 * one line naming AUTH_API_KEYS_FILE.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { appEntry, ROOT, SHARED_REDIS_URL, startCluster, testEnv, waitFor, type Cluster } from '../support/cluster.js';
import { rpc } from '../support/mcp.js';

const RELOAD_MS = 1000;
const key = () => randomBytes(32).toString('hex');

/** A Secret-like volume: `<dir>/keys` → `..data/keys`, `..data` → a versioned directory. */
function secretVolume() {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-keys-'));
  let version = 0;
  const write = (text: string) => {
    const v = `..v${++version}`;
    mkdirSync(join(dir, v));
    writeFileSync(join(dir, v, 'keys'), text);
    symlinkSync(v, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  return {
    dir,
    path: join(dir, 'keys'),
    init(text: string) {
      write(text);
      symlinkSync(join('..data', 'keys'), join(dir, 'keys'));
    },
    write,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

describe('AUTH_API_KEYS_FILE: people added and revoked without a restart', () => {
  let c: Cluster;
  const vol = secretVolume();
  const keys = { alice: key(), bob: key(), ci: key() };
  const status = async (token: string) => (await rpc(c.urls[0]!, 'tools/list', {}, { token })).status;

  before(async () => {
    vol.init(`# the team\nalice:${keys.alice}\n`);
    c = await startCluster({
      gateways: 1,
      workers: 0,
      env: {
        AUTH_API_KEYS: `ci:${keys.ci}`,
        AUTH_API_KEYS_FILE: vol.path,
        AUTH_API_KEYS_RELOAD_MS: String(RELOAD_MS),
      },
    });
  });
  after(async () => {
    await c?.stop();
    vol.remove();
  });

  it('a key added to the file works, a removed one is refused, each within the reload interval; AUTH_API_KEYS stay', async () => {
    assert.equal(await status(keys.alice), 200);
    assert.equal(await status(keys.bob), 401);
    assert.equal(await status(keys.ci), 200);

    let t0 = Date.now();
    vol.write(`alice:${keys.alice}\nbob:${keys.bob}\n`);
    await waitFor(async () => (await status(keys.bob)) === 200, RELOAD_MS + 4000, 100, 'bob admitted');
    const addedMs = Date.now() - t0;

    t0 = Date.now();
    vol.write(`bob:${keys.bob}\n`);
    await waitFor(async () => (await status(keys.alice)) === 401, RELOAD_MS + 4000, 100, 'alice revoked');
    const revokedMs = Date.now() - t0;
    assert.equal(await status(keys.ci), 200, 'AUTH_API_KEYS keys are not in the file and stay');
    console.log(
      `# measured: added after ${addedMs} ms, revoked after ${revokedMs} ms (AUTH_API_KEYS_RELOAD_MS ${RELOAD_MS})`,
    );
  });

  it('a bad file keeps the keys in use and logs why, without the key', async () => {
    const secret = key();
    vol.write(`bob:${keys.bob}\nno-colon-${secret}\n`);
    const gw = c.gateways[0]!;
    const line = await waitFor(
      () => gw.logs.find((l) => String(l.msg).startsWith('auth.keys_reload_failed')),
      RELOAD_MS + 4000,
      100,
      'auth.keys_reload_failed',
    );
    assert.match(String(line.reason), /AUTH_API_KEYS_FILE: entry 2/);
    assert.ok(!JSON.stringify(gw.logs).includes(secret), 'no key in the logs');
    assert.equal(await status(keys.bob), 200, 'the previous keys are still in use');
    assert.equal(await status(keys.alice), 401);
  });

  it('a bad file at start stops the gateway with one line naming AUTH_API_KEYS_FILE', () => {
    const bad = secretVolume();
    bad.init('alice:short\n');
    try {
      const r = spawnSync(process.execPath, [appEntry('gateway')], {
        cwd: ROOT,
        env: { ...process.env, ...testEnv('test-keys-file', SHARED_REDIS_URL), AUTH_API_KEYS_FILE: bad.path },
        encoding: 'utf8',
        timeout: 20_000,
      });
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(
        r.stderr,
        /^gateway: invalid configuration: AUTH_API_KEYS_FILE: entry 1 \(principal "alice"\): key shorter than 16/,
      );
      assert.equal(r.stderr.trim().split('\n').length, 1);
    } finally {
      bad.remove();
    }
  });
});
