/**
 * `prompts/list` and `prompts/get` for the prompts of the enabled tool sets (kit prompts.ts;
 * spec server/prompts), served by the gateway:
 *  - unknown prompt, or a required argument missing or not a string → `-32602`; arguments the
 *    prompt does not declare are ignored;
 *  - a prompt may ask first (MRTR, M-01): its `input_required` carries a signed `requestState`
 *    (mrtr.ts, continuation kind `prompt`, bound to the prompt, its arguments and the principal),
 *    and the retry's answers are validated against what was asked (E-05) before `get` runs again;
 *  - an unexpected failure → `-32603` with an error id (the details go to the log only).
 * Registered only when some prompt is enabled (server-factory.ts), so `prompts/list` is `-32601`
 * and the `prompts` capability absent otherwise.
 */
import { ProtocolError, type Server, type ServerContext } from '@modelcontextprotocol/server';
import { newErrorId } from '@mcp-tasks/observability';
import { isInputRequired, type InputRequired, type InputResponse, type PromptResult } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { invalidParams, unexpectedFailure } from './errors.js';
import { askRound, continuationOf, continueRound, digest } from './mrtr.js';

/** Registers the prompt handlers on a per-request server. `callOf` builds the invocation's `Call`. */
export function registerPrompts(server: Server, gw: Gateway, callOf: (ctx: ServerContext) => Call): void {
  server.setRequestHandler('prompts/list', async () => ({ prompts: gw.prompts.list() as never }));

  server.setRequestHandler('prompts/get', async (request, ctx) => {
    const call = callOf(ctx);
    const { name } = request.params;
    const prompt = gw.prompts.get(name);
    if (!prompt) throw invalidParams(`Unknown prompt: ${name}`);
    const given = (request.params.arguments ?? {}) as Record<string, unknown>;
    const args: Record<string, string> = {};
    for (const [key, spec] of Object.entries(prompt.arguments ?? {})) {
      const v = given[key];
      if (v === undefined) {
        if (spec.required) throw invalidParams(`Missing required argument "${key}" for prompt ${name}`);
        continue;
      }
      if (typeof v !== 'string') throw invalidParams(`Argument "${key}" of prompt ${name} must be a string`);
      args[key] = v;
    }
    const rs = continuationOf(call);
    if (rs && (rs.k !== 'prompt' || rs.tool !== name || rs.args !== digest(args)))
      throw invalidParams('requestState does not belong to this prompt');
    const round = await continueRound(gw, call, 'prompt', name, args, ctx.mcpReq.inputResponses ?? {});
    if ('again' in round) return round.again as never;
    let out: PromptResult | InputRequired;
    try {
      out = await prompt.get(args, {
        signal: ctx.mcpReq.signal,
        step: round.step,
        state: round.state,
        inputResponses: round.responses as Record<string, InputResponse>,
        clientCapabilities: call.caps,
        principal: call.principal,
      });
    } catch (e) {
      if (e instanceof ProtocolError) throw e;
      const errorId = newErrorId();
      gw.log.error({ err: e, prompt: name, errorId }, 'prompt.failed');
      throw unexpectedFailure(`Prompt ${name}`, errorId);
    }
    if (isInputRequired(out)) return await askRound(gw, call, 'prompt', name, args, round.step, out);
    return out as never;
  });
}
