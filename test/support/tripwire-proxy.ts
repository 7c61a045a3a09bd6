/**
 * A tripwire for traffic off the machine: an HTTP proxy on 127.0.0.1 that forwards nothing.
 * A program under test gets it as `HTTPS_PROXY` / `HTTP_PROXY` (and the lower-case forms) with
 * `NO_PROXY` naming the loopback hosts, so its loopback requests go direct and every request
 * meant for anywhere else arrives here instead: recorded (`CONNECT api.anthropic.com:443`,
 * `GET http://host/path`) and refused with 403. A test asserts `attempts` is empty.
 *
 * It catches what honours the proxy variables (the Claude Code CLI's own HTTP client, and
 * `git` over https in its child processes); a raw socket that ignores them is not seen (the
 * harness documents an strace measurement for that, test/support/claude-code.ts).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Tripwire {
  /** e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Every request that reached it, in order. */
  attempts: string[];
  /** The environment that routes a program's non-loopback HTTP(S) here. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** The hosts that bypass the tripwire (`NO_PROXY`). */
export const LOOPBACK_HOSTS = '127.0.0.1,localhost,::1';

/** Starts the tripwire on 127.0.0.1 (random port). */
export async function startTripwire(): Promise<Tripwire> {
  const attempts: string[] = [];
  const server = createServer((req, res) => {
    attempts.push(`${req.method} ${req.url}`);
    res.writeHead(403, { connection: 'close' }).end();
  });
  server.on('connect', (req, socket) => {
    attempts.push(`CONNECT ${req.url}`);
    socket.on('error', () => undefined);
    socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    attempts,
    env: {
      HTTPS_PROXY: url,
      HTTP_PROXY: url,
      https_proxy: url,
      http_proxy: url,
      NO_PROXY: LOOPBACK_HOSTS,
      no_proxy: LOOPBACK_HOSTS,
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
