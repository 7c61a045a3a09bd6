/**
 * The queue view: Bull Board (`@bull-board/api`, `@bull-board/fastify`) on a
 * listener of its own, `http://ADMIN_HOST:ADMIN_PORT/admin/queues` (127.0.0.1:3100 by default),
 * started only when ADMIN_API_KEYS is set. It is a separate Fastify instance, so none of the MCP
 * route's hooks, limits or credentials apply to it, and the MCP port never serves it.
 *
 * Credentials: every request (page, static files, API) needs one of the ADMIN_API_KEYS, as
 * `Authorization: Bearer <key>` (scripts) or `Authorization: Basic base64(<any name>:<key>)`
 * (browsers ask for it themselves after the 401's `WWW-Authenticate: Basic`). Keys are matched
 * in constant time on their SHA-256 digests (auth/api-keys.ts). Without one: 401. A request that
 * changes something (any method but GET/HEAD; only when ADMIN_READ_ONLY=false) from another
 * site (`Sec-Fetch-Site` cross-site, or an `Origin` naming another host) is refused with 403,
 * since a browser re-sends Basic credentials on its own.
 *
 * Queues shown: `tools` (task steps `t.<taskId>.<step>` and input timeouts), `webhooks`
 * (completion deliveries `wh.<taskId>`), `maintenance` (reconciler runs). Each task job's data is
 * shown with the task's `tool`, `principal` and current `taskStatus`, read from its task record
 * when the page is served (`TaskJobsAdapter`); the job name reads `<name> · <tool> · <principal>`.
 * Tool arguments and results are never shown (a webhook job holds a result only with
 * TASK_WEBHOOK_INCLUDE_RESULT=true).
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Job, Queue } from 'bullmq';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AdminConfig } from '@mcp-tasks/config';
import type { Logger } from '@mcp-tasks/observability';
import type { TaskStore } from '@mcp-tasks/task-store';
import { createApiKeyMatcher } from './auth/api-keys.js';
import { readBearer } from './auth/bearer.js';

/** Where Bull Board is mounted on the admin listener. */
export const ADMIN_BASE_PATH = '/admin/queues';

const REALM = 'mcp-tasks-admin';
const CHALLENGE = `Bearer realm="${REALM}", Basic realm="${REALM}", charset="UTF-8"`;

/** A BullMQ adapter that shows each task job with its task's tool, principal and status. */
export class TaskJobsAdapter extends BullMQAdapter {
  constructor(
    queue: Queue,
    private readonly store: TaskStore,
    options: ConstructorParameters<typeof BullMQAdapter>[1],
  ) {
    super(queue, options);
    this.setFormatter('name', (job: { name?: string; data?: Record<string, unknown> }) => {
      const d = job.data ?? {};
      const parts = [job.name ?? '', d.tool, d.principal].filter((p) => typeof p === 'string' && p !== '');
      return parts.join(' · ');
    });
  }

  override async getJobs(...args: Parameters<BullMQAdapter['getJobs']>): Promise<Job[]> {
    const jobs = await super.getJobs(...args);
    await this.withTasks(jobs);
    return jobs;
  }

  override async getJob(id: string): Promise<Job | undefined> {
    const job = await super.getJob(id);
    if (job) await this.withTasks([job]);
    return job;
  }

  /**
   * Adds `tool`, `principal` and `taskStatus` from the task record to the data of every job that
   * names a `taskId` (one HMGET per job, sent together by the auto-pipelined request client).
   * Not an explicit pipeline: under Redis Cluster the task keys of one page sit in different
   * slots, which one pipeline may not span (case N-10). Only the copy sent to the page changes.
   */
  private async withTasks(jobs: (Job | undefined)[]): Promise<void> {
    const taskIdOf = (j: Job | undefined): unknown => (j?.data as { taskId?: unknown } | undefined)?.taskId;
    const tasks = jobs.filter((j): j is Job => typeof taskIdOf(j) === 'string');
    if (!tasks.length) return;
    const rows = await Promise.all(
      tasks.map((j) =>
        this.store.redis.hmget(this.store.key(taskIdOf(j) as string), 'tool', 'owner', 'status').catch(() => []),
      ),
    );
    tasks.forEach((j, i) => {
      const [tool, owner, status] = rows[i] ?? [];
      j.data = {
        ...(j.data as Record<string, unknown>),
        ...(tool ? { tool } : {}),
        ...(owner ? { principal: owner } : {}),
        taskStatus: status ?? 'expired',
      };
    });
  }
}

/** The admin credential of a request: a Bearer token, or the password of Basic credentials. */
export function adminToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const bearer = readBearer(header);
  if (bearer.kind === 'bearer') return bearer.token;
  const m = /^Basic ([A-Za-z0-9+/]+={0,2})$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && colon < decoded.length - 1 ? decoded.slice(colon + 1) : undefined;
}

/** True when a state-changing request comes from another site (CSRF with cached Basic credentials). */
function crossSite(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') return true;
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  try {
    return new URL(origin).host !== req.headers.host;
  } catch {
    return true;
  }
}

export interface AdminServer {
  /** `http://<host>:<port>/admin/queues`. */
  url: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

/**
 * Builds and starts the admin listener.
 * @param o.queues the BullMQ queues to show, with a line of description each; `prefix` tells
 *        apart queues of one name (the shards of the tools queue: `shard-1.tools`, …).
 * @throws when it cannot listen (e.g. EADDRINUSE); the caller says so and exits.
 */
export async function startAdmin(o: {
  config: AdminConfig;
  log: Logger;
  store: TaskStore;
  queues: { queue: Queue; description: string; prefix?: string }[];
}): Promise<AdminServer> {
  const { config, log } = o;
  const matches = createApiKeyMatcher(config.apiKeys);
  const app = Fastify({
    loggerInstance: log.child({ component: 'admin' }, { level: 'warn' }),
  }) as unknown as FastifyInstance;

  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const token = adminToken(req.headers.authorization);
    const admin = token === undefined ? undefined : matches(token);
    if (admin === undefined) {
      log.debug({ url: req.url, presented: token !== undefined }, 'admin.refused');
      return reply
        .code(401)
        .header('www-authenticate', CHALLENGE)
        .header('cache-control', 'no-store')
        .send({ error: 'unauthorized', message: 'an ADMIN_API_KEYS credential is required' });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD' && crossSite(req)) {
      return reply.code(403).send({ error: 'forbidden', message: 'cross-site request refused' });
    }
    reply.header('cache-control', 'no-store');
  });

  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(ADMIN_BASE_PATH);
  createBullBoard({
    queues: o.queues.map(
      ({ queue, description, prefix }) =>
        new TaskJobsAdapter(queue, o.store, {
          readOnlyMode: config.readOnly,
          allowRetries: !config.readOnly,
          description,
          ...(prefix ? { prefix } : {}),
        }),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'MCP task queues' } },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: ADMIN_BASE_PATH });
  app.get('/', async (_req, reply) => reply.redirect(ADMIN_BASE_PATH));

  await app.listen({ host: config.host, port: config.port });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return { url: `http://${host}:${port}${ADMIN_BASE_PATH}`, app, close: () => app.close() };
}
