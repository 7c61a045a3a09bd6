/**
 * What the end of an `/mcp` exchange gives back (mcp-route.ts runs it when the response closes):
 * a creation slot reserved for a task the request did not create, with its `Idempotency-Key`,
 * and a task whose handle never reached its client (D4).
 */
import type { ServerResponse } from 'node:http';
import type { Exchange, Gateway } from './context.js';
import { undoSlot } from './creation-slot.js';

/**
 * Runs once `res` (the exchange's response) has closed: gives back an unused reservation
 * (creation-slot.ts) and the key claimed with it (idempotency.ts), and cancels a created task
 * whose handle was not delivered to a client that sent no `Idempotency-Key` (D4). Fire and
 * forget: Redis failures are swallowed.
 */
export function releaseOnClose(gw: Gateway, exchange: Exchange, principal: string, res: ServerResponse): void {
  // A slot reserved for a task this request did not create (an error, a pre-task
  // question) is given back.
  const r = exchange.reservation;
  if (r && !r.used) {
    void undoSlot(gw, principal, r.taskId, r.created !== undefined);
    // Its Idempotency-Key too: it must never name a task that was not created.
    if (exchange.idempotency)
      gw.store.idempotency.release(principal, exchange.idempotency.key, r.taskId).catch(() => undefined);
  }
  // D4: a client that vanished before the handle reached it cannot know the task —
  // unless it sent an Idempotency-Key: its retry finds the task (idempotency.ts).
  const id = exchange.createdTaskId;
  if (id && !res.writableFinished && !exchange.idempotency) {
    gw.log.info({ taskId: id }, 'task.handle_undelivered');
    gw.store
      .requestCancel(id, 'Cancelled: the task handle could not be delivered')
      .then((o) => (o.code === 'cancelled' ? gw.store.releaseOutstanding(principal, id) : undefined))
      .catch(() => undefined);
  }
}
