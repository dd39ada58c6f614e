import { U64_MAX } from './bytes.js';
import { InvalidArgument } from './errors.js';
import { debugString, escapeAscii } from './text.js';

const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

const decoder = new TextDecoder();

/**
 * Parses a u64 in decimal, as Rust's `str::parse::<u64>` does, so that numbers in text
 * payloads mean the same in every SDK: ASCII digits with an optional leading `+`, no
 * spaces, no other base, from 0 to 2^64 - 1.
 *
 * Throws a `SyntaxError` for text that is not a number and a `RangeError` for a number
 * out of range, with Rust's messages (`invalid digit found in string`, ...).
 *
 * ```ts
 * const from: SeqNum = parseU64('42'); // 42n
 * ```
 */
export function parseU64(text: string): bigint {
  return parseDecimal(text, false, 0n, U64_MAX);
}

/**
 * Parses an i64 in decimal, as Rust's `str::parse::<i64>` does: ASCII digits with an
 * optional leading `+` or `-`, from -2^63 to 2^63 - 1. {@link state.putI64} writes
 * numbers this way and {@link state.getI64} reads them back.
 *
 * Throws a `SyntaxError` or a `RangeError`, like {@link parseU64}.
 */
export function parseI64(text: string): bigint {
  return parseDecimal(text, true, I64_MIN, I64_MAX);
}

function parseDecimal(text: string, signed: boolean, min: bigint, max: bigint): bigint {
  if (typeof text !== 'string') {
    throw new TypeError(`expected a string, not ${typeof text}`);
  }
  if (text === '') {
    throw new SyntaxError('cannot parse integer from empty string');
  }
  let digits = text;
  let negative = false;
  const sign = text[0];
  if (sign === '+' || (sign === '-' && signed)) {
    digits = text.slice(1);
    negative = sign === '-';
  }
  // A lone sign is an invalid digit in Rust too.
  if (digits === '' || !/^[0-9]+$/.test(digits)) {
    throw new SyntaxError('invalid digit found in string');
  }
  const value = negative ? -BigInt(digits) : BigInt(digits);
  if (value > max) {
    throw new RangeError('number too large to fit in target type');
  }
  if (value < min) {
    throw new RangeError('number too small to fit in target type');
  }
  return value;
}

/**
 * Reads a value written by `state.putI64`; `table` and `key` only name it in the error,
 * which is the Rust SDK's. Internal; exported for tests.
 */
export function i64OfValue(table: string, key: Uint8Array, value: Uint8Array): bigint {
  // A decimal i64 is ASCII, so bytes that are not cannot be one.
  if (value.every((byte) => byte < 0x80)) {
    try {
      return parseI64(decoder.decode(value));
    } catch {
      // Reported below.
    }
  }
  throw new InvalidArgument(
    `the value of key "${escapeAscii(key)}" in table ${debugString(table)} is not a decimal i64: "${preview(value)}"`,
  );
}

/** The start of a value, escaped, for an error message: a value may be up to 512 KiB. */
function preview(value: Uint8Array): string {
  const PREVIEW_BYTES_MAX = 32;
  return value.length > PREVIEW_BYTES_MAX
    ? `${escapeAscii(value.subarray(0, PREVIEW_BYTES_MAX))}...`
    : escapeAscii(value);
}
