import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgument } from '../src/errors.js';
import { i64OfValue, parseI64, parseU64 } from '../src/ints.js';

const U64_MAX = 18446744073709551615n;
const I64_MIN = -9223372036854775808n;
const I64_MAX = 9223372036854775807n;

test('parseU64 reads what Rust reads', () => {
  for (const [text, value] of [['0', 0n], ['42', 42n], ['+7', 7n], ['007', 7n], ['18446744073709551615', U64_MAX]] as const) {
    assert.equal(parseU64(text), value, text);
  }
});

test('parseU64 refuses what Rust refuses, with its messages', () => {
  const refused = (text: string, type: ErrorConstructor, message: string) =>
    assert.throws(() => parseU64(text), (error: Error) => error instanceof type && error.message === message, text);
  refused('', SyntaxError, 'cannot parse integer from empty string');
  for (const text of ['-1', '-0', '+', '-', ' 1', '1 ', '1.5', '0x10', '1e3', '١']) {
    refused(text, SyntaxError, 'invalid digit found in string');
  }
  refused('18446744073709551616', RangeError, 'number too large to fit in target type');
});

test('parseI64 reads what Rust reads', () => {
  for (const [text, value] of [['0', 0n], ['-0', 0n], ['+1', 1n], ['-1', -1n], [String(I64_MIN), I64_MIN], [String(I64_MAX), I64_MAX]] as const) {
    assert.equal(parseI64(text), value, text);
  }
});

test('parseI64 refuses what Rust refuses, with its messages', () => {
  assert.throws(() => parseI64('x'), { name: 'SyntaxError', message: 'invalid digit found in string' });
  assert.throws(() => parseI64('--1'), { name: 'SyntaxError', message: 'invalid digit found in string' });
  assert.throws(() => parseI64('9223372036854775808'), { name: 'RangeError', message: 'number too large to fit in target type' });
  assert.throws(() => parseI64('-9223372036854775809'), { name: 'RangeError', message: 'number too small to fit in target type' });
});

// The same cases as the Rust SDK's `parse_i64` tests (guest-sdks/rust/src/state.rs).
const bytes = (text: string) => new TextEncoder().encode(text);

function check(value: Uint8Array, expect: bigint | string) {
  const shown = JSON.stringify(Array.from(value));
  if (typeof expect === 'bigint') {
    assert.equal(i64OfValue('accounts', bytes('alice'), value), expect, shown);
  } else {
    assert.throws(
      () => i64OfValue('accounts', bytes('alice'), value),
      (error: unknown) => error instanceof InvalidArgument && error.message === `invalid argument: ${expect}` && error.detail === expect,
      shown,
    );
  }
}

test('getI64 reads what putI64 writes', () => {
  for (const value of [0n, 1n, -1n, 42n, I64_MIN, I64_MAX]) {
    check(bytes(String(value)), value);
  }
});

test('getI64 refuses anything else with the Rust SDK message', () => {
  const notI64 = (shown: string) => `the value of key "alice" in table "accounts" is not a decimal i64: "${shown}"`;
  check(bytes(''), notI64(''));
  check(bytes(' 1'), notI64(' 1'));
  check(bytes('1\n'), notI64('1\\n'));
  check(bytes('1.5'), notI64('1.5'));
  check(bytes('9223372036854775808'), notI64('9223372036854775808'));
  check(new Uint8Array([0xff]), notI64('\\xff'));
  check(bytes('x'.repeat(33)), notI64(`${'x'.repeat(32)}...`));
  check(bytes('x'.repeat(32)), notI64('x'.repeat(32)));
});

test('the key and table in the message are escaped as Rust escapes them', () => {
  assert.throws(() => i64OfValue('t', new Uint8Array([0x61, 0x22, 0x27, 0x5c, 0x09, 0x00, 0xc3, 0xa9]), bytes('x')), {
    message: `invalid argument: the value of key "a\\"\\'\\\\\\t\\x00\\xc3\\xa9" in table "t" is not a decimal i64: "x"`,
  });
});
