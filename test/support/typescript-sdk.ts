/**
 * The TypeScript SDK 1.32 client script (test/clients/typescript_sdk_client.mjs), which loads the
 * SDK from tools/typescript-sdk. A test file that calls `typescriptSdkScript()` declares
 * `// @needs typescript-sdk`, so `npm test` checks the install before anything runs.
 */
import { join } from 'node:path';
import { typescriptSdkProblem } from '../../scripts/typescript-sdk.mjs';
import { ROOT } from './cluster.js';

/** The client script's path; throws with the reason when the SDK is not installed. */
export function typescriptSdkScript(): string {
  const problem = typescriptSdkProblem();
  if (problem) throw new Error(`${problem}: run npm ci --prefix tools/typescript-sdk`);
  return join(ROOT, 'test', 'clients', 'typescript_sdk_client.mjs');
}
