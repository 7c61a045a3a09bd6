/**
 * The Python MCP clients' interpreter (issue 19 §8): tools/python/.venv, set up by
 * scripts/python-clients.mjs. A test file that calls `pythonClientsPython()` declares
 * `// @needs python-clients`, so `npm test` checks the venv before anything runs.
 */
import { PYTHON, pythonClientsProblem } from '../../scripts/python-clients.mjs';

/** The venv's `python`; throws with the reason when the venv cannot run the clients. */
export function pythonClientsPython(): string {
  const problem = pythonClientsProblem();
  if (problem) throw new Error(`${problem}: run node scripts/python-clients.mjs`);
  return PYTHON;
}
