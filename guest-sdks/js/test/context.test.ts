import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { InvalidArgument, NotFound, TallyError, Timeout, Unavailable } from '../src/errors.js';
import { ComponentError, host } from './platform.js';

// After the fakes are registered: the module imports `tally:platform/context`.
const context = await import('../src/context.js');

const U64_MAX = 18446744073709551615n;

const PROMISE = '0123456789abcdef0123456789abcdef';

/** The arguments of each call of the fake `sleep`, `sleepUntil` and `promiseAwait`, in order. */
let calls: [string, ...unknown[]][] = [];

beforeEach(() => {
  calls = [];
  host.context.sleep = (ms: unknown) => {
    calls.push(['sleep', ms]);
  };
  host.context.sleepUntil = (unixMs: unknown) => {
    calls.push(['sleepUntil', unixMs]);
  };
  host.context.promiseCreate = () => PROMISE;
  host.context.promiseAwait = (id: unknown, timeoutMs: unknown) => {
    calls.push(['promiseAwait', id, timeoutMs]);
    return new TextEncoder().encode('granted');
  };
});

test('the invocation calls return what the host says', () => {
  host.context.invocationId = () => 'inv-1';
  host.context.bookId = () => 4n;
  host.context.attempt = () => 2;
  host.context.functionName = () => 'reminder';
  assert.equal(context.invocationId(), 'inv-1');
  assert.equal(context.bookId(), 4n);
  assert.equal(context.attempt(), 2);
  assert.equal(context.functionName(), 'reminder');
});

test('key returns the key the invocation was addressed to, or undefined', () => {
  host.context.key = () => 'cart:ann';
  assert.equal(context.key(), 'cart:ann');
  host.context.key = () => undefined;
  assert.equal(context.key(), undefined);
});

test('sleep passes its milliseconds to the host as a u64 bigint', () => {
  assert.equal(context.sleep(1500), undefined);
  context.sleep(0);
  context.sleep(-0);
  context.sleep(2 ** 53);
  context.sleep(2 ** 63);
  context.sleep(250n);
  context.sleep(0n);
  context.sleep(U64_MAX);
  assert.deepEqual(calls, [
    ['sleep', 1500n],
    ['sleep', 0n],
    ['sleep', 0n],
    ['sleep', 9007199254740992n],
    ['sleep', 9223372036854775808n],
    ['sleep', 250n],
    ['sleep', 0n],
    ['sleep', U64_MAX],
  ]);
});

test('sleep refuses what is not a u64 before calling the host', () => {
  const refused = (ms: unknown, type: ErrorConstructor, message: string) =>
    assert.throws(() => context.sleep(ms as number), (error: Error) => error instanceof type && error.message === message, String(ms));
  refused(-1, RangeError, 'ms -1 is not a u64');
  refused(1.5, RangeError, 'ms 1.5 is not a u64');
  refused(Number.NaN, RangeError, 'ms NaN is not a u64');
  refused(Number.POSITIVE_INFINITY, RangeError, 'ms Infinity is not a u64');
  refused(2 ** 64, RangeError, 'ms 18446744073709552000 is not a u64');
  refused(-1n, RangeError, 'ms -1 is not a u64');
  refused(U64_MAX + 1n, RangeError, 'ms 18446744073709551616 is not a u64');
  refused('1000', TypeError, 'ms must be a number or a bigint, not a string');
  refused(undefined, TypeError, 'ms must be a number or a bigint, not undefined');
  refused(null, TypeError, 'ms must be a number or a bigint, not null');
  refused(new Date(0), TypeError, 'ms must be a number or a bigint, not Date');
  assert.deepEqual(calls, []);
});

test('sleepUntil takes a Date or epoch milliseconds', () => {
  context.sleepUntil(new Date('2030-01-01T00:00:00.250Z'));
  context.sleepUntil(new Date(0));
  context.sleepUntil(new Date(-1)); // before the epoch: in the past, as in Rust
  context.sleepUntil(1_700_000_000_000);
  context.sleepUntil(1_700_000_000_001n);
  context.sleepUntil(U64_MAX);
  assert.deepEqual(calls, [
    ['sleepUntil', 1893456000250n],
    ['sleepUntil', 0n],
    ['sleepUntil', 0n],
    ['sleepUntil', 1700000000000n],
    ['sleepUntil', 1700000000001n],
    ['sleepUntil', U64_MAX],
  ]);
});

test('sleepUntil refuses what is not a time before calling the host', () => {
  const refused = (time: unknown, type: ErrorConstructor, message: string) =>
    assert.throws(() => context.sleepUntil(time as Date), (error: Error) => error instanceof type && error.message === message, String(time));
  refused(new Date(Number.NaN), RangeError, 'time is an invalid Date');
  refused(-1, RangeError, 'time -1 is not a u64');
  refused(0.5, RangeError, 'time 0.5 is not a u64');
  refused(-5n, RangeError, 'time -5 is not a u64');
  refused('2030-01-01', TypeError, 'time must be a number or a bigint, not a string');
  refused({ getTime: () => 0 }, TypeError, 'time must be a number or a bigint, not Object');
  refused(undefined, TypeError, 'time must be a number or a bigint, not undefined');
  assert.deepEqual(calls, []);
});

test('a sleep the host refuses throws its TallyError', () => {
  const tooLong = 'a sleep until 1 ms after the Unix epoch is longer than the limit of 31536000000 ms (a year)';
  host.context.sleep = () => {
    throw new ComponentError({ tag: 'invalid-argument', val: tooLong });
  };
  host.context.sleepUntil = () => {
    throw new ComponentError({ tag: 'unavailable', val: 'no quorum' });
  };
  assert.throws(
    () => context.sleep(31_536_000_001),
    (error: unknown) => error instanceof InvalidArgument && error.message === `invalid argument: ${tooLong}` && error.detail === tooLong,
  );
  assert.throws(
    () => context.sleepUntil(new Date()),
    (error: unknown) => error instanceof Unavailable && error instanceof TallyError && error.message === 'unavailable: no quorum',
  );
});

test('anything else the host call throws passes unchanged', () => {
  const thrown = new TypeError('not a bigint');
  host.context.sleep = () => {
    throw thrown;
  };
  assert.throws(() => context.sleep(1), (error: unknown) => error === thrown);
});

test('promiseCreate returns the ID the host made', () => {
  assert.equal(context.promiseCreate(), PROMISE);
});

test('promiseAwait passes its timeout to the host as a u64 bigint, or none', () => {
  assert.deepEqual(context.promiseAwait(PROMISE), new TextEncoder().encode('granted'));
  context.promiseAwait(PROMISE, undefined);
  context.promiseAwait(PROMISE, 0);
  context.promiseAwait(PROMISE, 200);
  context.promiseAwait(PROMISE, 2 ** 53);
  context.promiseAwait(PROMISE, 250n);
  context.promiseAwait(PROMISE, U64_MAX);
  assert.deepEqual(calls, [
    ['promiseAwait', PROMISE, undefined],
    ['promiseAwait', PROMISE, undefined],
    ['promiseAwait', PROMISE, 0n],
    ['promiseAwait', PROMISE, 200n],
    ['promiseAwait', PROMISE, 9007199254740992n],
    ['promiseAwait', PROMISE, 250n],
    ['promiseAwait', PROMISE, U64_MAX],
  ]);
});

test("promiseAwait returns the value as a Uint8Array of the caller's realm", () => {
  // The bindings make their bytes in a realm of their own.
  const foreign = runInNewContext('new Uint8Array([104, 105])') as Uint8Array;
  assert.equal(foreign instanceof Uint8Array, false);
  host.context.promiseAwait = () => foreign;
  const value = context.promiseAwait(PROMISE);
  assert.ok(value instanceof Uint8Array);
  assert.deepEqual([...value], [104, 105]);
});

test('promiseAwait refuses what is not an ID or a u64 before calling the host', () => {
  const refused = (id: unknown, timeoutMs: unknown, type: ErrorConstructor, message: string) =>
    assert.throws(
      () => context.promiseAwait(id as string, timeoutMs as number),
      (error: Error) => error instanceof type && error.message === message,
      `${String(id)} ${String(timeoutMs)}`,
    );
  refused(new TextEncoder().encode(PROMISE), undefined, TypeError, 'id must be a string, not Uint8Array');
  refused(undefined, 200, TypeError, 'id must be a string, not undefined');
  refused(7n, undefined, TypeError, 'id must be a string, not the bigint 7');
  refused(PROMISE, -1, RangeError, 'timeoutMs -1 is not a u64');
  refused(PROMISE, 0.5, RangeError, 'timeoutMs 0.5 is not a u64');
  refused(PROMISE, Number.NaN, RangeError, 'timeoutMs NaN is not a u64');
  refused(PROMISE, U64_MAX + 1n, RangeError, 'timeoutMs 18446744073709551616 is not a u64');
  refused(PROMISE, '200', TypeError, 'timeoutMs must be a number or a bigint, not a string');
  refused(PROMISE, null, TypeError, 'timeoutMs must be a number or a bigint, not null');
  assert.deepEqual(calls, []);
});

test('a promise call the host fails throws its TallyError', () => {
  host.context.promiseCreate = () => {
    throw new ComponentError({ tag: 'unavailable', val: 'no quorum' });
  };
  assert.throws(
    () => context.promiseCreate(),
    (error: unknown) => error instanceof Unavailable && error.message === 'unavailable: no quorum',
  );
  const fails = (payload: { tag: string; val: string }) => {
    host.context.promiseAwait = () => {
      throw new ComponentError(payload);
    };
  };
  fails({ tag: 'timeout', val: '200 ms' });
  assert.throws(
    () => context.promiseAwait(PROMISE, 200),
    (error: unknown) => error instanceof Timeout && error instanceof TallyError && error.message === 'timeout: 200 ms',
  );
  fails({ tag: 'not-found', val: `no promise ${PROMISE}` });
  assert.throws(
    () => context.promiseAwait(PROMISE),
    (error: unknown) => error instanceof NotFound && error.detail === `no promise ${PROMISE}`,
  );
  fails({ tag: 'invalid-argument', val: '"nope" is not a promise ID' });
  assert.throws(() => context.promiseAwait('nope'), (error: unknown) => error instanceof InvalidArgument);
});
