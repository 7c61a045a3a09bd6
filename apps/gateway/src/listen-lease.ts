/**
 * A principal's listen-stream lease (limits.ts, `listen_streams`): each open task listen stream
 * holds one, counted across every gateway, renewed with each keep-alive, so a dead gateway's
 * streams stop counting after the lease's TTL.
 */
import type { FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { GatewayDeps } from './context.js';
import { sendRefusal } from './limits.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';

/** One listen stream's place in its principal's count of open listen streams (on all gateways). */
export class ListenLease {
  private constructor(
    private readonly store: GatewayDeps['store'],
    private readonly principal: string,
    private readonly leaseId: string,
    /** Most listen streams of one principal (MAX_LISTEN_STREAMS_PER_PRINCIPAL). */
    private readonly max: number,
    /** Lease lifetime (ms): three keep-alive periods. */
    private readonly ttlMs: number,
  ) {}

  /**
   * Takes a lease for one more listen stream of `principal`.
   * @returns the lease; or, when none was taken, `refused`: the reply already sent, HTTP 503
   * `-32603` "Task store unavailable" (Redis away) or HTTP 429 `-31429` (the principal holds `max`
   * streams; `Retry-After` = the seconds until the earliest of its leases ends unless renewed:
   * at most the lease TTL, less when a gateway that held streams died a while ago). It is
   * wrapped so that it is not awaited here: a reply is thenable; the caller returns it, and its
   * promise ends once the reply is sent.
   */
  static async acquire(
    deps: Pick<GatewayDeps, 'config' | 'log' | 'store'>,
    reply: FastifyReply,
    principal: string,
    subscriptionId: string | number,
  ): Promise<ListenLease | { refused: FastifyReply }> {
    const { config, log, store } = deps;
    // One of the principal's listen streams, counted across every gateway (a lease renewed with
    // each keep-alive, so a dead gateway's streams stop counting after LEASE_TTL).
    const leaseId = randomUUID();
    const max = config.limits.listenStreamsPerPrincipal;
    const leaseTtl = config.sync.keepAliveMs * 3;
    let held: number;
    try {
      held = await store.acquireListenLease(principal, leaseId, max, leaseTtl);
    } catch {
      return { refused: replyStoreUnavailable(reply, subscriptionId) };
    }
    if (held < 0) {
      log.info({ principal, max }, 'listen.refused_principal_limit');
      return {
        refused: sendRefusal(reply, subscriptionId, {
          limit: 'listen_streams',
          max,
          retryAfterS: Math.ceil(-held / 1000),
        }),
      };
    }
    return new ListenLease(store, principal, leaseId, max, leaseTtl);
  }

  /** Renews the lease (with each keep-alive); a failure is ignored (the next keep-alive retries). */
  renew(): void {
    this.store.acquireListenLease(this.principal, this.leaseId, this.max, this.ttlMs).catch(() => undefined);
  }

  /** Gives the lease back; never rejects. */
  release() {
    return this.store.releaseListenLease(this.principal, this.leaseId).catch(() => undefined);
  }
}
