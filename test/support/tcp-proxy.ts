/**
 * A tiny TCP proxy for fault tests (cases B-02 b/c): sits between a process and Redis and can
 *  - add a fixed delay to every chunk, separately per direction (`up` = client → target,
 *    `down` = target → client), keeping the byte order;
 *  - `pause()`: destroy every open connection and refuse new ones (accepted, then closed at
 *    once, so the client sees the connection drop), until `resume()`;
 *  - `tap`: look at each chunk before it is forwarded and return `'cut'` to drop it and pause
 *    the proxy (e.g. cut Redis away exactly when a given command is sent).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type Direction = 'up' | 'down';

export interface TcpProxyOptions {
  targetPort: number;
  targetHost?: string;
  /** Delay added to each chunk in ms: one number for both directions, or per direction. */
  delayMs?: number | { up?: number; down?: number };
  /** Inspects each chunk before forwarding; `'cut'` drops it and pauses the proxy. */
  tap?: (chunk: Buffer, dir: Direction) => 'cut' | void;
}

export interface TcpProxy {
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  readonly paused: boolean;
  /** Connections currently open through the proxy. */
  readonly connections: number;
  /** Connections accepted since start (including refused ones while paused). */
  readonly accepted: number;
  setDelay(delay: number | { up?: number; down?: number }): void;
  setTap(tap: TcpProxyOptions['tap']): void;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

/** Forwards chunks from `from` to `to` after `delay()` ms each, in order. */
function delayedPipe(
  from: Socket,
  to: Socket,
  dir: Direction,
  delay: () => number,
  tap: () => TcpProxyOptions['tap'],
  onCut: () => void,
) {
  const queue: { due: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  let lastDue = 0;
  let ended = false;
  const pump = () => {
    timer = undefined;
    const now = Date.now();
    while (queue.length && queue[0]!.due <= now) {
      const { chunk } = queue.shift()!;
      if (!to.destroyed) to.write(chunk);
    }
    if (queue.length) timer = setTimeout(pump, queue[0]!.due - now);
    else if (ended && !to.destroyed) to.end();
  };
  from.on('data', (chunk: Buffer) => {
    if (tap()?.(chunk, dir) === 'cut') {
      onCut();
      return;
    }
    const d = delay();
    if (d <= 0 && !queue.length) {
      if (!to.destroyed) to.write(chunk);
      return;
    }
    const due = Math.max(Date.now() + d, lastDue);
    lastDue = due;
    queue.push({ due, chunk });
    if (!timer) timer = setTimeout(pump, Math.max(0, due - Date.now()));
  });
  from.on('end', () => {
    ended = true;
    if (!queue.length && !timer && !to.destroyed) to.end();
  });
  return () => {
    if (timer) clearTimeout(timer);
    queue.length = 0;
  };
}

/** Starts a proxy on a random port of 127.0.0.1 forwarding to `targetHost:targetPort`. */
export async function startTcpProxy(opts: TcpProxyOptions): Promise<TcpProxy> {
  const host = opts.targetHost ?? '127.0.0.1';
  let delay = { up: 0, down: 0 };
  const setDelay = (d: TcpProxyOptions['delayMs']) => {
    delay = typeof d === 'number' ? { up: d, down: d } : { up: d?.up ?? 0, down: d?.down ?? 0 };
  };
  setDelay(opts.delayMs ?? 0);
  let tap = opts.tap;
  let paused = false;
  let accepted = 0;
  const open = new Set<{ client: Socket; upstream: Socket; stop: () => void }>();

  const pause = () => {
    paused = true;
    for (const c of open) {
      c.stop();
      c.client.destroy();
      c.upstream.destroy();
    }
    open.clear();
  };

  const server: Server = createServer((client) => {
    accepted++;
    client.on('error', () => undefined);
    if (paused) {
      client.destroy();
      return;
    }
    const upstream = connect(opts.targetPort, host);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const stopUp = delayedPipe(
      client,
      upstream,
      'up',
      () => delay.up,
      () => tap,
      pause,
    );
    const stopDown = delayedPipe(
      upstream,
      client,
      'down',
      () => delay.down,
      () => tap,
      pause,
    );
    const entry = {
      client,
      upstream,
      stop: () => {
        stopUp();
        stopDown();
      },
    };
    open.add(entry);
    const closed = () => {
      entry.stop();
      open.delete(entry);
      client.destroy();
      upstream.destroy();
    };
    client.once('close', closed);
    upstream.once('close', closed);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get paused() {
      return paused;
    },
    get connections() {
      return open.size;
    },
    get accepted() {
      return accepted;
    },
    setDelay,
    setTap(t) {
      tap = t;
    },
    pause,
    resume() {
      paused = false;
    },
    async close() {
      pause();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
