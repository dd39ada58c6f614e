import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { InvalidArgument, TallyError, TooLarge, Unavailable } from '../src/errors.js';
import { ComponentError, host } from './platform.js';

// After the fakes are registered: the modules import `tally:platform/queues` and `locks`.
const queues = await import('../src/queues.js');
const locks = await import('../src/locks.js');

const U64_MAX = 18446744073709551615n;

/** Every call of the fake `queues` and `locks` interfaces, in order, with its arguments. */
let calls: [string, ...unknown[]][] = [];

beforeEach(() => {
  calls = [];
  host.queues.push = (queue: unknown, message: unknown) => {
    calls.push(['push', queue, message]);
  };
  host.queues.pop = (queue: unknown, timeoutMs: unknown) => {
    calls.push(['pop', queue, timeoutMs]);
    return undefined;
  };
  host.locks.acquire = (lock: unknown, timeoutMs: unknown) => {
    calls.push(['acquire', lock, timeoutMs]);
    return true;
  };
  host.locks.release = (lock: unknown) => {
    calls.push(['release', lock]);
  };
});

const refused = (call: () => unknown, type: ErrorConstructor, message: string) =>
  assert.throws(call, (error: Error) => error instanceof type && error.message === message, message);

test('push passes bytes, and strings as UTF-8', () => {
  queues.push('jobs', new Uint8Array([1, 2]));
  queues.push('jobs', 'thé');
  queues.push('jobs', '');
  assert.deepEqual(calls, [
    ['push', 'jobs', new Uint8Array([1, 2])],
    ['push', 'jobs', new Uint8Array([0x74, 0x68, 0xc3, 0xa9])],
    ['push', 'jobs', new Uint8Array()],
  ]);
});

test('pop passes its timeout as a u64 bigint and returns the message or undefined', () => {
  assert.equal(queues.pop('jobs', 0), undefined);
  host.queues.pop = (queue: unknown, timeoutMs: unknown) => {
    calls.push(['pop', queue, timeoutMs]);
    // The bindings make their bytes in a realm of their own.
    return runInNewContext('new Uint8Array([104, 105])') as Uint8Array;
  };
  const message = queues.pop('jobs', 1500n);
  assert.ok(message instanceof Uint8Array);
  assert.deepEqual([...message], [104, 105]);
  queues.pop('jobs', U64_MAX);
  assert.deepEqual(calls, [
    ['pop', 'jobs', 0n],
    ['pop', 'jobs', 1500n],
    ['pop', 'jobs', U64_MAX],
  ]);
});

test('popMany passes max and its timeout and returns the messages', () => {
  host.queues.popMany = (queue: unknown, max: unknown, timeoutMs: unknown) => {
    calls.push(['popMany', queue, max, timeoutMs]);
    return runInNewContext('[new Uint8Array([104]), new Uint8Array([105])]') as Uint8Array[];
  };
  const messages = queues.popMany('jobs', 8, 20);
  assert.ok(messages instanceof Array && messages.every((m) => m instanceof Uint8Array));
  assert.deepEqual(messages.map((m) => [...m]), [[104], [105]]);
  refused(() => queues.popMany('jobs', 1.5, 0), RangeError, 'max 1.5 is not a u32');
  refused(() => queues.popMany('jobs', 2 ** 32, 0), RangeError, 'max 4294967296 is not a u32');
  refused(() => (queues.popMany as (...args: unknown[]) => unknown)('jobs', 8n, 0), TypeError, 'max must be a number, not the bigint 8');
  assert.deepEqual(calls, [['popMany', 'jobs', 8, 20n]]);
});

test('acquire and release pass to the host', () => {
  assert.equal(locks.acquire('doc:7', 5000), true);
  host.locks.acquire = (lock: unknown, timeoutMs: unknown) => {
    calls.push(['acquire', lock, timeoutMs]);
    return false;
  };
  assert.equal(locks.acquire('doc:7', 0n), false);
  assert.equal(locks.release('doc:7'), undefined);
  assert.deepEqual(calls, [
    ['acquire', 'doc:7', 5000n],
    ['acquire', 'doc:7', 0n],
    ['release', 'doc:7'],
  ]);
});

test('values of the wrong type are refused before the host sees them', () => {
  const anyQueues = queues as Record<string, (...args: unknown[]) => unknown>;
  const anyLocks = locks as Record<string, (...args: unknown[]) => unknown>;
  refused(() => anyQueues.push!(1n, 'x'), TypeError, 'queue must be a string, not the bigint 1');
  refused(() => anyQueues.push!('jobs', 7), TypeError, 'message must be a Uint8Array or a string, not the number 7');
  refused(() => anyQueues.pop!('jobs'), TypeError, 'timeoutMs must be a number or a bigint, not undefined');
  refused(() => queues.pop('jobs', -1), RangeError, 'timeoutMs -1 is not a u64');
  refused(() => queues.pop('jobs', 0.5), RangeError, 'timeoutMs 0.5 is not a u64');
  refused(() => anyLocks.acquire!(undefined, 1), TypeError, 'lock must be a string, not undefined');
  refused(() => locks.acquire('doc', U64_MAX + 1n), RangeError, 'timeoutMs 18446744073709551616 is not a u64');
  refused(() => anyLocks.release!(new Uint8Array()), TypeError, 'lock must be a string, not Uint8Array');
  assert.deepEqual(calls, []);
});

test('a call the host refuses throws its TallyError', () => {
  const fails = (iface: string, name: string, payload: { tag: string; val: string }) => {
    host[iface]![name] = () => {
      throw new ComponentError(payload);
    };
  };
  fails('queues', 'push', { tag: 'too-large', val: 'a message is at most 524288 bytes' });
  assert.throws(
    () => queues.push('jobs', new Uint8Array(524289)),
    (error: unknown) => error instanceof TooLarge && error instanceof TallyError && error.message === 'too large: a message is at most 524288 bytes',
  );
  fails('queues', 'pop', { tag: 'invalid-argument', val: 'the timeout is longer than the time limit' });
  assert.throws(() => queues.pop('jobs', 1e9), (error: unknown) => error instanceof InvalidArgument);
  fails('locks', 'acquire', { tag: 'unavailable', val: 'no quorum' });
  assert.throws(() => locks.acquire('doc', 1), (error: unknown) => error instanceof Unavailable);
  fails('locks', 'release', { tag: 'invalid-argument', val: 'lock "doc" is not held' });
  assert.throws(
    () => locks.release('doc'),
    (error: unknown) => error instanceof InvalidArgument && error.detail === 'lock "doc" is not held',
  );
});
