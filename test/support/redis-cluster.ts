/**
 * Throwaway Redis topologies for the tests of issue 9 §7 (case N-10): a local Redis Cluster of
 * `masters` masters (`redis-server --cluster-enabled yes` on random ports, joined with
 * `redis-cli --cluster create`), and a Sentinel set-up (one master, one replica, Sentinels on
 * random ports). No persistence; every process and directory is removed by `stop()`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { freePort, sleep, waitFor, waitForRedisPing } from './cluster.js';

export interface RedisProc {
  port: number;
  proc: ChildProcess;
  /** SIGKILL (no-op when it already exited). */
  kill(): Promise<void>;
}

/** Spawns `redis-server` with `args` and waits until it answers PING on `port`. */
async function spawnRedis(port: number, args: string[]): Promise<RedisProc> {
  const proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
  await waitForRedisPing(port, proc, () => out);
  return {
    port,
    proc,
    async kill() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

export interface RedisClusterHandle {
  /** `127.0.0.1:P1,127.0.0.1:P2,...`, the REDIS_CLUSTER_NODES value. */
  nodes: string;
  ports: number[];
  procs: RedisProc[];
  stop(): Promise<void>;
}

/** A free port whose cluster bus port (port + 10000, at most 65535) is free too. */
async function clusterPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10000 > 65535) continue;
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port + 10000, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** Runs `redis-cli` with `args`; throws with its output when it fails. */
function redisCli(args: string[]): string {
  const r = spawnSync('redis-cli', args, { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')} failed (${r.status}): ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * Starts a Redis Cluster of `masters` masters (no replicas) on loopback and waits until every
 * node reports `cluster_state:ok`.
 */
export async function startRedisCluster(masters = 3): Promise<RedisClusterHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-rcluster-'));
  const procs: RedisProc[] = [];
  const stop = async () => {
    await Promise.allSettled(procs.map((p) => p.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports: number[] = [];
    for (let i = 0; i < masters; i++) {
      const port = await clusterPort();
      ports.push(port);
      procs.push(
        await spawnRedis(port, [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '2000',
          '--dir',
          dir,
          '--save',
          '',
          '--appendonly',
          'no',
          '--maxmemory-policy',
          'noeviction',
        ]),
      );
    }
    redisCli([
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    await waitFor(
      () => ports.every((p) => /cluster_state:ok/.test(redisCli(['-p', String(p), 'cluster', 'info']))),
      20_000,
      100,
      'cluster_state:ok on every node',
    );
    return { nodes: ports.map((p) => `127.0.0.1:${p}`).join(','), ports, procs, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

export interface SentinelHandle {
  /** The REDIS_SENTINELS value. */
  sentinels: string;
  /** The master group name (REDIS_SENTINEL_NAME). */
  name: string;
  masterPort: number;
  /** The replicas' ports, in start order. */
  replicaPorts: number[];
  /** Port of the current master, as the first Sentinel sees it. */
  currentMasterPort(): Promise<number>;
  /** `SENTINEL FAILOVER <name>` and waits until the Sentinel names the other node; returns the ms it took. */
  failover(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts one master, `replicas` replicas and `sentinels` Sentinels (quorum = majority) monitoring
 * them as `name`, with short timeouts so a failover takes about a second. (After a failover the
 * Sentinels turn the other replicas to the new master at once, but the old master only when
 * they next see it, up to about 10 s later: with one replica the new master has none that long.)
 */
export async function startSentinelSetup(sentinels = 1, name = 'mcp-test', replicas = 1): Promise<SentinelHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-sentinel-'));
  const procs: RedisProc[] = [];
  const stop = async () => {
    await Promise.allSettled(procs.map((p) => p.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const common = [
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--maxmemory-policy',
      'noeviction',
    ];
    const masterPort = await freePort();
    procs.push(await spawnRedis(masterPort, ['--port', String(masterPort), ...common]));
    const replicaPorts: number[] = [];
    for (let i = 0; i < replicas; i++) {
      const replicaPort = await freePort();
      replicaPorts.push(replicaPort);
      procs.push(
        await spawnRedis(replicaPort, [
          '--port',
          String(replicaPort),
          ...common,
          '--replicaof',
          '127.0.0.1',
          String(masterPort),
        ]),
      );
    }
    for (const port of replicaPorts)
      await waitFor(
        () => /master_link_status:up/.test(redisCli(['-p', String(port), 'info', 'replication'])),
        10_000,
        100,
        'replica in sync',
      );
    const sentinelPorts: number[] = [];
    const quorum = Math.floor(sentinels / 2) + 1;
    for (let i = 0; i < sentinels; i++) {
      const port = await freePort();
      sentinelPorts.push(port);
      const conf = join(dir, `sentinel-${port}.conf`);
      // Sentinel rewrites its config file: one file per Sentinel, writable.
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} ${quorum}`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      procs.push(await spawnRedis(port, [conf, '--sentinel']));
    }
    const ask = (port: number) =>
      Number(
        redisCli(['-p', String(port), 'sentinel', 'get-master-addr-by-name', name])
          .trim()
          .split('\n')[1],
      );
    // Each Sentinel must know the replicas before a failover can pick one.
    const seen = (p: number) =>
      replicaPorts.every((port) => redisCli(['-p', String(p), 'sentinel', 'replicas', name]).includes(String(port)));
    await waitFor(() => sentinelPorts.every(seen), 15_000, 100, 'sentinels see the replicas');
    return {
      sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      name,
      masterPort,
      replicaPorts,
      async currentMasterPort() {
        return ask(sentinelPorts[0]!);
      },
      async failover() {
        const before = ask(sentinelPorts[0]!);
        const t0 = Date.now();
        // A Sentinel refuses while it still thinks the replica is not eligible ("NOGOODSLAVE"): retry briefly.
        await waitFor(
          () => {
            const r = spawnSync('redis-cli', ['-p', String(sentinelPorts[0]), 'sentinel', 'failover', name], {
              encoding: 'utf8',
            });
            return /OK/.test(r.stdout);
          },
          10_000,
          200,
          'SENTINEL FAILOVER accepted',
        );
        await waitFor(
          async () => {
            if (ask(sentinelPorts[0]!) === before) return false;
            await sleep(0);
            return true;
          },
          15_000,
          20,
          'the Sentinel to name the new master',
        );
        return Date.now() - t0;
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
