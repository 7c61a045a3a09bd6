/** The principal's part of key names. */
import { createHash } from 'node:crypto';

/**
 * The hash tag of a principal in key names (`{p:<tag>}`): SHA-256 hex of the principal, so a key
 * never holds the principal (which can be long, `jwt:<iss>#<sub>`) and all of one principal's
 * keys share a Cluster slot.
 */
export function principalTag(principal: string): string {
  return createHash('sha256').update(principal).digest('hex');
}
