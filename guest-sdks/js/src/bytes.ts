// Conversions between the values a function passes around and the ones the WIT
// interfaces take. Internal to the SDK.

/**
 * Bytes, or text that stands for its UTF-8 encoding: what the SDK's functions accept
 * as record data, keys, values and payloads.
 */
export type Bytes = Uint8Array | string;

const encoder = new TextEncoder();

/** The largest u64, 2^64 - 1. */
export const U64_MAX = 0xffff_ffff_ffff_ffffn;

/**
 * `data` as a `Uint8Array`: a string is encoded as UTF-8, any other view of bytes is
 * taken as it is (no copy). `what` names the argument in the `TypeError` for anything
 * else.
 */
export function toBytes(data: Bytes, what: string): Uint8Array {
  if (typeof data === 'string') {
    return encoder.encode(data);
  }
  // `instanceof` is not enough: the bytes a host call returns are made in the bindings'
  // own realm, where `Uint8Array` is another class.
  if (ArrayBuffer.isView(data)) {
    return data instanceof Uint8Array ? data : viewOf(data);
  }
  throw new TypeError(`${what} must be a Uint8Array or a string, not ${describe(data)}`);
}

/**
 * Bytes received from the host as a `Uint8Array` of this realm, so that `instanceof
 * Uint8Array` holds for them in the function's code. The view shares the memory.
 */
export function fromHost(bytes: Uint8Array): Uint8Array {
  return bytes instanceof Uint8Array ? bytes : viewOf(bytes);
}

/** A `Uint8Array` of this realm over the same bytes as `view`. */
export function viewOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * `value` checked to be a u64 (a `bigint` from 0 to 2^64 - 1), the type of seqnums,
 * tags and positions; `what` names it in the `TypeError` or `RangeError`.
 */
export function toU64(value: bigint, what: string): bigint {
  if (typeof value !== 'bigint') {
    throw new TypeError(`${what} must be a bigint, not ${describe(value)}`);
  }
  if (value < 0n || value > U64_MAX) {
    throw new RangeError(`${what} ${value} is not a u64`);
  }
  return value;
}

/**
 * `value`, a `number` or a `bigint`, as a u64 `bigint`: a `number` must be an integer
 * (`NaN`, infinities and fractions are refused), and either must be from 0 to
 * 2^64 - 1. `what` names it in the `TypeError` or `RangeError`.
 */
export function integerToU64(value: number | bigint, what: string): bigint {
  if (typeof value === 'bigint') {
    return toU64(value, what);
  }
  if (typeof value !== 'number') {
    throw new TypeError(`${what} must be a number or a bigint, not ${describe(value)}`);
  }
  // An integer `number`, however large, converts to a `bigint` exactly.
  const u64 = Number.isInteger(value) ? BigInt(value) : -1n;
  if (u64 < 0n || u64 > U64_MAX) {
    throw new RangeError(`${what} ${value} is not a u64`);
  }
  return u64;
}

/**
 * `value`, a `number` or a `bigint`, as an i64 `bigint`: a `number` must be an integer,
 * and either must be from -2^63 to 2^63 - 1. `what` names it in the `TypeError` or
 * `RangeError`.
 */
export function integerToI64(value: number | bigint, what: string): bigint {
  if (typeof value !== 'bigint' && typeof value !== 'number') {
    throw new TypeError(`${what} must be a number or a bigint, not ${describe(value)}`);
  }
  // `NaN`, infinities and fractions become a value out of range.
  const i64 = typeof value === 'bigint' ? value : Number.isInteger(value) ? BigInt(value) : undefined;
  if (i64 === undefined || BigInt.asIntN(64, i64) !== i64) {
    throw new RangeError(`${what} ${value} is not an i64`);
  }
  return i64;
}

/**
 * `value` checked to be a string (a name, a path, JSON text), so that the `TypeError`
 * for anything else names the argument (`what`) as the SDK's other checks do.
 */
export function toText(value: string, what: string): string {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string, not ${describe(value)}`);
  }
  return value;
}

/** A short description of a value of the wrong type, for a `TypeError`. */
export function describe(value: unknown): string {
  if (value === null) {
    return 'null';
  }
  switch (typeof value) {
    case 'object':
      return Object.prototype.toString.call(value).slice(8, -1);
    case 'string':
      return 'a string';
    case 'number':
    case 'bigint':
      return `the ${typeof value} ${String(value)}`;
    default:
      return typeof value;
  }
}
