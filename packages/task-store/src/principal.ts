/** The principal's part of key names. */
import { createHash } from 'node:crypto';

/** Principals whose tag is kept (a map emptied when full: a gateway serves a few principals). */
const KEPT_TAGS = 1000;
const tags = new Map<string, string>();

/**
 * The hash tag of a principal in key names (`{p:<tag>}`): SHA-256 hex of the principal, so a key
 * never holds the principal (which can be long, `jwt:<iss>#<sub>`) and all of one principal's
 * keys share a Cluster slot. Kept per principal (a task's creation needs it twice), for at most
 * KEPT_TAGS principals at a time.
 */
export function principalTag(principal: string): string {
  let tag = tags.get(principal);
  if (tag === undefined) {
    tag = createHash('sha256').update(principal).digest('hex');
    if (tags.size >= KEPT_TAGS) tags.clear();
    tags.set(principal, tag);
  }
  return tag;
}
