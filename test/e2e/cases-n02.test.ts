// @needs redis
/**
 * Cases N-02 and B-17: a continuation (`requestState`) replayed elsewhere. `confirm_once` (testing
 * tool set, run in the gateway) asks for confirmation and then runs a guarded step that appends
 * one line to a file per run, so every assertion "no side effect" counts real runs.
 *
 * Principals: `key:alice` and `key:bob`. Signing keys: `REQUEST_STATE_KEYS` (k1), rotated on
 * gateways started later with other rings.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, type RpcResponse } from '../support/mcp.js';

const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdef00';
const K1 = 'k1:first-secret-0123456789abcdefghijklmn';
const K2 = 'k2:second-secret-0123456789abcdefghijklm';

describe('cases N-02, B-17: continuations are bound, single use, rotated with their keys', () => {
  let c: Cluster;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-n02-'));
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB}`, REQUEST_STATE_KEYS: K1, TESTING_SIDE_EFFECT_DIR: dir },
    });
  });
  after(async () => {
    await c?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const runs = (marker: string) =>
    existsSync(join(dir, `${marker}.runs`))
      ? readFileSync(join(dir, `${marker}.runs`), 'utf8')
          .trim()
          .split('\n').length
      : 0;
  const ask = async (url: string, marker: string, token = ALICE) => {
    const r = await callTool(url, 'confirm_once', { marker }, { tasks: false, token });
    assert.equal(r.body.result?.resultType, 'input_required', JSON.stringify(r.body));
    return r.body.result!.requestState as string;
  };
  const retry = (
    url: string,
    marker: string,
    requestState: string,
    o: { token?: string; answer?: boolean; tool?: string } = {},
  ) =>
    callTool(
      url,
      o.tool ?? 'confirm_once',
      o.tool === 'share_report' ? { channel: '#x' } : { marker },
      { tasks: false, token: o.token ?? ALICE },
      {
        requestState,
        ...(o.answer === false
          ? {}
          : { inputResponses: { confirm: { action: 'accept', content: { ok: true, notify: true } } } }),
      },
    );
  const refused = (r: RpcResponse, what: string) => {
    assert.equal(r.body.error?.code, -32602, `${what}: ${JSON.stringify(r.body)}`);
  };

  it('N-02: replays as another principal, on another tool, with other arguments, tampered, after completion, after a re-ask → -32602, and the step never runs twice', async () => {
    const [g1, g2] = c.urls as [string, string];
    const s = await ask(g1, 'm1');
    refused(await retry(g2, 'm1', s, { token: BOB }), 'as principal B');
    refused(await retry(g2, 'm1', s, { tool: 'share_report' }), 'on another tool');
    refused(await retry(g2, 'm2', s), 'with other arguments');
    const flipped = s.slice(0, 40) + (s[40] === 'A' ? 'B' : 'A') + s.slice(41);
    refused(await retry(g2, 'm1', flipped), 'one byte flipped');
    assert.equal(runs('m1') + runs('m2'), 0, 'no refused replay ran the step');
    // A retry without the answer re-asks with a new state and spends the old one.
    const again = await retry(g2, 'm1', s, { answer: false });
    assert.equal(again.body.result?.resultType, 'input_required', JSON.stringify(again.body));
    const s2 = again.body.result!.requestState as string;
    refused(await retry(g1, 'm1', s), 'the state a re-ask superseded');
    // The newer state works once, on another gateway (the keys are shared, case B-17a).
    const done = await retry(g1, 'm1', s2);
    assert.equal(done.body.result?.content?.[0]?.text, 'ran: m1', JSON.stringify(done.body));
    refused(await retry(g2, 'm1', s2), 'after the flow completed');
    assert.equal(runs('m1'), 1, 'the guarded step ran exactly once');
    // The payload is signed, not encrypted: it names no principal and holds no key.
    const payload = Buffer.from(s2.split('.')[1]!, 'base64url').toString('utf8');
    for (const secret of ['alice', ALICE, K1.split(':')[1]!])
      assert.ok(!payload.includes(secret), `the payload holds ${secret}: ${payload}`);
  });

  it('Case B-17(h): the valid retry sent twice at once to two gateways runs the step at most once; the other copy is refused', async () => {
    const [g1, g2] = c.urls as [string, string];
    const s = await ask(g1, 'h1');
    const [a, b] = await Promise.all([retry(g1, 'h1', s), retry(g2, 'h1', s)]);
    const ok = [a, b].filter((r) => r.body.result?.content?.[0]?.text === 'ran: h1');
    const no = [a, b].filter((r) => r.body.error?.code === -32602);
    assert.equal(ok.length, 1, JSON.stringify([a.body, b.body]));
    assert.equal(no.length, 1);
    assert.equal(runs('h1'), 1);
  });

  it('cases N-02, B-17(f): a state signed with a key still in the ring is accepted after rotation; once the key is removed it is refused', async () => {
    const s = await ask(c.urls[0]!, 'r1');
    const rotated = await c.addGateway({ REQUEST_STATE_KEYS: `${K2},${K1}` });
    const ok = await retry(rotated.url!, 'r1', s);
    assert.equal(ok.body.result?.content?.[0]?.text, 'ran: r1', JSON.stringify(ok.body));
    // A state the rotated gateway signs (with k2) is accepted by another rotated gateway.
    const s2 = await ask(rotated.url!, 'r2');
    assert.equal(JSON.parse(Buffer.from(s2.split('.')[0]!, 'base64url').toString()).kid, 'k2');
    const s3 = await ask(c.urls[1]!, 'r3'); // signed with k1
    const dropped = await c.addGateway({ REQUEST_STATE_KEYS: K2 });
    assert.equal((await retry(dropped.url!, 'r2', s2)).body.result?.content?.[0]?.text, 'ran: r2');
    refused(await retry(dropped.url!, 'r3', s3), 'signed with a key no longer in the ring');
    assert.equal(runs('r3'), 0);
  });

  it('Case B-17(d): a state past REQUEST_STATE_TTL_S is refused', async () => {
    const short = await c.addGateway({ REQUEST_STATE_TTL_S: '1' });
    const s = await ask(short.url!, 'd1');
    await new Promise((r) => setTimeout(r, 2200));
    refused(await retry(short.url!, 'd1', s), 'expired');
    assert.equal(runs('d1'), 0);
  });
});
