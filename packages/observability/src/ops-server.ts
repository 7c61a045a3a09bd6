/**
 * A small operations HTTP server on `node:http`: `GET /metrics` (Prometheus
 * text format), `GET /healthz` (liveness, no I/O) and `GET /readyz` (readiness), each only when
 * given. Used by the worker (which never imports Fastify) and by a gateway whose metrics are
 * bound to their own port (METRICS_PORT). Anything else: 404. No credentials: bind it to an
 * address only the scraper and the orchestrator reach.
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { RETRY_AFTER_S } from '@mcp-tasks/errors';

/** A readiness verdict: ready or not, and a JSON body for humans. */
export interface Readiness {
  ready: boolean;
  body: Record<string, unknown>;
}

export interface OpsServerOptions {
  host: string;
  /** 0 = any free port (see `port` of the result). */
  port: number;
  /** When `port` is taken (EADDRINUSE), listen on any free port instead of failing. */
  freePortIfTaken?: boolean;
  registry?: Registry;
  healthz?: boolean;
  readyz?: () => Promise<Readiness>;
}

export interface OpsServer {
  server: Server;
  /** The port actually bound. */
  port: number;
  /** The asked-for port was taken and `freePortIfTaken` chose another (`port`). */
  portWasTaken: boolean;
  close(): Promise<void>;
}

/**
 * Starts the server on `o.port`, or, with `o.freePortIfTaken`, on any free port of `o.host`
 * when that one is in use (EADDRINUSE only: an address that cannot be bound still fails).
 * @throws the listen error (EADDRINUSE, EACCES, EADDRNOTAVAIL) so the process can stop with one line.
 */
export async function startOpsServer(o: OpsServerOptions): Promise<OpsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown, extra: Record<string, string> = {}) => {
      res.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
        ...extra,
      });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(405, { error: 'method not allowed' }, { allow: 'GET, HEAD' });
    if (path === '/metrics' && o.registry) {
      const registry = o.registry;
      registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
          res.end(text);
        })
        .catch((e: Error) => json(500, { error: e.message }));
      return;
    }
    if (path === '/healthz' && o.healthz) return json(200, { status: 'ok' });
    if (path === '/readyz' && o.readyz) {
      o.readyz()
        .then((r) => json(r.ready ? 200 : 503, r.body, r.ready ? {} : { 'retry-after': String(RETRY_AFTER_S) }))
        .catch((e: Error) =>
          json(503, { status: 'unavailable', reason: e.message }, { 'retry-after': String(RETRY_AFTER_S) }),
        );
      return;
    }
    json(404, { error: 'not found' });
  });
  server.keepAliveTimeout = 65_000;
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, o.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  let portWasTaken = false;
  try {
    await listen(o.port);
  } catch (e) {
    if (!o.freePortIfTaken || o.port === 0 || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    portWasTaken = true;
    await listen(0);
  }
  const addr = server.address();
  return {
    server,
    portWasTaken,
    port: typeof addr === 'object' && addr ? addr.port : o.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
