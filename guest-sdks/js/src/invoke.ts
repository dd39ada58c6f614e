/**
 * Calls to other functions.
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/invoke';
import { type Bytes, fromHost, toBytes } from './bytes.js';
import { fromHostError } from './errors.js';

/**
 * Runs `func` on the same book with `input`, waits for it, and returns its output.
 *
 * The child sees everything this invocation has read or written on the log. When the
 * child's handler throws or the child traps, the call fails with {@link Failed}; an
 * unknown function fails with {@link NotFound}.
 *
 * The call is exactly-once: the child's invocation ID is derived from this invocation's
 * ID and the call's step, and its outcome is logged, so when the platform runs this
 * invocation again after a crash, the call returns the logged outcome instead of running
 * the child again.
 *
 * ```ts
 * // A function may call itself, under the name it was deployed as.
 * const output = invoke.call(context.functionName(), 'child');
 * ```
 */
export function call(func: string, input: Bytes): Uint8Array {
  const bytes = toBytes(input, 'input');
  try {
    return fromHost(wit.call(func, bytes));
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}
