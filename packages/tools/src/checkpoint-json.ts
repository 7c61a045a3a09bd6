/**
 * A checkpoint's stored form (D14): `JSON.stringify(value)` within `maxBytes` bytes of UTF-8
 * (CHECKPOINT_MAX_BYTES, default 64 KiB). Shared by the worker and `testContext`, so a unit test
 * refuses what a worker would.
 */

/** Thrown by `ctx.checkpoint` for a value that is not JSON or is too large. */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

/** The JSON text of `value`, or a `CheckpointError` saying why it cannot be a checkpoint. */
export function checkpointJson(value: unknown, maxBytes: number): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (e) {
    throw new CheckpointError(`Checkpoint is not JSON: ${(e as Error).message}`);
  }
  if (json === undefined) throw new CheckpointError('Checkpoint is not JSON: undefined or a function');
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes)
    throw new CheckpointError(
      `Checkpoint too large: ${bytes} bytes of JSON; the limit is ${maxBytes} bytes (CHECKPOINT_MAX_BYTES)`,
    );
  return json;
}
