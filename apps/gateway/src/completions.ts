/**
 * `completion/complete` (spec server/utilities/completion) for the arguments of the enabled
 * prompts (`ref/prompt`) and the variables of the enabled resource templates (`ref/resource`,
 * named by their `uriTemplate`): the definition's `complete` gives the values, at most 100 are
 * sent (`hasMore` when there were more). An unknown prompt or template → `-32602`; an argument
 * without `complete` → no values. Registered only when some argument can be completed
 * (server-factory.ts), so the `completions` capability is advertised only then.
 */
import type { Server } from '@modelcontextprotocol/server';
import type { Gateway } from './context.js';
import { invalidParams } from './errors.js';

/** Most values one answer carries (the spec's limit). */
const MAX_VALUES = 100;

export function registerCompletions(server: Server, gw: Gateway): void {
  server.setRequestHandler('completion/complete', async (request) => {
    const { ref, argument } = request.params;
    const context = (request.params.context?.arguments ?? {}) as Record<string, string>;
    let complete: ((value: string, context: Record<string, string>) => string[] | Promise<string[]>) | undefined;
    if (ref.type === 'ref/prompt') {
      const prompt = gw.prompts.get(ref.name);
      if (!prompt) throw invalidParams(`Unknown prompt: ${ref.name}`);
      complete = prompt.arguments?.[argument.name]?.complete;
    } else {
      const template = gw.resources.templateFor(ref.uri);
      if (!template) throw invalidParams(`Unknown resource template: ${ref.uri}`);
      complete = template.complete?.[argument.name];
    }
    const values = complete ? [...(await complete(argument.value, context))] : [];
    return {
      completion: { values: values.slice(0, MAX_VALUES), total: values.length, hasMore: values.length > MAX_VALUES },
    };
  });
}
