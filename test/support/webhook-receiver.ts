/**
 * A webhook receiver for tests (issue 11 §5): a real HTTP server on 127.0.0.1 that records every
 * request it gets (headers, exact body bytes, arrival time) and answers as the test says: at
 * once with a status, with 500 for the first N attempts of each `webhook-id`, or never (hangs
 * until the test ends it). It can also go down (connections refused) and come back on its port.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the receiver got. */
export interface ReceivedWebhook {
  headers: Record<string, string>;
  /** The body exactly as sent (verify signatures on this). */
  body: string;
  at: number;
  /** The status answered, or undefined while the request hangs. */
  answered?: number;
}

/** How the receiver answers a request. */
export type ReceiverMode =
  | { kind: 'status'; status: number }
  /** 500 for the first `failures` requests of each webhook-id, then 200. */
  | { kind: 'fail-first'; failures: number }
  /** Never answers (until `close`). */
  | { kind: 'hang' };

export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  mode: ReceiverMode;
  /** Requests still waiting for an answer (hang mode). */
  readonly hanging: number;
  /** Requests with this webhook-id. */
  byId(id: string): ReceivedWebhook[];
  /** Stops listening (connections are refused) until `up`; the URL stays the same. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(
  mode: ReceiverMode = { kind: 'status', status: 204 },
): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const open = new Set<ServerResponse>();
  const r: WebhookReceiver = {
    url: '',
    received,
    mode,
    get hanging() {
      return open.size;
    },
    byId: (id) => received.filter((w) => w.headers['webhook-id'] === id),
    down: async () => {
      for (const res of open) res.destroy();
      open.clear();
      server.closeAllConnections();
      if (server.listening) await new Promise((res) => server.close(() => res(undefined)));
    },
    up: () =>
      new Promise<void>((res, rej) => {
        server.once('error', rej);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', rej);
          res();
        });
      }),
    close: () => r.down(),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      const w: ReceivedWebhook = { headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(w);
      const m = r.mode;
      if (m.kind === 'hang') {
        open.add(res);
        res.on('close', () => open.delete(res));
        return;
      }
      const status =
        m.kind === 'status' ? m.status : r.byId(headers['webhook-id'] ?? '').length <= m.failures ? 500 : 200;
      w.answered = status;
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${port}/hooks/tasks?token=receiver-path-secret`;
  return r;
}
