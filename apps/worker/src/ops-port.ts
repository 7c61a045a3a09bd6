/**
 * The worker's operations port (WORKER_HTTP_PORT): `/metrics`, `/healthz` and `/readyz`
 * (readiness.ts). Bound before anything that takes work or says this worker is alive: a port
 * that cannot be bound stops the process (one line on stderr, exit 1) before it fetches a job
 * or writes a heartbeat. Unset, it is 9464, or any free port when that one is taken (logged).
 */
import type { Config } from '@mcp-tasks/config';
import { startOpsServer, type Logger, type OpsServer, type WorkerMetrics } from '@mcp-tasks/observability';
import { workerReadiness, type WorkerReadinessDeps } from './readiness.js';

/**
 * Starts the port on `http` (`config.workerHttp`; absent = off: returns `undefined`), serving
 * `metrics` and the readiness of `readiness`; exits the process when it cannot listen.
 */
export async function startOperationsPort(o: {
  http: Config['workerHttp'];
  metrics: WorkerMetrics;
  readiness: WorkerReadinessDeps;
  log: Logger;
}): Promise<OpsServer | undefined> {
  const { http, metrics, log } = o;
  const readyz = workerReadiness(o.readiness);
  const ops = http
    ? await startOpsServer({ ...http, registry: metrics.registry, healthz: true, readyz }).catch((e: Error) => {
        console.error(
          `worker: cannot listen on ${http.host}:${http.port} (WORKER_HTTP_PORT; off disables it): ${e.message}`,
        );
        process.exit(1);
      })
    : undefined;
  // WORKER_HTTP_PORT unset and its default taken (another worker on this host): any free port.
  if (ops?.portWasTaken)
    log.warn(
      { wanted: http!.port, port: ops.port },
      'worker.http_port_taken: WORKER_HTTP_PORT is not set and its default is in use; /metrics, /healthz and /readyz are on the port logged here',
    );
  return ops;
}
