/**
 * The book's shared log: the LogBook API of Boki (§3).
 *
 * Every invocation is bound to one book, and these calls act on it; a function never
 * names a book, so it cannot read or write another one. Seqnums are totally ordered
 * across the book; a {@link Tag} selects a sub-stream of it, and {@link Tag.ALL} is the
 * whole book.
 *
 * ```text
 *   tag 0 (ALL):  1   2   3   4   5   6   7        every record, by seqnum
 *   tag "a":      1       3           6            records that carry "a"
 *   tag "b":          2   3       5                records that carry "b"
 *                             ^
 *   readNext(a, 4n) = 6     readPrev(b, 4n) = 3     checkTail(a) = 6
 * ```
 *
 * Seqnums and tags are `bigint`s; data is a `Uint8Array` or a string (stored as UTF-8).
 * A call the platform refuses throws a {@link TallyError}.
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/log';
import { type Bytes, fromHost, toBytes, toU64 } from './bytes.js';
import { fromHostError } from './errors.js';
import type { SeqNum } from './seqnum.js';
import type { Tag } from './tag.js';

/** A record read from the log. */
export interface LogRecord {
  /** The record's position in the book. */
  readonly seqnum: SeqNum;
  /** The tags the record was appended with, sorted, without {@link Tag.ALL}. */
  readonly tags: readonly Tag[];
  /** The record's payload, as appended. */
  readonly data: Uint8Array;
  /**
   * Data attached later by {@link setAuxData}, if the node that served the read has it.
   * It is a cache: it may be missing even after it was set.
   */
  readonly aux: Uint8Array | undefined;
}

/**
 * Appends a record with `data` to the streams of `tags`, and returns its seqnum.
 *
 * With no tags the record is only in the whole book's stream. Tags with the top bit set
 * are refused with {@link InvalidArgument}.
 *
 * ```ts
 * const seqnum = log.append([Tag.named('orders')], 'order 1');
 * ```
 */
export function append(tags: readonly Tag[], data: Bytes): SeqNum {
  const numbers = tagNumbers(tags);
  const bytes = toBytes(data, 'data');
  try {
    return wit.append(numbers, bytes);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Appends like {@link append}, but only if the record becomes entry number `condPos`
 * (counting from 0) of `condTag`'s stream.
 *
 * When another record holds that position, the append fails with {@link Conflict},
 * whose `holder` is that record's seqnum unless it has been trimmed since. This is the
 * building block for exactly-once steps and log-based locks; `condTag` must not be
 * {@link Tag.ALL}.
 */
export function condAppend(tags: readonly Tag[], data: Bytes, condTag: Tag, condPos: bigint): SeqNum {
  const numbers = tagNumbers(tags);
  const bytes = toBytes(data, 'data');
  toU64(condTag, 'condTag');
  toU64(condPos, 'condPos');
  try {
    return wit.condAppend(numbers, bytes, condTag, condPos);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Reads the first record of `tag`'s stream at or after `min`, or `undefined` if there
 * is none yet. Reading a stream forward continues from `record.seqnum + 1n`.
 */
export function readNext(tag: Tag, min: SeqNum): LogRecord | undefined {
  toU64(tag, 'tag');
  toU64(min, 'min');
  try {
    return fromWit(wit.readNext(tag, min));
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Reads the last record of `tag`'s stream at or before `max`, or `undefined` if there
 * is none. Reading a stream backward continues from `record.seqnum - 1n` (while the
 * seqnum is above 0).
 */
export function readPrev(tag: Tag, max: SeqNum): LogRecord | undefined {
  toU64(tag, 'tag');
  toU64(max, 'max');
  try {
    return fromWit(wit.readPrev(tag, max));
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Reads the last record of `tag`'s stream, or `undefined` if the stream is empty. */
export function checkTail(tag: Tag): LogRecord | undefined {
  toU64(tag, 'tag');
  try {
    return fromWit(wit.checkTail(tag));
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Removes the records of `tag`'s stream before `seqnum`; with {@link Tag.ALL}, the
 * records of every stream before `seqnum`.
 */
export function trim(tag: Tag, seqnum: SeqNum): void {
  toU64(tag, 'tag');
  toU64(seqnum, 'seqnum');
  try {
    wit.trim(tag, seqnum);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/**
 * Attaches `data` to the record `seqnum` as its aux data, a best-effort cache that
 * later reads may return in {@link LogRecord.aux} (Boki §3).
 *
 * The typical use is a snapshot of a state machine's value as of this record, so that
 * the next reader replays the log from here instead of from the start (Boki §5.4).
 */
export function setAuxData(seqnum: SeqNum, data: Bytes): void {
  toU64(seqnum, 'seqnum');
  const bytes = toBytes(data, 'data');
  try {
    wit.setAuxData(seqnum, bytes);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

function tagNumbers(tags: readonly Tag[]): bigint[] {
  if (!Array.isArray(tags)) {
    throw new TypeError('tags must be an array of bigints');
  }
  return tags.map((tag) => toU64(tag, 'tag'));
}

function fromWit(record: wit.LogRecord | undefined): LogRecord | undefined {
  if (record === undefined) {
    return undefined;
  }
  return {
    seqnum: record.seqnum,
    tags: Array.from(record.tags),
    data: fromHost(record.data),
    aux: record.auxData === undefined ? undefined : fromHost(record.auxData),
  };
}
