/**
 * The gateway's JSON body parser (it replaces Fastify's): a body is refused as soon as it passes
 * a limit, while it is read, never after it was parsed whole.
 *
 * Limits (HTTP status, JSON-RPC code, message):
 *  - size: MAX_BODY_BYTES for a request with a principal; MAX_UNAUTHENTICATED_BODY_BYTES (16 KiB)
 *    for one without (an unauthenticated `server/discover`, the only request read without
 *    credentials) → 413, `-32600`; a declared `Content-Length` above the limit is refused before
 *    a byte is read;
 *  - nesting: deeper than MAX_JSON_DEPTH (64) objects/arrays → 400, `-32600` (deeper bodies cannot
 *    be re-serialised by the SDK either);
 *  - object keys: more than MAX_JSON_KEYS in the whole body → 400, `-32600`;
 *  - not JSON, several values, a `__proto__` key or `constructor.prototype` (prototype
 *    poisoning, as Fastify's own parser refuses them) → 400, `-32700`.
 *
 * How: a body of at most SMALL_BODY_BYTES (4 KiB: every poll and most requests) is parsed with
 * `secure-json-parse` once complete and its shape checked after; at that size the worst body
 * (4 KiB of nested brackets) costs about 130 µs of `JSON.parse`, one poll's worth. Above it the
 * body goes, chunk by chunk as it arrives, through the streaming tokenizer of `stream-json` and its
 * Assembler, and each token is counted: the first token past a limit stops the parse (a 3.8 MB
 * body of brackets is refused after 65 of them). A pure-JavaScript parser costs about 20 µs more
 * than `JSON.parse` on a small body, which is why small bodies keep the native parser.
 *
 * A refused body is not read further here; body-drain.ts reads what is left before the answer.
 */
import { StringDecoder } from 'node:string_decoder';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import sjson from 'secure-json-parse';
import { jsonParser } from 'stream-json/core/parser.js';
import Assembler from 'stream-json/core/assembler.js';
import { getManyValues, none } from 'stream-chain/defs.js';
import { ErrorCode } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The body's JSON text as it came, for a body of at most SMALL_BODY_BYTES (undefined for a
     * larger one): the validation memo reads a poll's shape off it (verdicts.ts).
     */
    bodyText: string | undefined;
  }
}

/** Deepest JSON nesting accepted (objects and arrays). */
export const MAX_JSON_DEPTH = 64;
/** Bodies up to this many bytes are parsed by `JSON.parse` (secure-json-parse) once complete. */
export const SMALL_BODY_BYTES = 4096;

export interface BodyLimits {
  /** Bytes, for a request with a principal (MAX_BODY_BYTES). */
  maxBodyBytes: number;
  /** Bytes, for a request read without credentials (MAX_UNAUTHENTICATED_BODY_BYTES). */
  maxUnauthenticatedBodyBytes: number;
  /** Object keys in a whole body (MAX_JSON_KEYS). */
  maxJsonKeys: number;
  /** Nesting depth (default MAX_JSON_DEPTH). */
  maxJsonDepth?: number;
}

/** A body refused by the parser: the HTTP status and the JSON-RPC error to answer with. */
export class BodyRefusedError extends Error {
  override name = 'BodyRefusedError';
  constructor(
    readonly statusCode: 400 | 413,
    readonly rpcCode: number,
    message: string,
  ) {
    super(message);
  }
}

const tooDeep = (max: number) =>
  new BodyRefusedError(400, ErrorCode.InvalidRequest, `Request nested deeper than ${max} levels`);
const tooManyKeys = (max: number) =>
  new BodyRefusedError(400, ErrorCode.InvalidRequest, `Request has more than ${max} object keys`);
const parseError = (why: string) => new BodyRefusedError(400, ErrorCode.ParseError, `Parse error: ${why}`);
const poisoned = () => parseError('Object contains forbidden prototype property');

/** Counts tokens of a streamed body against the limits and assembles its value. */
class BoundedJson {
  private readonly decoder = new StringDecoder('utf8');
  private readonly tokens = jsonParser({ streamValues: false });
  private readonly asm = new Assembler();
  private depth = 0;
  private keys = 0;
  /** Per open object: the last key read (to spot `constructor.prototype`). */
  private readonly lastKey: (string | undefined)[] = [];
  /** Per open object: whether it is the value of a `constructor` key. */
  private readonly inConstructor: boolean[] = [];

  constructor(
    private readonly maxDepth: number,
    private readonly maxKeys: number,
  ) {}

  write(chunk: Buffer): void {
    this.feed(this.decoder.write(chunk));
  }

  /** The parsed value. @throws BodyRefusedError */
  end(): unknown {
    const rest = this.decoder.end();
    if (rest) this.feed(rest);
    this.feed(none);
    if (!this.asm.done) throw parseError('Unexpected end of JSON input');
    return this.asm.current;
  }

  private feed(text: string | typeof none): void {
    let out;
    try {
      out = this.tokens(text as string);
    } catch (e) {
      throw parseError((e as Error).message);
    }
    if (out === none) return;
    for (const t of getManyValues(out) as { name: string; value?: unknown }[]) {
      switch (t.name) {
        case 'startObject':
        case 'startArray': {
          if (++this.depth > this.maxDepth) throw tooDeep(this.maxDepth);
          const parentKey = this.lastKey.at(-1);
          this.inConstructor.push(t.name === 'startObject' && parentKey === 'constructor');
          this.lastKey.push(undefined);
          break;
        }
        case 'endObject':
        case 'endArray':
          this.depth--;
          this.inConstructor.pop();
          this.lastKey.pop();
          break;
        case 'keyValue':
          if (++this.keys > this.maxKeys) throw tooManyKeys(this.maxKeys);
          if (t.value === '__proto__' || (t.value === 'prototype' && this.inConstructor.at(-1))) throw poisoned();
          this.lastKey[this.lastKey.length - 1] = t.value as string;
          break;
      }
      this.asm.consume(t as never);
    }
  }
}

/** Checks nesting and key count of a parsed value (small bodies only). @throws BodyRefusedError */
function checkShape(value: unknown, maxDepth: number, maxKeys: number): void {
  if (typeof value === 'object' && value !== null) countKeys(value, 1, 0, maxDepth, maxKeys);
}

/**
 * Walks `v` (at nesting `depth`) and returns `keys` plus its object keys. Recursive, without an
 * object per node: a depth past `maxDepth` throws before going further, so it never recurses
 * more than `maxDepth` (64) deep. @throws BodyRefusedError
 */
function countKeys(v: object, depth: number, keys: number, maxDepth: number, maxKeys: number): number {
  if (depth > maxDepth) throw tooDeep(maxDepth);
  if (Array.isArray(v)) {
    for (const child of v as unknown[])
      if (typeof child === 'object' && child !== null) keys = countKeys(child, depth + 1, keys, maxDepth, maxKeys);
    return keys;
  }
  for (const k in v) {
    if (++keys > maxKeys) throw tooManyKeys(maxKeys);
    const child = (v as Record<string, unknown>)[k];
    if (typeof child === 'object' && child !== null) keys = countKeys(child, depth + 1, keys, maxDepth, maxKeys);
  }
  return keys;
}

/** Parses a complete small body, kept as `req.bodyText`. @throws BodyRefusedError */
function parseSmall(req: FastifyRequest, body: Buffer, maxDepth: number, maxKeys: number): unknown {
  const text = body.toString('utf8');
  req.bodyText = text;
  if (text.trim() === '') throw parseError("Body cannot be empty when content-type is set to 'application/json'");
  let value: unknown;
  try {
    value = sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (e) {
    throw parseError((e as Error).message);
  }
  checkShape(value, maxDepth, maxKeys);
  return value;
}

/** The byte limit of `req`: with a principal (or anonymous access) the full one, else the small one. */
export function bodyLimitOf(req: FastifyRequest, limits: BodyLimits): number {
  return req.principal ? limits.maxBodyBytes : limits.maxUnauthenticatedBodyBytes;
}

/** The message of a 413 for `limit`. */
export function tooLargeMessage(limit: number, limits: BodyLimits): string {
  return limit === limits.maxBodyBytes
    ? `Request body larger than ${limit} bytes`
    : `Request body larger than ${limit} bytes (the limit for requests without credentials)`;
}

/**
 * Replaces Fastify's content-type parsers with this one for `application/json` (any other type
 * gets Fastify's 415; `/mcp` refuses it earlier, request-guards.ts).
 */
export function registerJsonBodyParser(app: FastifyInstance, limits: BodyLimits): void {
  const maxDepth = limits.maxJsonDepth ?? MAX_JSON_DEPTH;
  if (!app.hasRequestDecorator('bodyText')) app.decorateRequest('bodyText', undefined);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', (req, payload: IncomingMessage, done) => {
    const limit = bodyLimitOf(req, limits);
    const tooLarge = () => new BodyRefusedError(413, ErrorCode.InvalidRequest, tooLargeMessage(limit, limits));
    if (Number(req.headers['content-length']) > limit) return done(tooLarge(), undefined);
    let size = 0;
    let small: Buffer[] | undefined = [];
    let streamed: BoundedJson | undefined;
    const stop = (err: Error | null, value?: unknown) => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
      done(err, value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return stop(tooLarge());
      try {
        if (streamed) streamed.write(chunk);
        else if (size <= SMALL_BODY_BYTES) small!.push(chunk);
        else {
          streamed = new BoundedJson(maxDepth, limits.maxJsonKeys);
          for (const c of small!) streamed.write(c);
          small = undefined;
          streamed.write(chunk);
        }
      } catch (e) {
        stop(e as Error);
      }
    };
    const onEnd = () => {
      try {
        stop(null, streamed ? streamed.end() : parseSmall(req, Buffer.concat(small!), maxDepth, limits.maxJsonKeys));
      } catch (e) {
        stop(e as Error);
      }
    };
    const onError = (err: Error) => stop(Object.assign(err, { statusCode: 400 }));
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
  });
}
