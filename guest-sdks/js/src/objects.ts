/**
 * Durable JSON objects of the invocation's book, with transactions across them
 * (BokiStore, Boki §5.2).
 *
 * An object is named by a string (1 to 256 bytes) and holds one JSON value, `null` until
 * it is first written. A place in it is a JSON pointer (RFC 6901): `''` is the whole
 * object, `'/a/0/b~1c'` is field `b/c` of element 0 of field `a`. Writes make missing
 * parent objects. Values go in and out as JSON text ({@link get}, {@link set}, ...) or
 * as JavaScript values through `JSON` ({@link getJson}, {@link setJson},
 * {@link pushJson}).
 *
 * Every call is exactly-once across re-executions of the invocation, like {@link state}:
 * a read returns what it returned the first time, a write takes effect once. So, as
 * there, a function should make the same calls in the same order when it runs again.
 *
 * Outside a transaction, a read sees the object as of the invocation's last logged step
 * (its own writes included), and each write is logged on its own. Inside one (between
 * {@link begin} and {@link commit}, or in the body of {@link transaction}), reads see
 * one snapshot of every object of the book, taken at `begin`, with the transaction's
 * own writes, and writes are buffered until the commit logs them in one record.
 * Transactions are serializable: one commits exactly when no object it read was written
 * by someone else between its `begin` and its commit; otherwise nothing of it takes
 * effect and it can be run again. Objects written but not read never conflict:
 * {@link increment} and {@link push} apply to whatever the field holds when the record
 * is applied.
 *
 * An operation that does not fit the object as the caller sees it (incrementing a
 * string) fails with {@link InvalidArgument}; one that stops fitting because of a
 * concurrent write does nothing.
 *
 * ```ts
 * // Moves an amount between two accounts, or neither, retrying on a conflict.
 * objects.transaction(() => {
 *   const from = objects.getJson(`account:${payer}`, '/balance') as number;
 *   if (from < amount) throw new Error('insufficient funds');
 *   objects.setJson(`account:${payer}`, '/balance', from - amount);
 *   objects.increment(`account:${payee}`, '/balance', amount);
 * });
 * ```
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/objects';
import { describe, integerToI64, toText } from './bytes.js';
import { fromHostError, TransactionConflict } from './errors.js';

/** A JSON value as `JSON.parse` makes it: what {@link getJson} returns. */
export type Json = null | boolean | number | string | Json[] | { [field: string]: Json };

/** How {@link begin} starts a transaction. */
export interface BeginOptions {
  /**
   * Whether the transaction only reads: a read-only one refuses writes (with
   * {@link InvalidArgument}) and always commits. `false` when absent.
   */
  readonly readOnly?: boolean;
}

/** How {@link transaction} runs its body. */
export interface TransactionOptions extends BeginOptions {
  /**
   * How many times to run the body again after a conflict, at most: a non-negative
   * integer, {@link DEFAULT_RETRIES} when absent. 0 runs it once.
   */
  readonly retries?: number;
}

/** The retries of {@link transaction} when its options do not say. */
export const DEFAULT_RETRIES = 10;

/**
 * The JSON text at `path` of `object`, or `undefined` if nothing is there. A whole
 * object (`path` `''`) that holds `null`, as one never written does, is `undefined`
 * too; a field that holds `null` is `'null'`.
 *
 * ```ts
 * const visits = BigInt(objects.get('stats', '/visits') ?? '0');  // an exact integer
 * ```
 */
export function get(object: string, path: string): string | undefined {
  place(object, path);
  try {
    return wit.get(object, path);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Sets the value at `path` of `object` to `json`, a JSON text (`'{}'` and `'[]'` make an
 * empty object or array). Text that is not JSON fails with {@link InvalidArgument}.
 */
export function set(object: string, path: string, json: string): void {
  place(object, path);
  toText(json, 'json');
  try {
    wit.set(object, path, json);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Adds `by` (a non-negative i64, a `number` or a `bigint`; 1 when absent) to the number
 * at `path` of `object`, taken as 0 when missing; integers saturate at the end of the
 * i64 range. A field that holds something else than a number fails with
 * {@link InvalidArgument}.
 *
 * A negative `by` is a `RangeError` for now: the engine's bindings (componentize-js
 * 0.23) abort the instance on any negative WIT `s64` argument
 * (bytecodealliance/ComponentizeJS#343), so the SDK refuses it before they see it. To
 * subtract, read and {@link set} the field in a {@link transaction}.
 *
 * Inside a transaction an increment does not read the field, so it never makes the
 * transaction conflict: it applies to whatever the field holds when the transaction's
 * record is applied.
 */
export function increment(object: string, path: string, by: number | bigint = 1): void {
  place(object, path);
  const amount = integerToI64(by, 'by');
  if (amount < 0n) {
    // Remove once `tally build` gets negative s64 arguments past componentize-js (see above).
    throw new RangeError(
      `by ${by} is negative, which the JavaScript engine's bindings cannot pass to the platform yet (bytecodealliance/ComponentizeJS#343)`,
    );
  }
  try {
    wit.increment(object, path, amount);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Appends `json`, a JSON text, to the array at `path` of `object` (an empty one when
 * missing). Like {@link increment}, it does not read the array, so it never makes a
 * transaction conflict.
 */
export function push(object: string, path: string, json: string): void {
  place(object, path);
  toText(json, 'json');
  try {
    wit.push(object, path, json);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Removes the field or array element at `path` of `object`; `''` empties the object. */
export function remove(object: string, path: string): void {
  place(object, path);
  try {
    wit.remove(object, path);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Sets the value at `path` of `object` to an empty JSON object, `{}`. */
export function makeObject(object: string, path: string): void {
  set(object, path, '{}');
}

/** Sets the value at `path` of `object` to an empty JSON array, `[]`. */
export function makeArray(object: string, path: string): void {
  set(object, path, '[]');
}

/**
 * The JSON pointer to field or element `tokens[0]`, then `tokens[1]` of that, and so
 * on: a string is a field name, escaped as RFC 6901 says (`~` as `~0`, `/` as `~1`), a
 * number an array index (a non-negative integer). No tokens is `''`, the whole object.
 *
 * ```ts
 * objects.pointer('items', 0, 'a/b~c');  // '/items/0/a~1b~0c'
 * ```
 */
export function pointer(...tokens: (string | number)[]): string {
  return tokens
    .map((token) => {
      if (typeof token === 'string') {
        return `/${token.replaceAll('~', '~0').replaceAll('/', '~1')}`;
      }
      if (typeof token !== 'number') {
        throw new TypeError(`a path token must be a string or a number, not ${describe(token)}`);
      }
      if (!Number.isSafeInteger(token) || token < 0) {
        throw new RangeError(`array index ${token} is not a non-negative integer`);
      }
      return `/${token}`;
    })
    .join('');
}

/**
 * The value at `path` of `object` as `JSON.parse` reads it, or `undefined` if nothing is
 * there (as for {@link get}, a whole object that holds `null` too). Numbers are JavaScript numbers, so an integer beyond 2^53 (a counter near the
 * end of the i64 range) loses precision: read such a field with {@link get} and
 * `BigInt`.
 */
export function getJson(object: string, path: string): Json | undefined {
  const json = get(object, path);
  return json === undefined ? undefined : (JSON.parse(json) as Json);
}

/**
 * Sets the value at `path` of `object` to `value` as `JSON.stringify` writes it. A
 * value that has no JSON text (`undefined`, a function, a symbol) is a `TypeError`, as
 * is a `bigint` (`JSON.stringify`'s own).
 */
export function setJson(object: string, path: string, value: unknown): void {
  set(object, path, jsonOf(value));
}

/** Appends `value`, as `JSON.stringify` writes it, to the array at `path` of `object`. */
export function pushJson(object: string, path: string, value: unknown): void {
  push(object, path, jsonOf(value));
}

/**
 * Begins a transaction: until {@link commit} or {@link abort}, reads see one snapshot of
 * every object of the book and writes are buffered. An invocation has one transaction
 * at a time. {@link transaction} runs a body in one, with the commit, the retries and
 * the abort on an error done for it.
 */
export function begin(options: BeginOptions = {}): void {
  const readOnly = readOnlyOf(options);
  try {
    wit.begin(readOnly);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Ends the transaction: `true` if it committed (its writes took effect, in one record),
 * `false` if it conflicted (none did; run it again to retry). A read-only transaction
 * always commits.
 */
export function commit(): boolean {
  try {
    return wit.commit();
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Drops the transaction: none of its writes take effect. */
export function abort(): void {
  try {
    wit.abort();
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Runs `body` in a transaction and returns what it returns once the transaction
 * commits. While the commit conflicts, runs `body` again in a new transaction, up to
 * `retries` more times ({@link DEFAULT_RETRIES} by default), then throws
 * {@link TransactionConflict}. When `body` throws, the transaction is aborted (none of
 * its writes take effect) and the error passes on, unretried.
 *
 * `body` should decide from what it reads, as each run sees a newer snapshot, and it
 * must be synchronous (the platform's calls are): one that returns a promise is
 * aborted, and that is a `TypeError`.
 *
 * ```ts
 * const seat = objects.transaction(() => {
 *   const free = objects.getJson('flight:TL17', '/free') as number[];
 *   if (free.length === 0) return undefined;
 *   objects.remove('flight:TL17', '/free/0');
 *   objects.setJson('flight:TL17', `/taken/${free[0]}`, passenger);
 *   return free[0];
 * }, { retries: 3 });
 * ```
 */
export function transaction<T>(body: () => T, options: TransactionOptions = {}): T {
  if (typeof body !== 'function') {
    throw new TypeError(`body must be a function, not ${describe(body)}`);
  }
  const readOnly = readOnlyOf(options);
  const retries = retriesOf(options);
  for (let attempt = 1; ; attempt++) {
    begin({ readOnly });
    let result: T;
    try {
      result = body();
    } catch (thrown) {
      abortAfterError();
      throw thrown;
    }
    if (isThenable(result)) {
      abortAfterError();
      throw new TypeError('the body of a transaction must be synchronous, but it returned a promise');
    }
    if (commit()) {
      return result;
    }
    if (attempt > retries) {
      throw new TransactionConflict(attempt);
    }
  }
}

/**
 * Aborts the transaction of a body that failed. An error of the abort itself is dropped:
 * the body's error is the one the caller needs, and the abort may fail because of it
 * (the body ended the transaction itself, or the log became unavailable).
 */
function abortAfterError(): void {
  try {
    wit.abort();
  } catch {
    // See above.
  }
}

/** Checks the names of a place before the host sees them. */
function place(object: string, path: string): void {
  toText(object, 'object');
  toText(path, 'path');
}

function jsonOf(value: unknown): string {
  const json = JSON.stringify(value);
  if (typeof json !== 'string') {
    throw new TypeError(`value has no JSON text: it is ${describe(value)}`);
  }
  return json;
}

function readOnlyOf(options: BeginOptions): boolean {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options must be an object, not ${describe(options)}`);
  }
  const readOnly = options.readOnly ?? false;
  if (typeof readOnly !== 'boolean') {
    throw new TypeError(`readOnly must be a boolean, not ${describe(readOnly)}`);
  }
  return readOnly;
}

function retriesOf(options: TransactionOptions): number {
  const retries = options.retries ?? DEFAULT_RETRIES;
  if (typeof retries !== 'number') {
    throw new TypeError(`retries must be a number, not ${describe(retries)}`);
  }
  if (!Number.isSafeInteger(retries) || retries < 0) {
    throw new RangeError(`retries ${retries} is not a non-negative integer`);
  }
  return retries;
}

function isThenable(value: unknown): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
