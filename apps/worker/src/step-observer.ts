/**
 * What a worker records around each step it runs (case N-14):
 *  - a span `execute_tool <tool>` (kind CONSUMER) that is a child of the context the task was
 *    created under (the gateway's request span, carried in the job payload) and links to it; the
 *    step runs inside it, so a tool's own OpenTelemetry spans nest under it. Each attempt of a
 *    step (a stall re-run elsewhere included) is its own span. With a parent that was not
 *    sampled nothing is recorded (parent-based sampling).
 *  - `mcp_steps_total{tool,outcome}` and `mcp_step_duration_seconds{tool,outcome}`;
 *  - `mcp_tasks_finished_total{tool,status}` and `mcp_task_duration_seconds` when the step
 *    ended the task (completed, failed, cancelled).
 * Outcomes: the processor's status word (`completed`, `failed`, `cancelled`, `input_required`),
 * `released` (handed back to the queue on shutdown), `error` (the processor threw) or `skipped`
 * (the claim found nothing to run: gone, terminal, stale, a lost lock).
 */
import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { WaitingError, type Job } from 'bullmq';
import type { StepJobData } from '@mcp-tasks/jobs';
import { contextFrom, hasParent, type WorkerMetrics } from '@mcp-tasks/observability';

export interface StepObserverDeps {
  metrics: WorkerMetrics;
  /** Set only when tracing is on. */
  tracer?: Tracer;
  /** The `tool` label of a tool name: itself when the registry has it, else `other` (bounded labels). */
  toolLabel: (name: string | undefined) => string;
}

const FINISHED = new Set(['completed', 'failed', 'cancelled']);
const KNOWN = new Set(['completed', 'failed', 'cancelled', 'input_required']);

/** Wraps a step processor: `observe(job, () => processStep(...))`. Rethrows what the step throws. */
export function createStepObserver(deps: StepObserverDeps) {
  const { metrics, tracer } = deps;
  return async function observe(job: Job<StepJobData>, run: () => Promise<string>): Promise<string> {
    const tool = deps.toolLabel(job.data.tool);
    const started = performance.now();
    const parent = contextFrom(job.data.trace);
    const span = tracer?.startSpan(
      `execute_tool ${job.data.tool ?? 'step'}`,
      {
        kind: SpanKind.CONSUMER,
        ...(hasParent(parent) ? { links: [{ context: trace.getSpanContext(parent)! }] } : {}),
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': job.data.tool ?? '',
          'mcp.task.id': job.data.taskId,
          'mcp.task.step': job.data.step,
          'mcp.task.step.attempt': job.attemptsStarted,
          'messaging.system': 'bullmq',
          'messaging.operation.type': 'process',
          'messaging.destination.name': job.queueName,
          'messaging.message.id': job.id ?? '',
        },
      },
      parent,
    );
    let outcome = 'error';
    try {
      const status = span ? await context.with(trace.setSpan(parent, span), run) : await run();
      outcome = KNOWN.has(status) ? status : 'skipped';
      return status;
    } catch (e) {
      outcome = e instanceof WaitingError ? 'released' : 'error';
      if (outcome === 'error') span?.recordException(e as Error);
      throw e;
    } finally {
      metrics.steps.inc({ tool, outcome });
      metrics.stepDuration.observe({ tool, outcome }, (performance.now() - started) / 1000);
      if (FINISHED.has(outcome))
        metrics.taskFinished(tool, outcome as 'completed' | 'failed' | 'cancelled', job.data.createdAt);
      if (span) {
        span.setAttribute('mcp.task.step.outcome', outcome);
        if (outcome === 'error' || outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
    }
  };
}
