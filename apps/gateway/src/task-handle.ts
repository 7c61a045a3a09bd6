/**
 * The task handle (`CreateTaskResult`, T-11) exactly as the Tasks extension's schema has it: the
 * flat task and `resultType: "task"`, nothing else. The SDK treats every `tools/call` result as a
 * `CallToolResult` and adds `content: []` to one that has none; a client that declared the
 * extension without implementing it then reads an empty success and never polls. The SDK path
 * therefore rewrites its JSON answer with this function (sse.ts `rewriteJson`), and the hot path
 * (hot-path.ts) never adds the key: both answer the same bytes.
 */

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A JSON-RPC message whose `result` is a task handle, without the `content` key the SDK added
 * (every other message, and every other key and its order, unchanged).
 */
export function withoutHandleContent(message: unknown): unknown {
  if (!isObject(message) || !isObject(message.result) || message.result.resultType !== 'task') return message;
  const { content, ...rest } = message.result;
  if (!Array.isArray(content) || content.length > 0) return message;
  return { ...message, result: rest };
}
