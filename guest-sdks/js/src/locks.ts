/**
 * Locks of the invocation's book (BokiFlow, Boki §5.1).
 *
 * A lock is named by a string (1 to 256 bytes) and held by one invocation at a time. A
 * holder that crashes keeps it while the platform runs it again, and an invocation's
 * locks are released when it finishes, whatever its outcome, so a lock cannot be left
 * behind.
 *
 * ```ts
 * if (!locks.acquire(`doc:${id}`, 5_000)) throw new Error(`document ${id} is busy`);
 * try {
 *   edit(id);
 * } finally {
 *   locks.release(`doc:${id}`);
 * }
 * ```
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/locks';
import { integerToU64, toText } from './bytes.js';
import { fromHostError } from './errors.js';

/**
 * Acquires `lock` for this invocation, waiting up to `timeoutMs` milliseconds (a
 * `number` or a `bigint`, at most the function's time limit; 0 does not wait) while
 * another invocation holds it: `true` once acquired, `false` if the wait timed out.
 * Acquiring a lock this invocation holds is `true` at once.
 *
 * Like the other calls it is synchronous: nothing else of the instance runs while it
 * waits.
 */
export function acquire(lock: string, timeoutMs: number | bigint): boolean {
  toText(lock, 'lock');
  const timeout = integerToU64(timeoutMs, 'timeoutMs');
  try {
    return wit.acquire(lock, timeout);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Releases `lock`. A lock this invocation does not hold fails with
 * {@link InvalidArgument}.
 */
export function release(lock: string): void {
  toText(lock, 'lock');
  try {
    wit.release(lock);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}
