/**
 * Prompts a tool set offers (`prompts/list`, `prompts/get`; spec server/prompts). A prompt is a
 * template of messages the user picks in the client (e.g. a slash command); the gateway serves
 * it itself, so `get` must be quick (no long I/O, no worker).
 *
 * Writing one:
 *
 *     export const summarize = definePrompt({
 *       name: 'summarize',
 *       title: 'Summarize a text',
 *       description: 'Asks the model for a summary of the given text.',
 *       arguments: { text: { description: 'The text', required: true }, style: { description: 'short | long', complete: (v) => ['short', 'long'].filter((s) => s.startsWith(v)) } },
 *       async get({ text, style }) {
 *         return { messages: [{ role: 'user', content: { type: 'text', text: `Summarize (${style ?? 'short'}): ${text}` } }] };
 *       },
 *     });
 *
 * and list it in the tool set module (`prompts: [summarize]`). The gateway then advertises the
 * `prompts` capability (and `completions` when an argument has `complete`), lists it, checks
 * that required arguments are present (`-32602` otherwise) and answers `completion/complete`
 * for its arguments.
 *
 * A prompt may ask the user first, exactly like a tool (MRTR, spec transport §6): return
 * `inputRequired({...})`; `get` is called again with `ctx.step` + 1 and `ctx.inputResponses`
 * once the client retries with the answers (the gateway signs the round into `requestState`).
 */
import type { ContentBlock, InputRequired, InputResponse } from './kit.js';

/** One argument of a prompt (all values are strings on the wire). */
export interface PromptArgumentSpec {
  description?: string;
  /** `prompts/get` without it is refused with `-32602`. */
  required?: boolean;
  /**
   * Suggestions for `completion/complete` (at most 100 are sent): the values that complete the
   * partial `value`, best first. `context` holds the other arguments already chosen.
   */
  complete?: (value: string, context: Record<string, string>) => string[] | Promise<string[]>;
}

/** One message of a prompt's result. */
export interface PromptMessage {
  role: 'user' | 'assistant';
  content: ContentBlock;
}

/** `GetPromptResult`. */
export interface PromptResult {
  description?: string;
  messages: PromptMessage[];
}

/** What `get` is given besides the arguments. */
export interface PromptContext {
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  /** 1, then + 1 after each round of input. */
  step: number;
  /** Answers to the previous `InputRequired`, by key (empty on step 1). */
  inputResponses: Record<string, InputResponse>;
  /** `state` of the previous `InputRequired`. */
  state: unknown;
  /** Client capabilities declared on this request (B-06). */
  clientCapabilities: Record<string, unknown>;
  principal: string;
}

export interface PromptDefinition {
  /** Unique among the enabled prompts; 1-64 of `[A-Za-z0-9_./-]`. */
  name: string;
  title?: string;
  description: string;
  /** Arguments by name, in the order `prompts/list` shows them. */
  arguments?: Record<string, PromptArgumentSpec>;
  get(args: Record<string, string>, ctx: PromptContext): Promise<PromptResult | InputRequired>;
}

/** Identity helper (keeps the definition's type checked). */
export function definePrompt(def: PromptDefinition): PromptDefinition {
  return def;
}

/** The enabled prompts by name, in tool-set order (`prompts/list` is deterministic). */
export class PromptRegistry {
  private readonly byName = new Map<string, PromptDefinition>();

  /** @throws Error on a duplicate or malformed name (at start, not on a request). */
  constructor(prompts: readonly PromptDefinition[]) {
    for (const p of prompts) {
      if (!/^[A-Za-z0-9_./-]{1,64}$/.test(p.name)) throw new Error(`invalid prompt name: ${JSON.stringify(p.name)}`);
      if (this.byName.has(p.name)) throw new Error(`duplicate prompt name: ${p.name}`);
      this.byName.set(p.name, p);
    }
  }

  get size(): number {
    return this.byName.size;
  }

  get(name: string): PromptDefinition | undefined {
    return this.byName.get(name);
  }

  /** True when some argument of some prompt can be completed. */
  get completes(): boolean {
    return [...this.byName.values()].some((p) => Object.values(p.arguments ?? {}).some((a) => a.complete));
  }

  /** `prompts/list` entries (`name`, `title`, `description`, `arguments`). */
  list(): Record<string, unknown>[] {
    return [...this.byName.values()].map((p) => {
      const entry: Record<string, unknown> = { name: p.name };
      if (p.title) entry.title = p.title;
      entry.description = p.description;
      const args = Object.entries(p.arguments ?? {});
      if (args.length) {
        entry.arguments = args.map(([name, a]) => ({
          name,
          ...(a.description ? { description: a.description } : {}),
          required: a.required === true,
        }));
      }
      return entry;
    });
  }
}
