import { startCluster, startRedis, sleep, waitFor } from '../support/cluster.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { callTool, getTask } from '../support/mcp.js';
import { Redis } from 'ioredis';

const r = await startRedis();
const proxy = await startTcpProxy({ targetPort: r.port });
const c = await startCluster({ redisUrl: r.url, gateways: 0, workers: 0 });
const g = await c.addGateway({ REDIS_URL: proxy.url });
const admin = new Redis(r.url);
try {
  console.log('keys at start', (await c.keys()).sort());
  // c1: replica
  await admin.replicaof('127.0.0.1', '1');
  let res = await callTool(g.url!, 'slow_echo', { seconds: 1 });
  console.log('replica:', res.status, JSON.stringify(res.body), res.headers.get('retry-after'));
  await admin.replicaof('NO', 'ONE');
  console.log('keys after c1', (await c.keys()).sort());
  // c2: paused
  proxy.pause();
  await sleep(300);
  res = await callTool(g.url!, 'slow_echo', { seconds: 1 });
  console.log('paused:', res.status, JSON.stringify(res.body), res.headers.get('retry-after'));
  proxy.resume();
  await waitFor(async () => (await fetch(g.url!.replace('/mcp', '/readyz'))).status === 200, 15000);
  console.log('keys after c2', (await c.keys()).sort());
  // c3: cut at enqueue
  proxy.setTap((chunk, dir) => (dir === 'up' && chunk.includes(':{jobs}:tools') ? 'cut' : undefined));
  const t0 = Date.now();
  res = await callTool(g.url!, 'slow_echo', { seconds: 1 });
  console.log('cut:', Date.now() - t0, res.status, JSON.stringify(res.body), res.headers.get('retry-after'));
  proxy.setTap(undefined);
  await sleep(1000);
  proxy.resume();
  await waitFor(async () => (await fetch(g.url!.replace('/mcp', '/readyz'))).status === 200, 15000);
  await sleep(3000);
  console.log('keys after c3', (await c.keys()).sort());
  res = await callTool(g.url!, 'slow_echo', { seconds: 1 });
  console.log('after:', res.status, JSON.stringify(res.body));
  console.log(g.logs.filter((l) => (l.level as number) >= 40 || /task\./.test(String(l.msg))).map((l) => JSON.stringify(l)).join('\n'));
} finally {
  admin.disconnect();
  await c.stop();
  await proxy.close();
  await r.stop();
}
