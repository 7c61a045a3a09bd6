/**
 * Multi round-trip requests run by the gateway (spec transport §6, M-01..M-08): a gateway tool
 * (`runsIn: 'gateway'`), a pre-task round (T-16) or a prompt (`prompts/get`, M-01) asks with
 * `input_required` and a signed `requestState`; the client's retry carries the answers and the
 * state back, to any replica (D7: the signing keys are shared).
 *
 * Continuations (the signed payload; signed, not encrypted: it holds no secret):
 *  - `inline` / `pre` / `prompt`: the step that asked, its state and the requests it issued
 *    (`q`, to validate and re-ask); `tool` names the tool or the prompt;
 *  - `sync`: a synchronous call whose task waits for input (sync-call.ts);
 *  - `status`: `task_status` relaying a handed-off task's question (task-status.ts).
 * Every continuation is bound to the principal (M-06) and to the tool and a digest of its
 * arguments, and carries a nonce (the codec's), so it is single use (M-07): the retry that uses
 * it spends its nonce, and a re-ask spends
 * the old one before minting a new one, so an earlier state can never run a step twice (N-02).
 */
import { createHash } from 'node:crypto';
import { inputRequired as sdkInputRequired } from '@modelcontextprotocol/server';
import type { InputRequired } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { acceptedAnswers } from './answers.js';
import { invalidParams } from './errors.js';

/** A round run in the gateway (inline tools, pre-task rounds, prompts). */
export type MrtrRound = {
  k: 'inline' | 'pre' | 'prompt';
  tool: string;
  args: string;
  step: number;
  state: unknown;
  q: Record<string, unknown>;
};

/** Every signed continuation this service mints. */
export type Continuation = MrtrRound | { k: 'sync' | 'status'; tool: string; args: string; taskId: string };

/**
 * Signs and verifies continuations, bound to the principal (M-05, M-06): request-state.ts, a
 * key ring shared by every replica (REQUEST_STATE_KEYS).
 */
export interface StateCodec<T> {
  mint(payload: T, principal: string): Promise<string>;
  /**
   * @returns the payload and the state's single-use nonce.
   * @throws on any failure (tampered, expired, other principal, unknown key): answered `-32602`.
   */
  verify(state: string, principal: string): Promise<T & { nonce: string }>;
}

/** Digest of a tool's arguments, binding a continuation to them (M-06). */
export const digest = (v: unknown) =>
  createHash('sha256')
    .update(JSON.stringify(v ?? {}))
    .digest('base64url')
    .slice(0, 22);

/**
 * Spends a continuation's nonce (M-07).
 * @throws `-32602` when it was spent already (a replay, or a state superseded by a re-ask).
 */
export async function spend(gw: Gateway, n: string): Promise<void> {
  if (!(await gw.store.spendNonce(n, gw.config.requestState.ttlSeconds * 1000)))
    throw invalidParams('requestState was already used');
}

/** The continuation this retry carries, if any (the SDK verified it with `codec.verify`). */
export function continuationOf(call: Call): (Continuation & { nonce: string }) | undefined {
  return call.ctx.mcpReq.requestState<Continuation & { nonce: string }>();
}

/** MRTR `input_required` for a gateway-run step, with its signed continuation. */
export async function askRound(
  gw: Gateway,
  call: Call,
  k: MrtrRound['k'],
  tool: string,
  args: unknown,
  step: number,
  out: Pick<InputRequired, 'inputRequests' | 'state'>,
) {
  const payload: MrtrRound = { k, tool, args: digest(args), step, state: out.state ?? null, q: out.inputRequests };
  return sdkInputRequired({
    inputRequests: out.inputRequests as never,
    requestState: await gw.codec.mint(payload, call.principal),
  });
}

/**
 * Continues a gateway-run round: validates the answers against the requests issued (E-05),
 * asks again when one is missing (M-08) — spending the old state first — and otherwise spends
 * the continuation so a replayed retry cannot run the next step twice (M-07, case B-17h).
 * @returns the step to run, its state and the accepted answers, or the `input_required` to send back.
 */
export async function continueRound(
  gw: Gateway,
  call: Call,
  k: MrtrRound['k'],
  name: string,
  args: unknown,
  responses: Record<string, unknown>,
) {
  const rs = continuationOf(call);
  if (rs?.k !== k) return { step: 1, state: undefined as unknown, responses: {} };
  const answers = acceptedAnswers(rs.q, responses, gw.config.limits.maxInputResponsesBytes);
  await spend(gw, rs.nonce);
  if (Object.keys(rs.q).some((key) => !(key in answers))) {
    return {
      again: await askRound(gw, call, k, name, args, rs.step, {
        inputRequests: rs.q as InputRequired['inputRequests'],
        state: rs.state,
      }),
    };
  }
  return { step: rs.step + 1, state: rs.state, responses: answers };
}
