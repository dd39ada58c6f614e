import { U64_MAX } from './bytes.js';

/**
 * A record's position in its book: seqnums are totally ordered across the whole book,
 * whatever the record's tags. A seqnum is a u64, so a `bigint`; `String(seqnum)` and
 * {@link parseU64} carry it in text payloads.
 */
export type SeqNum = bigint;

/** The smallest and the largest seqnum. */
export const SeqNum = {
  /** The smallest seqnum: `log.readNext(tag, SeqNum.MIN)` reads a stream's first record. */
  MIN: 0n as SeqNum,
  /** The largest seqnum, 2^64 - 1: `log.readPrev(tag, SeqNum.MAX)` reads a stream's last record. */
  MAX: U64_MAX as SeqNum,
} as const;
