import { U64_MAX } from './bytes.js';

/**
 * A tag selects a sub-stream of the book: every record carries a set of tags, and reads
 * name the one tag whose stream they walk. A tag is a u64, so a `bigint`.
 *
 * Tag 0 ({@link Tag.ALL}) is the whole book. Tags with the top bit (bit 63) set are
 * reserved for the platform: appending with one fails with
 * {@link InvalidArgument}.
 */
export type Tag = bigint;

const OFFSET_BASIS = 0xcbf2_9ce4_8422_2325n;
const PRIME = 0x0000_0100_0000_01b3n;
const RESERVED_BIT = 1n << 63n;

const encoder = new TextEncoder();

/** The whole book and named tags. */
export const Tag = {
  /**
   * The whole book: every record is in tag 0's stream. It is only for reading and
   * trimming; a record's own tags never include it.
   */
  ALL: 0n as Tag,

  /**
   * The tag for a name, so that functions agree on tags by name without a registry.
   *
   * The tag is the 64-bit FNV-1a hash of the name's UTF-8 bytes (offset basis
   * `0xcbf29ce484222325`, prime `0x100000001b3`: for each byte, xor it in, then
   * multiply, wrapping at 2^64), with the top bit cleared because it is reserved for the
   * platform, and 1 in place of 0 because 0 is {@link Tag.ALL}. Every SDK and the
   * gateway's `?tag=name` compute the same tags:
   *
   * | name       | tag (hex)            | tag (decimal)          |
   * |------------|----------------------|------------------------|
   * | `""`       | `0x4bf29ce484222325` | `5472609002491880229n` |
   * | `"a"`      | `0x2f63dc4c8601ec8c` | `3414815163700866188n` |
   * | `"orders"` | `0x00125d9250be8b4c` | `5169432582064972n`    |
   *
   * A lone surrogate in `name` is encoded as U+FFFD, as `TextEncoder` does. Computing
   * tags at the top level of a module costs nothing at run time: the build runs the top
   * level once and snapshots the result.
   *
   * ```ts
   * const ORDERS = Tag.named('orders'); // 5169432582064972n
   * ```
   */
  named(name: string): Tag {
    let hash = OFFSET_BASIS;
    for (const byte of encoder.encode(name)) {
      hash = ((hash ^ BigInt(byte)) * PRIME) & U64_MAX;
    }
    return tagOfHash(hash);
  },
} as const;

/** Makes a name's hash a tag a function may append with. Internal; exported for tests. */
export function tagOfHash(hash: bigint): Tag {
  const tag = hash & ~RESERVED_BIT & U64_MAX;
  return tag === 0n ? 1n : tag;
}
