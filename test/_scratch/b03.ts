import { startCluster } from '../support/cluster.js';
import { rpc, getTask } from '../support/mcp.js';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';

const c = await startCluster({ gateways: 1, workers: 0 });
const url = c.urls[0]!;
const show = (n: string, r: any) => console.log(n, r.status, JSON.stringify(r.body).slice(0, 300));
try {
  show('uuid', await getTask(url, randomUUID()));
  show('empty', await getTask(url, ''));
  show('42', await rpc(url, 'tasks/get', { taskId: 42 }));
  show('42 nohdr', await rpc(url, 'tasks/get', { taskId: 42 }, { headers: { 'mcp-name': null } }));
  show('none', await rpc(url, 'tasks/get', {}));
  const big = 'a'.repeat(100 * 1024);
  for (let i = 0; i < 5; i++) {
    try { show('big both', await getTask(url, big)); } catch (e) { console.log('big both fetch err', (e as any).cause?.code ?? e); }
  }
  show('big body only', await getTask(url, big, { headers: { 'mcp-name': null } }));
  show('big body short hdr', await getTask(url, big, { headers: { 'mcp-name': 'x' } }));
  const b64 = `=?base64?${Buffer.from(big).toString('base64')}?=`;
  try { show('big b64', await getTask(url, big, { headers: { 'mcp-name': b64 } })); } catch (e) { console.log('b64 err', (e as any).cause?.code ?? e); }
  const mid = 'b'.repeat(8 * 1024);
  show('8k both', await getTask(url, mid));
  show('update', await rpc(url, 'tasks/update', { taskId: randomUUID(), inputResponses: {} }));
  show('cancel', await rpc(url, 'tasks/cancel', { taskId: randomUUID() }));
  show('sentinel of uuid', await getTask(url, randomUUID(), {}));
  console.log('healthz', (await fetch(url.replace('/mcp', '/healthz'))).status, c.gateways[0]!.proc.exitCode);
} finally { await c.stop(); }
