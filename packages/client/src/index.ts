/**
 * `@mcp-tasks/client`: the wire code of a 2026-07-28 MCP client for the task service, shared by
 * the terminal client (`apps/cli`) and the tests. `wire` builds requests (envelope, headers),
 * `sse` reads event streams, `rpc` sends one raw request, `client` is the typed `TaskClient`.
 */
export * from './wire.js';
export * from './sse.js';
export * from './rpc.js';
export * from './client.js';
