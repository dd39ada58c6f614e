/**
 * What the current invocation is, durable sleeps, and promises the outside world
 * completes.
 *
 * These are host calls, so they work inside a handler, not at the top level of a
 * module (which runs at build time).
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/context';
import { fromHost, integerToU64, toText } from './bytes.js';
import { fromHostError } from './errors.js';

/**
 * The invocation's ID. It stays the same when the platform runs the invocation again,
 * so it can key work that must happen once.
 */
export function invocationId(): string {
  return wit.invocationId();
}

/** The ID of the book the invocation is bound to, which every {@link log} call acts on. */
export function bookId(): bigint {
  return wit.bookId();
}

/**
 * Which execution of the invocation this is: 1 for the first, then 2, 3, ... when the
 * platform runs it again.
 */
export function attempt(): number {
  return wit.attempt();
}

/** The name the function was deployed under. */
export function functionName(): string {
  return wit.functionName();
}

/**
 * The key the invocation was addressed to (`?key=K` on the invoke request), or
 * `undefined` if it has none. A keyed invocation runs alone among the function's
 * invocations with that key (unless it was asked with `&shared=true`), so the key can
 * name what the invocation owns while it runs: a shopping cart, an account, a document.
 *
 * ```ts
 * const cart = context.key() ?? 'anonymous';
 * objects.push(`cart:${cart}`, '/items', JSON.stringify(item));
 * ```
 */
export function key(): string | undefined {
  return wit.key();
}

/**
 * Sleeps durably for `ms` milliseconds (a `number` or a `bigint`, at most a year).
 *
 * The wake time is logged, so when the platform runs the invocation again it wakes at
 * the same time, and the sleep may outlast the function's time limit and restarts of
 * the node. A short sleep waits in place. A long one suspends the invocation: this
 * execution ends there (the call does not return, nothing is held while it sleeps, and
 * a synchronous caller is answered HTTP 202 with the invocation's {@link invocationId}),
 * and at the wake time the platform runs the invocation again, which replays everything
 * before this call, and the call then returns. As for every durable call, the
 * invocation should reach it by the same calls in the same order when it runs again.
 *
 * The call is synchronous, like the platform's others: nothing else of the instance
 * runs while it sleeps (timers included). Unlike `setTimeout`, it is durable.
 *
 * An `ms` that is not a u64 is a `TypeError` or `RangeError`; a sleep longer than a year
 * fails with {@link InvalidArgument}.
 *
 * ```ts
 * context.sleep(60_000); // a minute, however often the invocation runs
 * ```
 */
export function sleep(ms: number | bigint): void {
  const duration = integerToU64(ms, 'ms');
  try {
    wit.sleep(duration);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Sleeps durably until `time`, a `Date` or milliseconds since the Unix epoch (a `number`
 * or a `bigint`, as `Date.now()` gives), like {@link sleep}. A time in the past
 * (a `Date` before the epoch too) returns at once; one more than a year ahead fails with
 * {@link InvalidArgument}.
 *
 * ```ts
 * context.sleepUntil(new Date('2030-01-01T00:00:00Z'));
 * ```
 */
export function sleepUntil(time: Date | number | bigint): void {
  const unixMs = time instanceof Date ? dateToUnixMs(time) : integerToU64(time, 'time');
  try {
    wit.sleepUntil(unixMs);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Creates a promise that the outside world completes once, with
 * `POST /v1/promises/{id}?book=B` and the value as the body, and returns its ID (the same
 * when the platform runs the invocation again): hand it out (store it, append it to the
 * log, pass it to a call), then {@link promiseAwait} it.
 *
 * ```ts
 * const promise = context.promiseCreate();
 * log.append([Tag.named('approvals')], promise);  // where the approver finds it
 * const decision = context.promiseAwait(promise);
 * ```
 */
export function promiseCreate(): string {
  try {
    return wit.promiseCreate();
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * The value of promise `id` of this book, waiting durably for it as {@link sleep} does:
 * the promise may be completed before, during or after the wait, and a long wait
 * suspends the invocation until the completion (or the timeout) runs it again, which
 * replays everything before this call. What the await got is logged, so a re-execution
 * of the invocation gets the same.
 *
 * With `timeoutMs` (milliseconds, a `number` or a `bigint`), fails with {@link Timeout}
 * once that long has passed without a completion (a later completion is accepted and
 * changes nothing); without it, waits for as long as it takes. A promise this book
 * never created fails with {@link NotFound}, an `id` that is no promise ID with
 * {@link InvalidArgument}. An `id` that is not a string is a `TypeError`, and a
 * `timeoutMs` that is not a u64 a `TypeError` or `RangeError`.
 *
 * Like the other calls it is synchronous: nothing else of the instance runs while it
 * waits.
 *
 * ```ts
 * try {
 *   const decision = context.promiseAwait(promise, 7 * 24 * 3600 * 1000);  // a week
 * } catch (error) {
 *   if (!(error instanceof Timeout)) throw error;
 * }
 * ```
 */
export function promiseAwait(id: string, timeoutMs?: number | bigint): Uint8Array {
  toText(id, 'id');
  const timeout = timeoutMs === undefined ? undefined : integerToU64(timeoutMs, 'timeoutMs');
  try {
    return fromHost(wit.promiseAwait(id, timeout));
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** A `Date` as a u64 of milliseconds since the epoch; one before the epoch is 0, as in Rust. */
function dateToUnixMs(date: Date): bigint {
  const ms = date.getTime();
  if (Number.isNaN(ms)) {
    throw new RangeError('time is an invalid Date');
  }
  return ms < 0 ? 0n : BigInt(ms);
}
