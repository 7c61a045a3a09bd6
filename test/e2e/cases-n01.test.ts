// @needs redis
/**
 * Cases N-01 and B-14 (another principal acting on a task), and N-04 (a token never leaks;
 * another audience is refused), with real authentication: API keys and JWTs from a loopback
 * issuer (JWKS served by the test), two gateways, two workers.
 *
 * Principals: `key:alice`, `key:bob` (API keys), `jwt:<issuer>#alice`, `jwt:<issuer>#bob`
 * (JWTs). `key:alice` and `jwt:<issuer>#alice` are different principals.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { newTaskId } from '@mcp-tasks/task-store';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, rpc, updateTask, type RpcResponse } from '../support/mcp.js';
import { accessToken, signingKey, startJwksServer, type JwksServer, type SigningKey } from '../support/oauth.js';

const PUBLIC_URL = 'https://mcp.test.example/mcp';
const KEY_ALICE = 'alice-key-0123456789abcdef';
const KEY_BOB = 'bob-key-0123456789abcdef00';

describe('cases N-01, B-14, N-04: tasks are bound to their principal; credentials never leak', () => {
  let c: Cluster;
  let jwks: JwksServer;
  let key: SigningKey;
  const tokens: Record<string, string> = {};

  before(async () => {
    key = await signingKey('k1');
    jwks = await startJwksServer([key]);
    const sha = createHash('sha256').update(KEY_BOB).digest('hex');
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: {
        AUTH_API_KEYS: `alice:${KEY_ALICE},bob:sha256:${sha}`,
        AUTH_JWT_ISSUER: jwks.origin,
        AUTH_JWT_JWKS_URL: jwks.jwksUrl,
        PUBLIC_URL,
        LOG_LEVEL: 'debug',
      },
    });
    tokens.keyAlice = KEY_ALICE;
    tokens.keyBob = KEY_BOB;
    tokens.jwtAlice = await accessToken({ key, issuer: jwks.origin, audience: PUBLIC_URL, subject: 'alice' });
    tokens.jwtBob = await accessToken({ key, issuer: jwks.origin, audience: PUBLIC_URL, subject: 'bob' });
  });
  after(async () => {
    await c?.stop();
    await jwks?.close();
  });

  /** The body of a response with every occurrence of `id` replaced (to compare two ids' answers). */
  const bodyWithout = (r: RpcResponse, id: string) => JSON.stringify(r.body).split(id).join('<id>');

  const pairs: [string, string, string][] = [
    ['API keys', 'keyAlice', 'keyBob'],
    ['JWTs', 'jwtAlice', 'jwtBob'],
    ['an API key and a JWT with the same name', 'keyAlice', 'jwtAlice'],
  ];
  for (const [label, a, b] of pairs) {
    it(`N-01 (${label}): every answer to B for A's tasks is the answer for an unknown id; A's tasks, jobs and streams are untouched; the owner still acts`, async () => {
      const [g1, g2] = c.urls as [string, string];
      const A = { token: tokens[a]! };
      const B = { token: tokens[b]! };
      const running = (await callTool(g1, 'slow_echo', { seconds: 30, quiet: true }, A)).body.result!.taskId as string;
      const parkedId = (await callTool(g1, 'ask_confirm', {}, A)).body.result!.taskId as string;
      const parked = await pollTask(
        () => g1,
        parkedId,
        (t) => t.status === 'input_required',
        15_000,
        50,
        A,
      );
      assert.ok(running && parkedId);
      await pollTask(
        () => g1,
        running,
        () => true,
        5000,
        50,
        A,
      );
      const key = Object.keys(parked.inputRequests)[0]!;
      const taskKey = (id: string) => `${c.prefix}:{t:${id}}:task`;
      const before = {
        running: await c.redis.hgetall(taskKey(running)),
        parked: await c.redis.hgetall(taskKey(parkedId)),
      };

      const unknown = randomUUID();
      const requests: [string, (id: string) => Promise<RpcResponse>][] = [
        ['tasks/get', (id) => getTask(g2, id, { ...B, id: 'same' })],
        [
          'tasks/update',
          (id) => updateTask(g2, id, { [key]: { action: 'accept', content: { confirm: true } } }, { ...B, id: 'same' }),
        ],
        ['tasks/cancel', (id) => cancelTask(g2, id, { ...B, id: 'same' })],
        ['task_status', (id) => callTool(g2, 'task_status', { taskId: id }, { ...B, id: 'same' })],
      ];
      for (const [what, send] of requests) {
        for (const victim of [running, parkedId]) {
          const theirs = await send(victim);
          const none = await send(unknown);
          assert.equal(theirs.status, none.status, `${what}: same status`);
          assert.equal(
            bodyWithout(theirs, victim),
            bodyWithout(none, unknown),
            `${what}: byte-for-byte the unknown id's answer`,
          );
          if (what !== 'task_status')
            assert.equal(theirs.body.error?.code, -32602, `${what}: ${JSON.stringify(theirs.body)}`);
          else assert.equal(theirs.body.result?.isError, true);
        }
      }
      // B's listen stream acknowledges none of A's ids.
      const ac = new AbortController();
      const listen = fetch(g2, {
        method: 'POST',
        signal: ac.signal,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'subscriptions/listen',
          authorization: `Bearer ${B.token}`,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'l1',
          method: 'subscriptions/listen',
          params: {
            notifications: { taskIds: [running, parkedId] },
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
            },
          },
        }),
      });
      const res = await listen;
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('acknowledged')) text += new TextDecoder().decode((await reader.read()).value);
      ac.abort();
      const ack = JSON.parse(
        text
          .split('\n')
          .find((l) => l.startsWith('data:') && l.includes('acknowledged'))!
          .slice(5),
      );
      assert.deepEqual(ack.params.notifications.taskIds, []);

      // A's records are untouched: the running one still runs (its job too), the parked one waits.
      const after = {
        running: await c.redis.hgetall(taskKey(running)),
        parked: await c.redis.hgetall(taskKey(parkedId)),
      };
      assert.deepEqual(after.parked, before.parked, 'the parked task is byte-for-byte unchanged');
      assert.equal(after.running.status, 'working');
      assert.equal(after.running.cancelRequested, before.running.cancelRequested);
      assert.equal(after.running.fence, before.running.fence);
      // A still acts on its own tasks, through the other gateway.
      assert.equal(
        (await updateTask(g2, parkedId, { [key]: { action: 'accept', content: { confirm: true } } }, A)).body.result
          ?.resultType,
        'complete',
      );
      assert.equal(
        (
          await pollTask(
            () => g1,
            parkedId,
            (t) => t.status === 'completed',
            15_000,
            50,
            A,
          )
        ).result.content[0].text,
        'confirmed: true',
      );
      assert.equal((await cancelTask(g2, running, A)).body.result?.resultType, 'complete');
      assert.equal(
        (
          await pollTask(
            () => g1,
            running,
            (t) => t.status !== 'working',
            15_000,
            50,
            A,
          )
        ).status,
        'cancelled',
      );
    });
  }

  it('Case B-14: no credentials → 401 + WWW-Authenticate naming the metadata document; a bad token → 401 invalid_token; tasks/list → 404 -32601; 10,000 task ids are unique UUIDv4 (122 random bits)', async () => {
    const g = c.urls[0]!;
    const none = await getTask(g, randomUUID());
    assert.equal(none.status, 401);
    assert.equal(
      none.headers.get('www-authenticate'),
      'Bearer resource_metadata="https://mcp.test.example/.well-known/oauth-protected-resource/mcp"',
    );
    const bad = await getTask(g, randomUUID(), { token: 'not-a-key-of-anyone-here' });
    assert.equal(bad.status, 401);
    assert.match(bad.headers.get('www-authenticate')!, /error="invalid_token"/);
    // The probe is the exception: server/discover with a wrong token is answered as one without
    // credentials (200, the same result), so a client asks for new credentials on the request
    // that needs them instead of reporting the server unreachable; tools/list with it is 401.
    const discoverNone = await rpc(g, 'server/discover', {});
    const discoverBad = await rpc(g, 'server/discover', {}, { token: 'not-a-key-of-anyone-here' });
    assert.equal(discoverNone.status, 200);
    assert.equal(discoverBad.status, 200);
    assert.deepEqual(discoverBad.body.result, discoverNone.body.result);
    const listBad = await rpc(g, 'tools/list', {}, { token: 'not-a-key-of-anyone-here' });
    assert.equal(listBad.status, 401);
    const list = await rpc(g, 'tasks/list', {}, { token: tokens.keyAlice! });
    assert.equal(list.status, 404);
    assert.equal(list.body.error?.code, -32601);
    const ids = new Set(Array.from({ length: 10_000 }, () => newTaskId()));
    assert.equal(ids.size, 10_000);
    for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('N-04: a JWT for another audience, without sub, or from another issuer → 401 invalid_token; after a valid run no token appears in Redis (record, job keys, progress stream) or in the debug logs; the job carries the principal, not a credential', async () => {
    const g = c.urls[1]!;
    const otherIssuer = await signingKey('other');
    const refused = [
      await accessToken({ key, issuer: jwks.origin, audience: 'https://another-service.example/', subject: 'alice' }),
      await accessToken({ key, issuer: jwks.origin, audience: PUBLIC_URL, subject: null }),
      await accessToken({
        key: otherIssuer,
        issuer: 'https://issuer.other.example',
        audience: PUBLIC_URL,
        subject: 'alice',
      }),
    ];
    for (const t of refused) {
      const r = await rpc(g, 'tools/list', {}, { token: t });
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.match(r.headers.get('www-authenticate')!, /error="invalid_token"/);
    }
    // A synchronous call (its progress goes through the per-task stream) and a task, with each credential kind.
    const sync = await callTool(
      g,
      'slow_echo',
      { seconds: 2 },
      { token: tokens.jwtAlice!, tasks: false, meta: { progressToken: 'p' } },
    );
    assert.equal(sync.body.result?.content?.[0]?.text, 'echo: ');
    const task = (await callTool(g, 'slow_echo', { seconds: 0 }, { token: tokens.keyBob! })).body.result!
      .taskId as string;
    await pollTask(
      () => g,
      task,
      (t) => t.status === 'completed',
      15_000,
      50,
      { token: tokens.keyBob! },
    );

    const secrets = [tokens.jwtAlice!, tokens.keyBob!, tokens.keyAlice!, ...refused];
    const found: string[] = [];
    for (const k of await c.keys()) {
      const type = await c.redis.type(k);
      const dump =
        type === 'hash'
          ? JSON.stringify(await c.redis.hgetall(k))
          : type === 'string'
            ? String(await c.redis.get(k))
            : type === 'list'
              ? JSON.stringify(await c.redis.lrange(k, 0, -1))
              : type === 'zset'
                ? JSON.stringify(await c.redis.zrange(k, '0', '-1'))
                : type === 'stream'
                  ? JSON.stringify(await c.redis.xrange(k, '-', '+'))
                  : type === 'set'
                    ? JSON.stringify(await c.redis.smembers(k))
                    : '';
      if (secrets.some((s) => dump.includes(s) || k.includes(s))) found.push(k);
    }
    assert.deepEqual(found, [], 'no Redis key holds a credential');
    const job = await c.redis.hgetall(`${c.prefix}:{jobs}:tools:t.${task}.1`);
    assert.ok(job.data, 'the job exists');
    assert.doesNotMatch(JSON.stringify(job), /Bearer|key-0123/);
    const rec = await c.redis.hgetall(`${c.prefix}:{t:${task}}:task`);
    assert.equal(rec.owner, 'key:bob');
    const logs = [...c.gateways, ...c.workers].flatMap((p) => p.logs.map((l) => JSON.stringify(l)));
    assert.ok(
      logs.some((l) => l.includes('"level":20')),
      'debug lines were written',
    );
    const leaked = logs.filter((l) => secrets.some((s) => l.includes(s)));
    assert.deepEqual(leaked, [], 'no log line holds a credential');
  });
});
