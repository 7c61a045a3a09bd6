/**
 * The gateway's answers to requests Node refuses before Fastify sees them
 * (apps/gateway/src/client-errors.ts), on a real Node HTTP server on loopback with the gateway's
 * timeout options scaled down: BODY_READ_TIMEOUT_MS 500 ms, checked every 100 ms.
 *
 * Case B-16 under load: Node starts a request's read clock when it accepts the connection, so a
 * pooled connection a client opened ahead of need and used only later was answered 408 after
 * BODY_READ_TIMEOUT_MS, and the request the client sent on it at that moment took the 408 for
 * its answer (every call to one replica failed). A connection that has sent nothing is idle:
 * it is never answered 408, and is closed silently once it has stayed silent for the idle limit.
 * A request that has begun is still cut with 408 when it is slow.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { clientErrorHandler } from '../../apps/gateway/src/client-errors.js';

const BODY_READ_TIMEOUT_MS = 500;
const IDLE_MS = 6000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A raw connection that records what it receives and when it closes. */
function open(port: number): { socket: Socket; received: () => string; closed: Promise<void> } {
  const socket = connect(port, '127.0.0.1');
  let out = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (out += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  return { socket, received: () => out, closed };
}

/** Resolves once `c` has received something matching `re`, or has closed. */
async function until(c: ReturnType<typeof open>, re: RegExp): Promise<void> {
  while (!re.test(c.received()) && !c.socket.destroyed) await sleep(20);
}

const REQUEST =
  'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

describe('client errors: a silent connection is idle, a slow request is cut', () => {
  let server: Server;
  let port: number;
  before(async () => {
    server = createServer(
      { requestTimeout: BODY_READ_TIMEOUT_MS, headersTimeout: BODY_READ_TIMEOUT_MS, connectionsCheckingInterval: 100 },
      (req, res) => {
        req.resume();
        req.on('end', () => res.end('{"ok":true}'));
      },
    );
    server.keepAliveTimeout = IDLE_MS;
    server.on('clientError', clientErrorHandler(BODY_READ_TIMEOUT_MS, IDLE_MS));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('a connection silent for longer than BODY_READ_TIMEOUT_MS gets no 408; a request sent on it then is answered', async () => {
    const c = open(port);
    // Four read deadlines pass while it says nothing (Node's check runs every 100 ms).
    await sleep(4 * BODY_READ_TIMEOUT_MS);
    assert.equal(c.received(), '', 'nothing was written to a connection that sent nothing');
    assert.equal(c.socket.destroyed, false, 'still open');
    c.socket.write(REQUEST);
    await until(c, /\{"ok":true\}$/);
    assert.match(c.received(), /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(c.received(), /\{"ok":true\}$/);
    c.socket.destroy();
  });

  it('a connection that never sends a byte is closed without an answer once the idle limit has passed', async () => {
    const c = open(port);
    await c.closed;
    assert.equal(c.received(), '', 'closed without a 408 (or any byte)');
  });

  it('a request that has begun and does not arrive whole within BODY_READ_TIMEOUT_MS is still cut with the JSON-RPC 408', async () => {
    const c = open(port);
    await sleep(2 * BODY_READ_TIMEOUT_MS); // silent first: its clock starts at its first byte
    c.socket.write(REQUEST.slice(0, -1)); // the last body byte never comes
    await c.closed;
    assert.match(c.received(), /^HTTP\/1\.1 408 Request Timeout\r\n/);
    assert.match(c.received(), /"code":-32600/);
    assert.match(c.received(), /must arrive within 500 ms/);
  });

  it('after a request, a slow second request on the same connection is cut with 408 too', async () => {
    const c = open(port);
    c.socket.write(REQUEST);
    await until(c, /\{"ok":true\}$/);
    assert.match(c.received(), /^HTTP\/1\.1 200 OK\r\n/);
    c.socket.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\n{');
    await c.closed;
    assert.match(c.received(), /HTTP\/1\.1 408 Request Timeout\r\n/);
  });
});
