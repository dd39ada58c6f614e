/**
 * A counter kept as a replicated state machine on the book's log (Boki §5.4).
 *
 * Input `incr` or `incr N` adds 1 or N and returns the value as of that increment;
 * `get` returns the current value. The output is the value in decimal.
 *
 * The log is the ground truth: each increment is a record in the `counter` stream, and
 * the value as of a record is the sum of the increments up to and including it
 * (wrapping at 2^64, so replay never fails on a large sum). Replaying the whole stream
 * on every call would get slower as the log grows, and a function keeps no memory
 * between invocations, so the value is cached in the log instead: after a replay, the
 * reader attaches the value to the last record it replayed as aux data. The next reader
 * walks back from where it wants the value to the newest record carrying such a
 * snapshot, and replays forward only from there:
 *
 * ```text
 *   counter stream:   +1    +5    +2    +1    +3
 *   aux data:               6           9
 *                                       ^ walk back to here, replay +3, value 12,
 *                                         leave aux data 12 on the last record
 * ```
 *
 * Record data and aux data are both a u64 in 8 little-endian bytes. The same function
 * in Rust is `examples/counter`; both read and write the same records.
 */

import { log, parseU64, SeqNum, Tag, TallyError } from '@tally/sdk';

/** The stream of increments. */
const COUNTER = Tag.named('counter');

/** What the input asks for: add an amount, or read the current value. */
type Command = { incr: bigint } | 'get';

function parse(input: Uint8Array): Command {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
  } catch {
    throw new Error('the input is not UTF-8');
  }
  // Splitting on whitespace also tolerates a trailing newline from `echo`.
  const words = text.split(/\s+/).filter((word) => word !== '');
  if (words[0] === 'incr' && words.length === 1) {
    return { incr: 1n };
  }
  if (words[0] === 'incr' && words.length === 2) {
    const amount = words[1]!;
    try {
      return { incr: parseU64(amount) };
    } catch (cause) {
      throw new Error(`the amount ${JSON.stringify(amount)} is not a u64`, { cause });
    }
  }
  if (words[0] === 'get' && words.length === 1) {
    return 'get';
  }
  throw new Error('expected `incr`, `incr N` or `get`');
}

export function handle(input: Uint8Array): string {
  const command = parse(input);
  if (command === 'get') {
    return String(valueAt(SeqNum.MAX));
  }
  const seqnum = log.append([COUNTER], encode(command.incr));
  return String(valueAt(seqnum));
}

/** The counter's value as of `upto`: the sum of the increments at or before it. */
function valueAt(upto: SeqNum): bigint {
  const snapshot = newestSnapshot(upto);
  let value = snapshot?.value ?? 0n;
  // The seqnum to read from next, or undefined when there is none.
  let next: SeqNum | undefined = snapshot === undefined ? SeqNum.MIN : nextOf(snapshot.seqnum);
  let lastReplayed: SeqNum | undefined;
  while (next !== undefined) {
    const record = log.readNext(COUNTER, next);
    if (record === undefined || record.seqnum > upto) {
      break;
    }
    let amount: bigint;
    try {
      amount = decode(record.data);
    } catch (cause) {
      throw new Error(`reading increment ${record.seqnum}`, { cause });
    }
    value = BigInt.asUintN(64, value + amount);
    lastReplayed = record.seqnum;
    // Stopping at `upto` itself saves `incr` a read past its own record.
    next = nextOf(record.seqnum);
    if (next !== undefined && next > upto) {
      next = undefined;
    }
  }
  if (lastReplayed !== undefined) {
    // The snapshot is only a cache, so failing to leave one is not an error: the value
    // is right either way, and failing an `incr` whose increment is already in the log
    // would invite a retry that counts it twice.
    try {
      log.setAuxData(lastReplayed, encode(value));
    } catch (error) {
      if (!(error instanceof TallyError)) {
        throw error;
      }
    }
  }
  return value;
}

/**
 * Walks back from `upto` to the newest increment carrying a snapshot of the value, and
 * returns its seqnum and the value; undefined when no increment at or before `upto` has
 * one.
 */
function newestSnapshot(upto: SeqNum): { seqnum: SeqNum; value: bigint } | undefined {
  let max: SeqNum | undefined = upto;
  while (max !== undefined) {
    const record = log.readPrev(COUNTER, max);
    if (record === undefined) {
      break;
    }
    if (record.aux !== undefined) {
      try {
        return { seqnum: record.seqnum, value: decode(record.aux) };
      } catch (cause) {
        throw new Error(`reading the snapshot in ${record.seqnum}`, { cause });
      }
    }
    max = record.seqnum === SeqNum.MIN ? undefined : record.seqnum - 1n;
  }
  return undefined;
}

/** The seqnum after `seqnum`, or undefined after the last one. */
function nextOf(seqnum: SeqNum): SeqNum | undefined {
  return seqnum === SeqNum.MAX ? undefined : seqnum + 1n;
}

/** A u64 as 8 little-endian bytes. */
function encode(value: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return bytes;
}

/** Reads a u64 stored as 8 little-endian bytes. */
function decode(bytes: Uint8Array): bigint {
  if (bytes.length !== 8) {
    throw new Error(`expected 8 bytes, found ${bytes.length}`);
  }
  return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
}
