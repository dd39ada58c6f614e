/**
 * Durable FIFO queues of the invocation's book (BokiQueue, Boki §5.3).
 *
 * A queue is named by a string (1 to 256 bytes) and split into shards: the messages one
 * invocation pushes go to one shard, in order, and each shard is FIFO. Every message is
 * popped exactly once, by one invocation, whatever crashes and re-executions happen.
 * Messages are `Uint8Array`s, or strings (pushed as UTF-8).
 *
 * ```ts
 * // A producer.
 * queues.push('thumbnails', JSON.stringify({ image: 'cat.png' }));
 *
 * // A consumer: one job, waiting up to a second for it.
 * const job = queues.pop('thumbnails', 1_000);
 * if (job !== undefined) resize(JSON.parse(new TextDecoder().decode(job)));
 *
 * // A consumer of up to eight jobs, with one record of the log.
 * for (const job of queues.popMany('thumbnails', 8, 1_000)) resize(JSON.parse(new TextDecoder().decode(job)));
 * ```
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/queues';
import { type Bytes, describe, fromHost, integerToU64, toBytes, toText } from './bytes.js';
import { fromHostError } from './errors.js';

/** Pushes `message` (at most 512 KiB, else {@link TooLarge}) to `queue`. */
export function push(queue: string, message: Bytes): void {
  toText(queue, 'queue');
  const bytes = toBytes(message, 'message');
  try {
    wit.push(queue, bytes);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Pops the oldest message of one of `queue`'s shards (the shard this invocation pushes
 * to first), waiting up to `timeoutMs` milliseconds (a `number` or a `bigint`, at most
 * the function's time limit; 0 does not wait) for one without spinning; `undefined` if
 * the queue stayed empty that long.
 *
 * Like the other calls it is synchronous: nothing else of the instance runs while it
 * waits.
 */
export function pop(queue: string, timeoutMs: number | bigint): Uint8Array | undefined {
  toText(queue, 'queue');
  const timeout = integerToU64(timeoutMs, 'timeoutMs');
  try {
    const message = wit.pop(queue, timeout);
    return message === undefined ? undefined : fromHost(message);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Pops up to `max` (1 to 100, else {@link InvalidArgument}) of the oldest messages of
 * one of `queue`'s shards, in order, with one record of the log where `max` pops would
 * log `max`: waits up to `timeoutMs` for the first as {@link pop} does, then takes what
 * that shard holds, up to `max`. An empty array if the queue stayed empty.
 */
export function popMany(queue: string, max: number, timeoutMs: number | bigint): Uint8Array[] {
  toText(queue, 'queue');
  if (typeof max !== 'number') {
    throw new TypeError(`max must be a number, not ${describe(max)}`);
  }
  if (!Number.isInteger(max) || max < 0 || max > 0xffff_ffff) {
    throw new RangeError(`max ${max} is not a u32`);
  }
  const timeout = integerToU64(timeoutMs, 'timeoutMs');
  try {
    // An array of this realm, as `fromHost` makes its bytes.
    return Array.from(wit.popMany(queue, max, timeout), fromHost);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}
