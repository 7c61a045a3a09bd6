/**
 * 2025-era sessions in Redis (design D15; LG-01, LG-02, LG-07): the `Mcp-Session-Id` a client of
 * the 2025 revisions gets at `initialize`, readable by every replica, so no load balancer has to
 * pin a client to one gateway. The SDK's own sessionful transport keeps its session in the
 * memory of one process (its `sessionIdGenerator` / `onsessioninitialized` transport validates
 * the header against that instance's `sessionId`), so it cannot serve a fleet without affinity;
 * this store is the Redis-backed piece, and the SDK's stateless 2025 lane still answers every
 * request.
 *
 * Keys (all under one hash tag per session, so they share a Cluster slot; the tag is a digest of
 * the id, so the id itself never appears in a key name), each with an expiry:
 *  - `<prefix>:{s:<tag>}:session`  hash: `principal`, `protocolVersion`, `capabilities` (JSON),
 *    `clientInfo` (JSON), `createdAt`, `lastSeenAt` (ms). PEXPIRE = SESSION_IDLE_TIMEOUT_MS,
 *    renewed by every request of the session;
 *  - `…:inflight` hash: JSON-RPC request id (as JSON, so `1` and `"1"` differ) → what runs it
 *    (`InflightTarget`), for `notifications/cancelled`; a field is removed when its call ends;
 *  - `…:rpcseq` counter: ids of the requests this server sends the client (`elicitation/create`),
 *    unique within the session;
 *  - `…:pending:<n>` our request `n` still waiting for the client's response (`PendingRequest`);
 *  - `…:answer:<n>` / `…:cancelled:<token>` a response for a question asked by a call that runs
 *    in a gateway, and the cancel of such a call (legacy-ask.ts reads them);
 *  - channel `…:events`: a hint that one of the two above was written.
 * A session belongs to the principal that opened it: presented with another credential it is
 * "not found" exactly like an unknown one (LG-07), and nothing is written.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/** What a session stores about its client (everything a later request of it may need). */
export interface Session {
  id: string;
  principal: string;
  /** The protocol revision negotiated at `initialize` (LG-01). */
  protocolVersion: string;
  /** The client's capabilities as declared at `initialize` (bounded, `sessionCapabilities`). */
  capabilities: Record<string, unknown>;
  /** The client's `clientInfo` (name, version, title; strings cut at 200 characters). */
  clientInfo: Record<string, string>;
  createdAt: number;
}

/** What a session's in-flight request runs on: a task (worker tool) or a call held in a gateway. */
export type InflightTarget = { taskId: string } | { inline: string };

/** One request this server sent the client, waiting for its response. */
export interface PendingRequest {
  /** The input request's key (the task's wire key, or the gateway tool's key). */
  key: string;
  /** The task whose record takes the answer; absent for a call run in the gateway. */
  taskId?: string;
  /** A call run in the gateway: its token (answers are kept for it under `answer:<n>`). */
  inline?: string;
  /** The input request as sent (`{method, params}`), to validate the answer against (E-05). */
  request: Record<string, unknown>;
}

/** A session id: 32 random bytes, base64url (43 visible ASCII characters, 256 bits). */
export function newSessionId(): string {
  return randomBytes(32).toString('base64url');
}

const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;
/** Capability keys a session keeps (each at most 2 KB of JSON; a larger one is kept as `{}`). */
const KEPT_CAPABILITIES = ['elicitation', 'sampling', 'roots', 'tasks', 'experimental', 'extensions'];
const MAX_CAPABILITY_JSON = 2048;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The client capabilities a session keeps (see `KEPT_CAPABILITIES`): bounded, never the whole `initialize`. */
export function sessionCapabilities(caps: unknown): Record<string, unknown> {
  if (!isObject(caps)) return {};
  const out: Record<string, unknown> = {};
  for (const k of KEPT_CAPABILITIES) {
    const v = caps[k];
    if (!isObject(v)) continue;
    out[k] = JSON.stringify(v).length <= MAX_CAPABILITY_JSON ? v : {};
  }
  return out;
}

/** `clientInfo` as a session keeps it: `name`, `version`, `title`, strings cut at 200 characters. */
export function sessionClientInfo(info: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isObject(info)) return out;
  for (const k of ['name', 'version', 'title']) if (typeof info[k] === 'string') out[k] = info[k].slice(0, 200);
  return out;
}

/**
 * Renews a session for its principal. KEYS[1] session hash; ARGV[1] principal, ARGV[2] idle ms,
 * ARGV[3] now. Returns the hash's fields, or an empty list when unknown or another principal's
 * (nothing written then).
 */
const TOUCH_LUA = `
local p = redis.call('HGET', KEYS[1], 'principal')
if (not p) or p ~= ARGV[1] then return {} end
redis.call('HSET', KEYS[1], 'lastSeenAt', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('HGETALL', KEYS[1])`;

/**
 * Ends a session of its principal. KEYS: session, inflight, rpcseq. ARGV[1] principal.
 * Returns the in-flight targets (JSON), or false when unknown or another principal's.
 */
const END_LUA = `
local p = redis.call('HGET', KEYS[1], 'principal')
if (not p) or p ~= ARGV[1] then return false end
local inflight = redis.call('HVALS', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return inflight`;

type SessionRedis = (Redis | Cluster) & {
  mcpSessionTouch(key: string, principal: string, idleMs: string, now: string): Promise<string[]>;
  mcpSessionEnd(session: string, inflight: string, seq: string, principal: string): Promise<string[] | null>;
};

/** The sessions of one key prefix (see the module docstring). Methods throw ioredis errors when Redis is away. */
export class SessionStore {
  private readonly redis: SessionRedis;

  /**
   * @param idleTimeoutMs a session unused this long expires (SESSION_IDLE_TIMEOUT_MS).
   * @param clock the time written in `createdAt` / `lastSeenAt` (the gateway's Redis clock).
   */
  constructor(
    redis: Redis | Cluster,
    private readonly prefix: string,
    readonly idleTimeoutMs: number,
    private readonly clock: { now(): number } = { now: () => Date.now() },
  ) {
    if (!('mcpSessionTouch' in redis)) redis.defineCommand('mcpSessionTouch', { numberOfKeys: 1, lua: TOUCH_LUA });
    if (!('mcpSessionEnd' in redis)) redis.defineCommand('mcpSessionEnd', { numberOfKeys: 3, lua: END_LUA });
    this.redis = redis as SessionRedis;
  }

  /** True when `id` has the shape of an id this service issues (cheap check before Redis). */
  static isWellFormed(id: unknown): id is string {
    return typeof id === 'string' && SESSION_ID.test(id);
  }

  private key(id: string, part: string): string {
    const tag = createHash('sha256').update(id).digest('hex').slice(0, 32);
    return `${this.prefix}:{s:${tag}}:${part}`;
  }

  /** The channel on which answers and cancels for calls run in a gateway are announced. */
  channel(id: string): string {
    return this.key(id, 'events');
  }

  /** Opens a session for `principal` at `initialize` (LG-01). */
  async create(
    principal: string,
    protocolVersion: string,
    capabilities: unknown,
    clientInfo: unknown,
  ): Promise<Session> {
    const s: Session = {
      id: newSessionId(),
      principal,
      protocolVersion,
      capabilities: sessionCapabilities(capabilities),
      clientInfo: sessionClientInfo(clientInfo),
      createdAt: this.clock.now(),
    };
    const k = this.key(s.id, 'session');
    await this.redis
      .multi()
      .hset(k, {
        principal,
        protocolVersion,
        capabilities: JSON.stringify(s.capabilities),
        clientInfo: JSON.stringify(s.clientInfo),
        createdAt: String(s.createdAt),
        lastSeenAt: String(s.createdAt),
      })
      .pexpire(k, this.idleTimeoutMs)
      .exec();
    return s;
  }

  /**
   * The session `id` of `principal`, renewed for another idle period; null when it is unknown,
   * expired, ended, malformed or another principal's (LG-07: the same answer for all of them).
   */
  async resolve(id: string, principal: string): Promise<Session | null> {
    if (!SessionStore.isWellFormed(id)) return null;
    const flat = await this.redis.mcpSessionTouch(
      this.key(id, 'session'),
      principal,
      String(this.idleTimeoutMs),
      String(this.clock.now()),
    );
    if (!flat?.length) return null;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
    return {
      id,
      principal: h.principal!,
      protocolVersion: h.protocolVersion ?? '',
      capabilities: JSON.parse(h.capabilities ?? '{}') as Record<string, unknown>,
      clientInfo: JSON.parse(h.clientInfo ?? '{}') as Record<string, string>,
      createdAt: Number(h.createdAt),
    };
  }

  /**
   * Ends session `id` of `principal` (`DELETE /mcp`, LG-02).
   * @returns what its in-flight requests run on (the caller cancels them), or null when it was
   * unknown or another principal's.
   */
  async end(id: string, principal: string): Promise<InflightTarget[] | null> {
    if (!SessionStore.isWellFormed(id)) return null;
    const r = await this.redis.mcpSessionEnd(
      this.key(id, 'session'),
      this.key(id, 'inflight'),
      this.key(id, 'rpcseq'),
      principal,
    );
    if (!r) return null;
    return r.map((v) => JSON.parse(v) as InflightTarget);
  }

  /** A new id for a request this server sends on the session (unique within it). */
  async nextRequestId(id: string): Promise<number> {
    const k = this.key(id, 'rpcseq');
    const [[, n]] = (await this.redis.multi().incr(k).pexpire(k, this.idleTimeoutMs).exec()) as [
      [Error | null, number],
    ];
    return Number(n);
  }

  /** Remembers our request `n` until its response arrives or `ttlMs` passes. */
  async addPending(id: string, n: number, entry: PendingRequest, ttlMs: number): Promise<void> {
    await this.redis.set(this.key(id, `pending:${n}`), JSON.stringify(entry), 'PX', ttlMs);
  }

  /** Our request `n`, while it waits for its response: null when unknown, answered or expired. */
  async pending(id: string, n: unknown): Promise<PendingRequest | null> {
    if (!Number.isSafeInteger(n) || (n as number) < 1) return null;
    const v = await this.redis.get(this.key(id, `pending:${n as number}`));
    return v ? (JSON.parse(v) as PendingRequest) : null;
  }

  /**
   * Our request `n` got its response (or one that could not be used): it waits no more. Called
   * after the answer was stored, so a holder that finds the entry gone finds the answer too.
   */
  async dropPending(id: string, n: number): Promise<void> {
    await this.redis.del(this.key(id, `pending:${n}`));
  }

  /** Which of our requests `ns` still wait for their response (same order; false = answered or expired). One MGET. */
  async stillPending(id: string, ns: number[]): Promise<boolean[]> {
    if (!ns.length) return [];
    const vals = await this.redis.mget(...ns.map((n) => this.key(id, `pending:${n}`)));
    return vals.map((v) => v !== null);
  }

  /** Records `requestId` of the session as running on `target` (at most `ttlMs`). */
  async setInflight(id: string, requestId: string | number, target: InflightTarget, ttlMs: number): Promise<void> {
    const k = this.key(id, 'inflight');
    const ttl = await this.redis.pttl(k);
    const m = this.redis.multi().hset(k, JSON.stringify(requestId), JSON.stringify(target));
    // The hash lives as long as its longest-lived call.
    if (ttl < ttlMs) m.pexpire(k, ttlMs);
    await m.exec();
  }

  /** The call `requestId` of the session ended: forget it. */
  async clearInflight(id: string, requestId: string | number): Promise<void> {
    await this.redis.hdel(this.key(id, 'inflight'), JSON.stringify(requestId));
  }

  /** What the session's request `requestId` runs on, or null when none is in flight. */
  async inflightOf(id: string, requestId: unknown): Promise<InflightTarget | null> {
    if (!(typeof requestId === 'string' || Number.isSafeInteger(requestId))) return null;
    const v = await this.redis.hget(this.key(id, 'inflight'), JSON.stringify(requestId));
    return v ? (JSON.parse(v) as InflightTarget) : null;
  }

  /** Keeps the client's response to our request `n` for the gateway call waiting for it, and wakes it. */
  async putAnswer(id: string, n: number, response: unknown, ttlMs: number): Promise<void> {
    await this.redis
      .multi()
      .set(this.key(id, `answer:${n}`), JSON.stringify(response), 'PX', ttlMs)
      .publish(this.channel(id), 'answer')
      .exec();
  }

  /** Marks the gateway call `token` cancelled by the client, and wakes it. */
  async cancelInline(id: string, token: string, ttlMs: number): Promise<void> {
    await this.redis
      .multi()
      .set(this.key(id, `cancelled:${token}`), '1', 'PX', ttlMs)
      .publish(this.channel(id), 'cancel')
      .exec();
  }

  /**
   * What a gateway call `token` waiting for our requests `ns` has received, in one MGET (one
   * snapshot): whether the client cancelled the call, the responses so far (null where none
   * yet), and which requests still wait (false with no answer = the answer could not be used:
   * ask again).
   */
  async inlineState(
    id: string,
    token: string,
    ns: number[],
  ): Promise<{ cancelled: boolean; answers: unknown[]; waiting: boolean[] }> {
    const vals = await this.redis.mget(
      this.key(id, `cancelled:${token}`),
      ...ns.map((n) => this.key(id, `answer:${n}`)),
      ...ns.map((n) => this.key(id, `pending:${n}`)),
    );
    return {
      cancelled: vals[0] === '1',
      answers: vals.slice(1, 1 + ns.length).map((v) => (v ? (JSON.parse(v) as unknown) : null)),
      waiting: vals.slice(1 + ns.length).map((v) => v !== null),
    };
  }
}
