/**
 * The TypeScript SDK 1.32 (`@modelcontextprotocol/sdk`, the 2025-11-25 generation) that
 * test/clients/typescript_sdk_client.mjs runs, installed by `npm ci --prefix tools/typescript-sdk`
 * (its own package.json and lockfile; `.ci/run` does it). `npm test` checks it for the files that
 * declare `// @needs typescript-sdk`. Plain Node, no dependencies.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const PACKAGE = join(ROOT, 'tools', 'typescript-sdk', 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json');
/** The version tools/typescript-sdk pins. */
export const TYPESCRIPT_SDK_VERSION = '1.32.2';

/** Why the pinned SDK cannot be used (not installed, another version), or undefined when it can. */
export function typescriptSdkProblem() {
  if (!existsSync(PACKAGE)) return '@modelcontextprotocol/sdk is not installed in tools/typescript-sdk';
  const { version } = JSON.parse(readFileSync(PACKAGE, 'utf8'));
  if (version !== TYPESCRIPT_SDK_VERSION)
    return `tools/typescript-sdk has @modelcontextprotocol/sdk ${version}, not ${TYPESCRIPT_SDK_VERSION}`;
  return undefined;
}
