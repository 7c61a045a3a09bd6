/**
 * Recovery figures: how long a running step waits for another worker when its
 * worker is SIGKILLed ("worker SIGKILL → step resumed elsewhere") or SIGTERMed ("SIGTERM →
 * resumed"). Two workers of the benchmark's service run `checkpoint_count {600}`; once the step
 * has written its first checkpoint, the worker holding it gets the signal, and the figure is
 * the time from the signal to the other worker's `step.started` line for that task (its own
 * log timestamp, ms). The task is then cancelled and the stopped worker replaced. Samples
 * alternate SIGKILL and SIGTERM.
 *
 * The group starts on an empty tools queue: in a full run the worker was stopped before the
 * creation and memory groups, which leave thousands of queued steps of the same principal, and
 * the two workers would run those first (the figure's task waits behind them at a lower
 * fair-share priority: the step did not start within 30 s). Their tasks stay `working` and the
 * reconciler fails them ("job lost") in the background.
 */
import { Queue } from 'bullmq';
import { TOOLS_QUEUE, toolsPrefix } from '@mcp-tasks/jobs';
import { startProcess, waitFor, type Proc } from '../test/support/cluster.js';
import { callTool, cancelTask } from '../test/support/mcp.js';
import { PREFIX, type BenchProcesses } from './processes.js';
import { percentiles, wallMs, type Percentiles } from './stats.js';
import { own } from './children.js';

export interface RecoveryFigure {
  sigkill: Percentiles;
  sigterm: Percentiles;
}

const startedOn = (w: Proc, taskId: string) => w.logs.find((l) => l.msg === 'step.started' && l.taskId === taskId);

/** `samples` of each signal (see the module doc). */
export async function recovery(b: BenchProcesses, samples: number): Promise<RecoveryFigure> {
  const keep = { keepLogs: 400, onSpawn: own };
  const queue = new Queue(TOOLS_QUEUE, { connection: b.client, prefix: toolsPrefix(PREFIX, 0) });
  await queue.drain(true);
  await queue.close();
  let workers: Proc[] = await Promise.all([startProcess('worker', b.env, keep), startProcess('worker', b.env, keep)]);
  const out = { SIGKILL: [] as number[], SIGTERM: [] as number[] };
  try {
    for (let i = 0; i < samples * 2; i++) {
      const signal = i % 2 === 0 ? 'SIGKILL' : 'SIGTERM';
      const r = await callTool(b.hot.url!, 'checkpoint_count', { seconds: 600 }, { token: b.apiKey });
      const taskId = r.body.result?.taskId as string;
      if (!taskId) throw new Error(`no task: ${JSON.stringify(r.body)}`);
      const holder = await waitFor(() => workers.find((w) => startedOn(w, taskId)), 30_000, 10, 'the step to start');
      const other = workers.find((w) => w !== holder)!;
      await waitFor(() => b.client.exists(`${PREFIX}:{t:${taskId}}:checkpoint`), 30_000, 20, 'a first checkpoint');
      const at = wallMs();
      const stopped = holder.stop(signal);
      const resumed = await other.waitLog((l) => l.msg === 'step.started' && l.taskId === taskId, 60_000);
      out[signal].push(Date.parse(String(resumed.time)) - at);
      await cancelTask(b.hot.url!, taskId, { token: b.apiKey });
      await stopped;
      workers = [other, await startProcess('worker', b.env, keep)];
    }
  } finally {
    await Promise.allSettled(workers.map((w) => w.kill()));
  }
  return { sigkill: percentiles(out.SIGKILL), sigterm: percentiles(out.SIGTERM) };
}
