/**
 * The gateway's view of what the live workers can run, from their adverts
 * (packages/jobs worker-tools.ts). It reports a gateway whose worker tools no live worker
 * runs (different MCP_TOOLSETS / MCP_TOOL_MODULES on gateways and workers):
 *  - a warning in the log (`tools.no_worker`) when the set of such tools changes, checked every
 *    `everyMs` (at start too, once a worker has advertised);
 *  - a task created for such a tool starts with a `statusMessage` saying so, and a warning
 *    (`task.no_worker_for_tool`). The worker that takes its job then fails it with a clear
 *    error (apps/worker processor); with no live worker at all, tasks wait as documented.
 * Reads are cached: the hot path costs nothing, and a miss is confirmed by one fresh read.
 */
import type { RedisClient } from '@mcp-tasks/jobs';
import type { Logger } from '@mcp-tasks/observability';
import { readLiveWorkerTools, toolsWithoutWorker, type LiveWorkerTools } from '@mcp-tasks/jobs';

/** What task creation asks (GatewayDeps.workerTools). */
export interface WorkerToolsCheck {
  /** A `statusMessage` for a new task of `tool` when no live worker runs it, else undefined. */
  noteFor(tool: string): Promise<string | undefined>;
}

/** Message of a task whose tool no live worker runs (at most 200 characters, like every statusMessage). */
export const noWorkerNote = (tool: string) =>
  `No running worker offers ${tool}: the workers load other tools than this gateway (MCP_TOOLSETS, MCP_TOOL_MODULES)`;

export class WorkerToolsWatch implements WorkerToolsCheck {
  private live: LiveWorkerTools | undefined;
  private readAt = 0;
  private reported = '';
  private timer: ReturnType<typeof setInterval> | undefined;

  /**
   * @param workerTools the gateway's tools that run on workers (ToolRegistry.workerToolNames)
   * @param everyMs     how often the adverts are read in the background (ms)
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly keyPrefix: string,
    private readonly workerTools: readonly string[],
    private readonly log: Logger,
    private readonly everyMs = 10_000,
  ) {}

  /** Reads the adverts now and then every `everyMs`, logging changes. */
  start(): void {
    void this.check();
    this.timer = setInterval(() => void this.check(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async refresh(): Promise<LiveWorkerTools | undefined> {
    try {
      this.live = await readLiveWorkerTools(this.redis, this.keyPrefix);
      this.readAt = Date.now();
    } catch {
      // Redis unreachable: keep the last view (readiness reports the outage).
    }
    return this.live;
  }

  /** One background pass: logs `tools.no_worker` when the set of uncovered tools changes. */
  async check(): Promise<void> {
    const live = await this.refresh();
    if (!live) return;
    const missing = toolsWithoutWorker(this.workerTools, live);
    const key = missing.join(',');
    if (key === this.reported) return;
    this.reported = key;
    if (missing.length) {
      this.log.warn(
        { tools: missing, workers: live.workers },
        'tools.no_worker: this gateway lists tools that no live worker runs; give gateways and workers the same MCP_TOOLSETS and MCP_TOOL_MODULES',
      );
    } else {
      this.log.info({ workers: live.workers }, 'tools.workers_cover_all');
    }
  }

  async noteFor(tool: string): Promise<string | undefined> {
    let live = this.live;
    // A miss in the cache is confirmed by a fresh read (a worker may just have started).
    if (live && toolsWithoutWorker([tool], live).length && Date.now() - this.readAt > 250) live = await this.refresh();
    if (!live || !toolsWithoutWorker([tool], live).length) return undefined;
    this.log.warn(
      { tool, workers: live.workers },
      'task.no_worker_for_tool: no live worker advertises this tool (MCP_TOOLSETS / MCP_TOOL_MODULES differ)',
    );
    return noWorkerNote(tool);
  }
}
