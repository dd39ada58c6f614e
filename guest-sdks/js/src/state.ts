/**
 * Durable key-value state with exactly-once semantics (Halfmoon, SOSP '23).
 *
 * Values live under byte-string keys in named tables of the invocation's book. Every
 * operation is exactly-once across re-executions of the invocation: when the platform
 * runs a function again after a crash, with the same {@link context.invocationId}, each
 * {@link get} returns what it returned the first time and each {@link put} and
 * {@link delete} takes effect once. Operations are told apart by their order within the
 * invocation, so a function should make the same calls in the same order when it runs
 * again: decide from the input and from what the platform returns, not from clocks or
 * randomness.
 *
 * Each table has a protocol, chosen at deploy or in the node's configuration:
 * `read-optimized` (log-free reads), `write-optimized` (log-free writes), `symmetric`
 * (logs both), `unsafe` (no logging, no guarantee) or `auto`. The protocol changes the
 * cost of each operation, not the code that calls it.
 *
 * Operations are not transactions: two invocations that read and then write the same
 * key concurrently may lose an update.
 *
 * Table names are 1 to 64 of `a-z 0-9 - _`; keys are 1 to 1024 bytes; values are at
 * most 512 KiB. Anything else is refused with {@link InvalidArgument} or
 * {@link TooLarge}. Keys and values are `Uint8Array`s or strings (stored as UTF-8).
 *
 * ```ts
 * // Adds 1 to the visits of a page, once per invocation however often it runs.
 * const visits = (state.getI64('pages', 'index.html') ?? 0n) + 1n;
 * state.putI64('pages', 'index.html', visits);
 * ```
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/state';
import { type Bytes, fromHost, toBytes } from './bytes.js';
import { fromHostError } from './errors.js';
import { i64OfValue } from './ints.js';

/** The value of `key` in `table`, or `undefined` if the key is absent. */
export function get(table: string, key: Bytes): Uint8Array | undefined {
  const keyBytes = toBytes(key, 'key');
  try {
    const value = wit.get(table, keyBytes);
    return value === undefined ? undefined : fromHost(value);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Sets the value of `key` in `table` to `value`. */
export function put(table: string, key: Bytes, value: Bytes): void {
  const keyBytes = toBytes(key, 'key');
  const valueBytes = toBytes(value, 'value');
  try {
    wit.put(table, keyBytes, valueBytes);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Removes `key` from `table`; nothing happens if it is absent. */
function remove(table: string, key: Bytes): void {
  const keyBytes = toBytes(key, 'key');
  try {
    wit.delete(table, keyBytes);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}
export { remove as delete };

/**
 * The value of `key` in `table` read as an i64 in decimal text, as {@link putI64}
 * writes it, or `undefined` if the key is absent.
 *
 * A value that is not a decimal i64 (see {@link parseI64}) fails with
 * {@link InvalidArgument}.
 */
export function getI64(table: string, key: Bytes): bigint | undefined {
  const keyBytes = toBytes(key, 'key');
  const value = get(table, keyBytes);
  return value === undefined ? undefined : i64OfValue(table, keyBytes, value);
}

/**
 * Sets the value of `key` in `table` to the i64 `value` in decimal text, which
 * {@link getI64} reads back and the other SDKs read too. A `RangeError` if `value` is
 * not an i64.
 */
export function putI64(table: string, key: Bytes, value: bigint): void {
  if (typeof value !== 'bigint') {
    throw new TypeError(`value must be a bigint, not ${typeof value}`);
  }
  if (BigInt.asIntN(64, value) !== value) {
    throw new RangeError(`value ${value} is not an i64`);
  }
  put(table, key, String(value));
}
