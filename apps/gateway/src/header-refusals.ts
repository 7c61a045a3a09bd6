/**
 * Operators' view of the standard-header rung (H-15): every refusal of a request whose headers
 * disagree with its body (`-32020`, HTTP 400) is logged at info as `mcp.header_refused`, with
 * the client's name (`_meta` clientInfo), the method, the header and what was wrong, so an
 * operator can tell why a client fails (a metric alone counts it, it does not say who).
 *
 * ACCEPT_MISSING_MCP_NAME (off by default) accepts a `tasks/get|update|cancel` that omits
 * `Mcp-Name` (some task clients set it only on `tools/call`): the route gives such a request the
 * header its body implies before any validator reads it, so the hot path and the SDK path still
 * see the same request and answer the same bytes. A header that is present and disagrees with the
 * body is never touched: it is refused as before.
 */
import type { FastifyRequest } from 'fastify';
import type { Logger } from '@mcp-tasks/observability';
import type { Classification, McpBody } from './classify.js';
import { ErrorCode } from './errors.js';

/** The methods whose missing `Mcp-Name` an operator may accept (ACCEPT_MISSING_MCP_NAME). */
const LENIENT_METHODS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);
/** A value that can travel as a header as is (a real task id always does). */
const HEADER_SAFE = /^[\x21-\x7E]{1,200}$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The client's name as the request names it (`_meta` clientInfo of a 2026 request), cut at 100 characters. */
export function clientNameOf(body: McpBody | undefined): string | undefined {
  const info = body?.params?._meta?.['io.modelcontextprotocol/clientInfo'];
  if (!isObject(info)) return undefined;
  const name = typeof info.name === 'string' ? info.name : undefined;
  const version = typeof info.version === 'string' ? info.version : undefined;
  return name === undefined ? undefined : `${name}${version ? `/${version}` : ''}`.slice(0, 100);
}

/**
 * Gives a `tasks/get|update|cancel` without `Mcp-Name` the header its `params.taskId` implies
 * (ACCEPT_MISSING_MCP_NAME), and logs that it did.
 */
export function fillMissingMcpName(req: FastifyRequest, body: McpBody | undefined, log: Logger): void {
  if (!body || typeof body.method !== 'string' || !LENIENT_METHODS.has(body.method)) return;
  if (req.headers['mcp-name'] !== undefined) return;
  const taskId = (body.params as Record<string, unknown> | undefined)?.taskId;
  if (typeof taskId !== 'string' || !HEADER_SAFE.test(taskId)) return;
  req.raw.headers['mcp-name'] = taskId;
  req.headers['mcp-name'] = taskId;
  log.info({ client: clientNameOf(body), method: body.method, header: 'Mcp-Name' }, 'mcp.header_missing_accepted');
}

/** Logs a refused request: a header refusal (`-32020`) at info with who and what, any other at debug. */
export function logRefusal(log: Logger, c: Classification, body: McpBody | undefined, principal: string): void {
  const r = c.rejected!;
  if (r.code !== ErrorCode.HeaderMismatch) {
    log.debug({ cell: r.cell, method: c.method }, 'mcp.rejected');
    return;
  }
  const mismatch = (r.data as { mismatch?: { header?: string } } | undefined)?.mismatch;
  log.info(
    {
      client: clientNameOf(body),
      principal,
      method: c.method,
      cell: r.cell,
      // The header named, or the one missing (the cell says which).
      header: mismatch?.header === '(missing)' ? headerOfCell(r.cell) : mismatch?.header,
      missing: mismatch?.header === '(missing)',
      reason: r.message.slice(0, 300),
    },
    'mcp.header_refused',
  );
}

/** The header a `*-missing` cell of the ladder is about. */
function headerOfCell(cell: string): string {
  if (cell.startsWith('version-')) return 'MCP-Protocol-Version';
  if (cell.startsWith('method-')) return 'Mcp-Method';
  if (cell.startsWith('name-')) return 'Mcp-Name';
  return cell;
}
