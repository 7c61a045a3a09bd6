/**
 * The hold of a synchronous call by the request that waits for it (`renewHolder`): renewing
 * tells the reconciler the request is still here (a killed gateway stops renewing, and its call
 * is cancelled); the client closing the request cancels the call when it was the last holder
 * (C-01), except a call with an `Idempotency-Key`.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import type { Call, Gateway } from './context.js';
import { ErrorCode } from './errors.js';
import type { ProgressRelay } from './progress.js';

/** This request's hold on the synchronous call of one task. */
export class SyncHolder {
  /** True once the client closed the request (`disconnected` ran). */
  gone = false;
  private readonly renewEvery: number;

  private constructor(
    private readonly gw: Gateway,
    private readonly call: Call,
    private readonly taskId: string,
    private renewedAt: number,
    private holding: boolean,
  ) {
    this.renewEvery = Math.max(500, Math.floor(gw.config.worker.syncHolderTimeoutMs / 3));
  }

  /**
   * Holds the call (holders + 1). When Redis does not answer, the call is not held: it is
   * renewed as soon as Redis answers again (`renewIfDue`).
   */
  static async take(gw: Gateway, call: Call, taskId: string): Promise<SyncHolder> {
    // This request holds the call; renewing tells the reconciler it is still here (a killed
    // gateway stops renewing, and its call is cancelled).
    const renewedAt = Date.now();
    const holding = (await gw.store.renewHolder(taskId, 1).catch(() => -1)) > 0;
    return new SyncHolder(gw, call, taskId, renewedAt, holding);
  }

  /**
   * Renews the hold every third of SYNC_HOLDER_TIMEOUT_MS (at least 500 ms), or on every turn
   * while `storeAway` (Redis away: the hold is renewed at once when Redis is back).
   */
  async renewIfDue(storeAway: boolean): Promise<void> {
    // Shutting down: the hold no longer matters (the hand-off drops it), and a renewal could
    // wait a whole command timeout on a hung Redis.
    if (!this.gw.shutdown.aborted && (storeAway || Date.now() - this.renewedAt >= this.renewEvery)) {
      // A renewal that failed (Redis away) is tried again on the next turn, not a period later.
      if (
        await this.gw.store.renewHolder(this.taskId, 0).then(
          () => true,
          () => false,
        )
      )
        this.renewedAt = Date.now();
    }
  }

  /**
   * C-01: the client closed the request. Another request may hold the same call (a retry sent
   * twice): cancel only when this was the last holder (-1 = no longer a synchronous call: handed
   * off, only tasks/cancel ends it now). @returns the error the handler ends with (never sent):
   * `-32603` "Request cancelled by client disconnect".
   * @param started when the call started (ms since the epoch, for the log).
   */
  async disconnected(relay: ProgressRelay, toolName: string, started: number): Promise<ProtocolError> {
    const { store, log } = this.gw;
    const { call, taskId } = this;
    this.gone = true;
    relay.close();
    const left = this.holding ? await store.renewHolder(taskId, -1).catch(() => -1) : -1;
    this.holding = false;
    // With an Idempotency-Key the close may be a lost connection its client retries: the
    // call is left to a retry with the key, which holds it again; unheld, the reconciler
    // cancels it after SYNC_HOLDER_TIMEOUT_MS like a dead gateway's.
    const keyed = call.exchange.idempotency !== undefined;
    if (left === 0 && !keyed) {
      const r = await store.requestCancel(taskId, 'Cancelled: the client closed the request').catch(() => undefined);
      if (r?.code === 'cancelled') await store.releaseOutstanding(call.principal, taskId).catch(() => undefined);
    }
    log.info({ taskId, tool: toolName, holdersLeft: left, keyed, afterMs: Date.now() - started }, 'sync.disconnected');
    return new ProtocolError(ErrorCode.InternalError, 'Request cancelled by client disconnect');
  }

  /** Drops the hold, if still held, without waiting for Redis (the answer goes out at once). */
  release(): void {
    if (this.holding) void this.gw.store.renewHolder(this.taskId, -1).catch(() => 0);
  }
}
