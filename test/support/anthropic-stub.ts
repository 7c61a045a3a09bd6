/**
 * A scripted stand-in for the Anthropic Messages API on loopback, so the real Claude Code CLI can
 * run in tests with no model, no key and no traffic off the machine (issue 7 §4; clients.md §0).
 *
 * `POST /v1/messages` answers the **main conversation** (a request that offers tools) from a
 * script, one turn per request, streaming (`stream: true`: SSE `message_start`,
 * `content_block_start`, `content_block_delta`, `content_block_stop`, `message_delta`,
 * `message_stop`) or as one JSON message otherwise. A turn is a text answer or a `tool_use` block
 * (name, input); a turn may be a function of the request, so a test can read an id out of the
 * previous `tool_result` and script the next call with it. Requests without tools (side requests
 * such as title generation; Claude Code 2.1.328 sent none in these tests, with non-essential
 * traffic off) get a short text answer and do not consume the script. `POST /v1/messages/count_tokens` answers an estimate; any other path answers an
 * Anthropic-shaped 404. Every request (path, headers, parsed body) is recorded, so a test can
 * assert what the model received: the `tool_result` blocks of the next request.
 *
 * Binds 127.0.0.1 only, and makes no outbound connection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

/** A content block as Claude Code sends it in `messages[].content`. */
export type ContentBlock = { type: string; [k: string]: any };

/** A Messages API request body (only the parts the tests read are typed). */
export interface MessagesRequest {
  model?: string;
  stream?: boolean;
  max_tokens?: number;
  system?: string | ContentBlock[];
  messages: { role: 'user' | 'assistant'; content: string | ContentBlock[] }[];
  tools?: { name: string; [k: string]: any }[];
  [k: string]: any;
}

/** One request the stub received. */
export interface RecordedRequest {
  /** Arrival time (ms since epoch). */
  at: number;
  method: string;
  /** Path with query string, e.g. `/v1/messages?beta=true`. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body (undefined for an empty or non-JSON body). */
  body?: MessagesRequest;
  /** What the stub did with it: a script turn (its index), a side answer, or neither. */
  served: { kind: 'script'; turn: number } | { kind: 'side' } | { kind: 'other' };
  /** The content blocks the stub answered with (tool_use blocks carry their `toolu_` ids). */
  answer?: ContentBlock[];
}

/**
 * A turn of the model: plain text, or one `tool_use` block (optionally preceded by text).
 * `delayMs` holds the answer back that long (a model that takes its time: paces a polling loop).
 */
export type Turn = ({ text: string } | { toolUse: { name: string; input: Record<string, unknown> }; text?: string }) & {
  delayMs?: number;
};

/** A scripted step: a fixed turn, or one computed from the request it answers. */
export type Step = Turn | ((req: MessagesRequest, all: RecordedRequest[]) => Turn);

export interface AnthropicStubOptions {
  /** The main conversation's turns, in order. */
  script: Step[];
  /** What a main-conversation request gets once the script is used up (default: text "Done."). */
  after?: Turn;
}

export interface AnthropicStub {
  /** e.g. `http://127.0.0.1:41234` (what ANTHROPIC_BASE_URL gets). */
  origin: string;
  requests: RecordedRequest[];
  /** Main-conversation requests (those that offered tools), in order. */
  mainRequests(): RecordedRequest[];
  /** How many script steps have been served. */
  readonly served: number;
  /** Errors thrown by a step function (answered with an API error, so the CLI stops). */
  errors: Error[];
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;

/** The content blocks of a turn, as the API returns them (tool_use gets a fresh `toolu_` id). */
function blocksOf(turn: Turn): ContentBlock[] {
  const out: ContentBlock[] = [];
  if ('text' in turn && turn.text) out.push({ type: 'text', text: turn.text });
  if ('toolUse' in turn)
    out.push({ type: 'tool_use', id: id('toolu_stub'), name: turn.toolUse.name, input: turn.toolUse.input });
  return out;
}

/** Writes one message as the streaming SSE event sequence of the Messages API. */
function writeStream(res: ServerResponse, model: string, blocks: ContentBlock[]): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': id('req_stub'),
  });
  const ev = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const stop = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  ev('message_start', {
    message: {
      id: id('msg_stub'),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 1 },
    },
  });
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
      ev('content_block_delta', { index, delta: { type: 'text_delta', text: b.text } });
    } else {
      ev('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
      ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
    }
    ev('content_block_stop', { index });
  });
  ev('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 5 } });
  ev('message_stop', {});
  res.end();
}

/** Writes one message as the non-streaming JSON answer. */
function writeJson(res: ServerResponse, model: string, blocks: ContentBlock[]): void {
  const stop = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  res.writeHead(200, { 'content-type': 'application/json', 'request-id': id('req_stub') });
  res.end(
    JSON.stringify({
      id: id('msg_stub'),
      type: 'message',
      role: 'assistant',
      model,
      content: blocks,
      stop_reason: stop,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 5 },
    }),
  );
}

function writeError(res: ServerResponse, status: number, type: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ type: 'error', error: { type, message } }));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts the stub on 127.0.0.1 (random port). */
export async function startAnthropicStub(opts: AnthropicStubOptions): Promise<AnthropicStub> {
  const requests: RecordedRequest[] = [];
  const errors: Error[] = [];
  let served = 0;
  const after: Turn = opts.after ?? { text: 'Done.' };

  const server: Server = createServer(async (req, res) => {
    const raw = await readBody(req);
    let body: MessagesRequest | undefined;
    try {
      body = raw ? (JSON.parse(raw) as MessagesRequest) : undefined;
    } catch {
      body = undefined;
    }
    const rec: RecordedRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: { ...req.headers },
      ...(body ? { body } : {}),
      served: { kind: 'other' },
    };
    requests.push(rec);
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: Math.max(1, Math.ceil(raw.length / 4)) }));
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/messages' || !body || !Array.isArray(body.messages)) {
      writeError(res, 404, 'not_found_error', `stub: no ${req.method} ${path}`);
      return;
    }
    const model = body.model ?? 'claude-stub';
    let turn: Turn;
    if (Array.isArray(body.tools) && body.tools.length > 0) {
      const step = opts.script[served];
      rec.served = { kind: 'script', turn: served };
      if (step === undefined) turn = after;
      else {
        served++;
        try {
          turn = typeof step === 'function' ? step(body, requests) : step;
        } catch (e) {
          errors.push(e as Error);
          writeError(res, 400, 'invalid_request_error', `stub script: ${(e as Error).message}`);
          return;
        }
      }
    } else {
      rec.served = { kind: 'side' };
      turn = { text: 'Stub session' };
    }
    const blocks = blocksOf(turn);
    rec.answer = blocks;
    if (turn.delayMs) await new Promise((r) => setTimeout(r, turn.delayMs));
    if (res.destroyed) return;
    if (body.stream) writeStream(res, model, blocks);
    else writeJson(res, model, blocks);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    errors,
    mainRequests: () => requests.filter((r) => r.served.kind === 'script'),
    get served() {
      return served;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Every `tool_result` block in a request's messages, in order. */
export function toolResults(req: MessagesRequest): ContentBlock[] {
  return req.messages.flatMap((m) =>
    Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_result') : [],
  );
}

/** The text of a `tool_result` block (its string content, or its text blocks joined by newlines). */
export function toolResultText(block: ContentBlock): string {
  const c = block.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((x: ContentBlock) => (x.type === 'text' ? x.text : `[${x.type}]`)).join('\n');
  return '';
}

/** One `tool_use` the stub sent and the `tool_result` Claude Code answered it with. */
export interface ToolExchange {
  /** Index of the main request the tool_use answered. */
  turn: number;
  id: string;
  name: string;
  input: Record<string, unknown>;
  /** The matching `tool_result` block of the next main request (undefined: it never came). */
  result?: ContentBlock;
  /** `toolResultText(result)`: what the model read. */
  text?: string;
  isError: boolean;
}

/** Pairs each scripted `tool_use` with the `tool_result` for it in the following main request. */
export function toolExchanges(main: RecordedRequest[]): ToolExchange[] {
  return main.flatMap((req, i) =>
    (req.answer ?? [])
      .filter((b) => b.type === 'tool_use')
      .map((b) => {
        const next = main[i + 1]?.body;
        const result = next ? toolResults(next).find((r) => r.tool_use_id === b.id) : undefined;
        return {
          turn: i,
          id: b.id as string,
          name: b.name as string,
          input: b.input as Record<string, unknown>,
          ...(result ? { result, text: toolResultText(result) } : {}),
          isError: result?.is_error === true,
        };
      }),
  );
}
