/**
 * `ctx.checkpoint(value)` of a step running on this worker (D14, R-01): the value is serialized
 * and size-checked (CHECKPOINT_MAX_BYTES; `CheckpointError` otherwise, thrown to the tool), then
 * written fenced (`Checkpoints.save`). Writes are chained, so they land in the order the tool
 * made them. A refused write (`fenced`/`stale`: another worker holds the step now; `terminal`
 * / `gone`) calls `onRefused` (the processor aborts the tool's signal, as for a refused
 * progress write) and resolves: the stale run's checkpoint is dropped like its late result.
 */
import type { Logger } from '@mcp-tasks/observability';
import type { Checkpoints, WriteOutcome } from '@mcp-tasks/task-store';
import { checkpointJson } from '@mcp-tasks/tools';

export interface CheckpointWriterOptions {
  checkpoints: Checkpoints;
  taskId: string;
  step: number;
  fence: string;
  maxBytes: number;
  onRefused: (code: WriteOutcome['code']) => void;
  log: Logger;
}

/** Builds `ctx.checkpoint` for one run of one step. */
export function checkpointWriter(o: CheckpointWriterOptions): (value: unknown) => Promise<void> {
  let chain: Promise<void> = Promise.resolve();
  return (value: unknown) => {
    const json = checkpointJson(value, o.maxBytes); // throws CheckpointError to the tool
    const write = chain.then(async () => {
      const r = await o.checkpoints.save(o.taskId, o.step, o.fence, json);
      if (r.code !== 'ok') {
        o.log.warn({ outcome: r.code }, 'checkpoint.refused');
        o.onRefused(r.code);
      }
    });
    chain = write.catch(() => undefined);
    return write;
  };
}

/** The step's checkpoint from an earlier run, or undefined (none, or unreadable: logged). */
export async function readLastCheckpoint(
  checkpoints: Checkpoints,
  taskId: string,
  step: number,
  log: Logger,
): Promise<unknown> {
  try {
    return await checkpoints.read(taskId, step);
  } catch (e) {
    log.warn({ err: (e as Error).message }, 'checkpoint.read_failed');
    return undefined;
  }
}
