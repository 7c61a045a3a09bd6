/**
 * Memory probe for the benchmark (issue 8 §5, case N-13), preloaded into a gateway the
 * benchmark starts: `node --expose-gc --import ./bench/probe.mjs apps/gateway/dist/main.js`
 * with BENCH_PROBE_PORT set. Nothing in the gateway knows about it, and it does nothing unless
 * that variable is set: production never loads it.
 *
 *   GET http://127.0.0.1:<BENCH_PROBE_PORT>/mem        → process.memoryUsage() (bytes) and `spaces`,
 *                                                        the bytes used per V8 heap space, JSON
 *   GET http://127.0.0.1:<BENCH_PROBE_PORT>/mem?gc=1   → the same after a full GC (needs --expose-gc)
 *
 * Listens on loopback only, on its own port (never the gateway's).
 */
import { createServer } from 'node:http';
import { getHeapSpaceStatistics } from 'node:v8';

const port = Number(process.env.BENCH_PROBE_PORT);
if (port) {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://probe');
    if (url.pathname !== '/mem') {
      res.writeHead(404).end();
      return;
    }
    if (url.searchParams.get('gc') && typeof globalThis.gc === 'function') {
      globalThis.gc();
      globalThis.gc(); // a second pass collects what the first one's finalizers released
    }
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((sp) => [sp.space_name, sp.space_used_size]));
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ...process.memoryUsage(), spaces }));
  });
  server.listen(port, '127.0.0.1');
  server.unref(); // never keeps the gateway alive at shutdown
}
