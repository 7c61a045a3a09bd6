/**
 * Answers a task's (or an MRTR round's) `inputRequests` in the terminal (T-27, T-28): each
 * `elicitation/create` form becomes prompts that follow its `requestedSchema` — a string with
 * `enum` or `oneOf` choices is a select, an array of choices a checkbox, a boolean a confirm, a
 * number or integer a validated number, any other string a validated input — and the answers
 * an ElicitResult `{action: 'accept', content}`. A URL elicitation shows the link and asks
 * whether it was done. `roots/list` is answered with no roots; sampling cannot be answered here.
 * Ctrl-C inside a prompt rejects with inquirer's `ExitPromptError` (the caller then asks
 * whether to decline, cancel or leave the task running).
 */
import { checkbox, confirm, input, number, select } from '@inquirer/prompts';
import type { InputRequest } from '@mcp-tasks/client';
import { CliError } from './context.js';
import { asList, asSchema, type JsonSchema as Schema } from './json-schema.js';

/** Where prompts draw (stderr, so stdout carries only the result). */
const UI = { output: process.stderr } as const;

/** A choice list from `enum` (+ legacy `enumNames`) or `oneOf`/`anyOf` of `{const, title}`. */
function choicesOf(s: Schema | undefined): { value: unknown; name: string }[] | undefined {
  if (!s) return undefined;
  const values = asList(s.enum);
  if (values) {
    const names = asList(s.enumNames) ?? [];
    return values.map((v, i) => ({
      value: v,
      name: typeof names[i] === 'string' ? names[i] : String(v),
    }));
  }
  for (const k of ['oneOf', 'anyOf'] as const) {
    const list = asList(s[k])?.map(asSchema);
    if (list && list.length > 0 && list.every((o): o is Schema => o !== undefined && 'const' in o)) {
      return list.map((o) => ({
        value: o.const,
        name: typeof o.title === 'string' ? o.title : String(o.const),
      }));
    }
  }
  return undefined;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** Checks a string against `minLength`, `maxLength`, `pattern` and `format` (email, uri, date, date-time). */
function checkString(s: Schema, v: string): true | string {
  if (typeof s.minLength === 'number' && v.length < s.minLength) return `At least ${s.minLength} characters`;
  if (typeof s.maxLength === 'number' && v.length > s.maxLength) return `At most ${s.maxLength} characters`;
  if (typeof s.pattern === 'string') {
    try {
      if (!new RegExp(s.pattern, 'u').test(v)) return `Must match ${s.pattern}`;
    } catch {
      /* a pattern JavaScript cannot read: the server checks it */
    }
  }
  if (s.format === 'email' && !EMAIL.test(v)) return 'An email address';
  if (s.format === 'uri') {
    try {
      new URL(v);
    } catch {
      return 'A URL (e.g. https://example.com)';
    }
  }
  if (s.format === 'date' && !(DATE.test(v) && !Number.isNaN(Date.parse(v)))) return 'A date, YYYY-MM-DD';
  if (s.format === 'date-time' && Number.isNaN(Date.parse(v))) return 'A date and time, e.g. 2026-12-01T09:30:00Z';
  return true;
}

/** The type of a property: its `type`, or the one a `oneOf`/`anyOf` branch gives. */
function typeOf(s: Schema): string | undefined {
  if (typeof s.type === 'string') return s.type;
  const types = asList(s.type);
  if (types) return types.find((t): t is string => typeof t === 'string' && t !== 'null');
  return undefined;
}

/**
 * Asks for one property. Returns `undefined` when an optional property is left empty.
 */
async function askProperty(key: string, s: Schema, required: boolean): Promise<unknown> {
  const label = typeof s.title === 'string' ? s.title : key;
  const message = typeof s.description === 'string' && s.description !== label ? `${label} (${s.description})` : label;
  const type = typeOf(s);
  const choices = choicesOf(s);
  if (choices && type !== 'array') {
    const skip = Symbol('skip');
    const picked = await select<unknown>(
      {
        message,
        choices: required ? choices : [...choices, { value: skip, name: '(leave empty)' }],
        ...(s.default !== undefined ? { default: s.default } : {}),
      },
      UI,
    );
    return picked === skip ? undefined : picked;
  }
  if (type === 'array') {
    const items = choicesOf(asSchema(s.items)) ?? [];
    const picked = await checkbox<unknown>(
      {
        message,
        choices: items.map((c) => ({ ...c, checked: Array.isArray(s.default) && s.default.includes(c.value) })),
        validate: (list) => {
          const n = list.length;
          if (typeof s.minItems === 'number' && n < s.minItems) return `Pick at least ${s.minItems}`;
          if (typeof s.maxItems === 'number' && n > s.maxItems) return `Pick at most ${s.maxItems}`;
          return true;
        },
      },
      UI,
    );
    return !required && picked.length === 0 ? undefined : picked;
  }
  if (type === 'boolean') {
    return confirm({ message, default: typeof s.default === 'boolean' ? s.default : false }, UI);
  }
  if (type === 'number' || type === 'integer') {
    const value = await number(
      {
        message,
        required,
        step: type === 'integer' ? 1 : 'any',
        ...(typeof s.minimum === 'number' ? { min: s.minimum } : {}),
        ...(typeof s.maximum === 'number' ? { max: s.maximum } : {}),
        ...(typeof s.default === 'number' ? { default: s.default } : {}),
      },
      UI,
    );
    return value;
  }
  const text = await input(
    {
      message,
      required,
      ...(typeof s.default === 'string' ? { default: s.default } : {}),
      validate: (v: string) => (v === '' && !required ? true : checkString(s, v)),
    },
    UI,
  );
  return text === '' && !required ? undefined : text;
}

/** Prompts for one form elicitation; returns its ElicitResult content. */
async function askForm(params: Record<string, unknown>): Promise<Record<string, unknown>> {
  const schema: Schema = asSchema(params.requestedSchema) ?? {};
  const required = new Set(asList(schema.required) ?? []);
  const content: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(asSchema(schema.properties) ?? {})) {
    const v = await askProperty(key, asSchema(s) ?? {}, required.has(key));
    if (v !== undefined) content[key] = v;
  }
  return content;
}

/**
 * Answers every request of `inputRequests` in order, prompting in the terminal.
 * @returns `inputResponses` keyed like the requests.
 * @throws inquirer's `ExitPromptError` on Ctrl-C; CliError for a request this client cannot answer.
 */
export async function answerInputRequests(requests: Record<string, InputRequest>): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [key, req] of Object.entries(requests)) {
    const params = req.params ?? {};
    if (req.method === 'elicitation/create') {
      const message = typeof params.message === 'string' ? params.message : 'The tool asks a question';
      process.stderr.write(`\n${message}\n`);
      if (params.mode === 'url') {
        process.stderr.write(`Open ${params.url}\n`);
        const done = await confirm({ message: 'Done?', default: true }, UI);
        out[key] = { action: done ? 'accept' : 'decline' };
      } else {
        out[key] = { action: 'accept', content: await askForm(params) };
      }
    } else if (req.method === 'roots/list') {
      out[key] = { roots: [] };
    } else {
      throw new CliError(`the tool asks for ${req.method}, which this terminal client cannot answer`);
    }
  }
  return out;
}

/** `decline` for every elicitation among `requests` (roots: no roots). */
export function declineAll(requests: Record<string, InputRequest>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, req] of Object.entries(requests))
    out[key] = req.method === 'roots/list' ? { roots: [] } : { action: 'decline' };
  return out;
}

/** The questions of `requests` as one line each (for a terminal that cannot prompt, and `get`). */
export function describeInputRequests(requests: Record<string, InputRequest>): string[] {
  return Object.entries(requests).map(([key, r]) =>
    typeof r.params?.message === 'string' ? `${r.params.message} [${key}]` : `${r.method} [${key}]`,
  );
}

/** True for the error inquirer throws when the person presses Ctrl-C in a prompt. */
export const isPromptExit = (e: unknown): boolean => e instanceof Error && e.name === 'ExitPromptError';
