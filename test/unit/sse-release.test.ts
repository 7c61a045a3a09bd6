/**
 * Case N-13 (memory stays flat under mixed requests): every exchange the gateway hands to the
 * SDK (`serveThrough`, apps/gateway/src/sse.ts) must be collectable once it is answered. Node
 * keeps a composite signal (`AbortSignal.any`) that has an 'abort' listener alive until it
 * aborts, with everything the listener reaches; `serveThrough` listened on one per exchange
 * and never removed the listener, so every answered request and response stayed in memory
 * (about 8 KB per `tools/list` in `npm run bench`'s N-13 figure: 170 MB over 45,000 requests).
 *
 * Real HTTP exchanges on loopback, each answered with a JSON body and given an `end` signal as
 * the route gives one; the test holds only WeakRefs to their responses, forces a GC and counts
 * how many are still alive.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { serveThrough, type FetchHandler } from '../../apps/gateway/src/sse.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const handler: FetchHandler = {
  fetch: () => Promise.resolve(Response.json({ jsonrpc: '2.0', id: 1, result: { tools: [] } })),
};

/** One POST on loopback; resolves with the body once the response ended. */
function post(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { port, method: 'POST', path: '/mcp', headers: { 'content-type': 'application/json' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    req.end('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
  });
}

describe('serveThrough lets go of every answered exchange (case N-13)', () => {
  it('keeps no response alive after 100 answers with an end signal', async () => {
    const alive: WeakRef<ServerResponse>[] = [];
    // The end signals stay referenced, as the gateway's would while it runs.
    const ends: AbortController[] = [];
    const server = createServer((req, res) => {
      alive.push(new WeakRef(res));
      const end = new AbortController();
      ends.push(end);
      const body: unknown = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
      void serveThrough(
        handler,
        req,
        res,
        body,
        { token: '', clientId: 'p', scopes: [] },
        {
          maxRequestBodySize: 1 << 20,
          onerror: () => undefined,
          end: end.signal,
        },
      );
    });
    server.keepAliveTimeout = 1;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      for (let i = 0; i < 100; i++) assert.match(await post(port), /"tools":\[\]/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    // Finalization needs a few turns of the event loop between collections.
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const left = alive.filter((r) => r.deref() !== undefined).length;
    assert.equal(alive.length, 100);
    assert.ok(left <= 2, `${left} of 100 answered responses are still in memory`);
    assert.equal(ends.length, 100);
  });
});
