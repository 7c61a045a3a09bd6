/**
 * The Host rule of `/mcp` (apps/gateway/src/request-guards.ts): a missing or malformed Host is
 * 400, one outside ALLOWED_HOSTS 403, and the verdict remembered for an accepted Host never
 * lets another value through: every refused value is refused again, however often an accepted
 * one came before. And its Content-Encoding rule: a POST body in a coding other than identity
 * is 415 with `Accept-Encoding: identity`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '@mcp-tasks/config';
import { requestGuards } from '../../apps/gateway/src/request-guards.js';

/**
 * Runs the hook on a POST with `host` and the `extra` headers; the status it answered, or
 * 'passed'. Headers the hook set on the reply go into `answered`.
 */
async function run(
  hook: ReturnType<typeof requestGuards>,
  host: string | undefined,
  extra: Record<string, string> = {},
  answered: Record<string, string> = {},
): Promise<number | 'passed'> {
  let status: number | undefined;
  const reply = {
    code(s: number) {
      status = s;
      return reply;
    },
    header(name: string, value: string) {
      answered[name] = value;
      return reply;
    },
    send: () => reply,
  };
  const headers: Record<string, string> = { 'content-type': 'application/json', ...extra };
  if (host !== undefined) headers.host = host;
  const req = { method: 'POST', headers, raw: { headers } };
  await hook(req as unknown as FastifyRequest, reply as unknown as FastifyReply);
  return status ?? 'passed';
}

const config = (allowedHosts: string[] | undefined) => ({ allowedOrigins: [], allowedHosts }) as unknown as Config;

describe('request guards: Host', () => {
  it('with ALLOWED_HOSTS: accepted hosts pass every time, others are refused every time', async () => {
    const hook = requestGuards(config(['localhost', '[::1]']));
    for (let i = 0; i < 3; i++) {
      assert.equal(await run(hook, 'localhost:3000'), 'passed');
      assert.equal(await run(hook, '[::1]:8080'), 'passed');
      assert.equal(await run(hook, 'evil.example.com'), 403);
      assert.equal(await run(hook, 'localhost.evil.example.com:3000'), 403);
      assert.equal(await run(hook, undefined), 400);
      assert.equal(await run(hook, ''), 400);
      assert.equal(await run(hook, 'local host'), 400);
      assert.equal(await run(hook, 'localhost/x'), 400);
    }
  });

  it('without ALLOWED_HOSTS: any well-formed host passes, a malformed one is refused every time', async () => {
    const hook = requestGuards(config(undefined));
    for (let i = 0; i < 3; i++) {
      assert.equal(await run(hook, 'api.example.com'), 'passed');
      assert.equal(await run(hook, 'user@api.example.com'), 400);
      assert.equal(await run(hook, 'x'.repeat(300)), 400);
    }
  });
});

describe('request guards: Content-Encoding', () => {
  it('a POST body in any coding but identity is 415 with Accept-Encoding: identity; identity, an empty value or none passes', async () => {
    const hook = requestGuards(config(undefined));
    for (const coding of ['gzip', 'deflate', 'br', 'zstd', 'gzip, identity', 'x-unknown']) {
      const answered: Record<string, string> = {};
      assert.equal(await run(hook, 'localhost:3000', { 'content-encoding': coding }, answered), 415, coding);
      assert.equal(answered['accept-encoding'], 'identity', coding);
    }
    for (const coding of ['identity', 'Identity', ' identity ', '']) {
      assert.equal(await run(hook, 'localhost:3000', { 'content-encoding': coding }), 'passed', coding);
    }
    assert.equal(await run(hook, 'localhost:3000'), 'passed');
  });
});
