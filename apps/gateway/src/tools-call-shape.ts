/**
 * The shape of `tools/call` params, checked before the SDK sees the request: `params` an
 * object, `params.name` a string, `params.arguments` absent or a JSON object. The SDK refuses
 * the same requests but puts zod's whole issue list, as pretty-printed JSON, in the message;
 * this answers a short sentence naming the field, with the field and what it held in `data`.
 * What the arguments must contain is the tool's input schema, checked later (an `isError`
 * result naming the argument).
 */
import type { FastifyReply } from 'fastify';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

/** What a JSON value is, in words (`an array`, `a number`, `null`). */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Why `params` is not a `tools/call` params object, as `{ message, data }`, or undefined when
 * its shape is right. E.g. `params.arguments must be an object, not an array`.
 */
export function toolsCallShapeError(
  params: unknown,
): { message: string; data: { field: string; received: string } } | undefined {
  const bad = (field: string, must: string, v: unknown) => {
    const received = kindOf(v);
    return { message: `Invalid params: ${field} must be ${must}, not ${received}`, data: { field, received } };
  };
  if (!isObject(params)) return bad('params', 'an object with the tool name', params);
  if (typeof params.name !== 'string') return bad('params.name', "a string (the tool's name)", params.name);
  if (params.arguments !== undefined && !isObject(params.arguments))
    return bad('params.arguments', 'an object', params.arguments);
  return undefined;
}

/** Answers a `tools/call` whose params have the wrong shape (200, `-32602`, as the SDK would); undefined when they are right. */
export function refuseToolsCallShape(reply: FastifyReply, id: unknown, params: unknown): FastifyReply | undefined {
  const err = toolsCallShapeError(params);
  if (!err) return undefined;
  return reply.code(200).send(jsonRpcErrorBody(id, ErrorCode.InvalidParams, err.message, err.data));
}
