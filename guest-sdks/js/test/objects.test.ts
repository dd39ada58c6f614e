import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { InvalidArgument, TallyError, TransactionConflict, Unavailable } from '../src/errors.js';
import { ComponentError, host } from './platform.js';

// After the fakes are registered: the module imports `tally:platform/objects`.
const objects = await import('../src/objects.js');

const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);

/** Every call of the fake `objects` interface, in order, with its arguments. */
let calls: [string, ...unknown[]][] = [];
/** What the fake `commit` returns, one answer per call; `true` once they run out. */
let commits: boolean[] = [];
/** What the fake `get` returns. */
let stored: string | undefined;

beforeEach(() => {
  calls = [];
  commits = [];
  stored = undefined;
  const record =
    (name: string) =>
    (...args: unknown[]) => {
      calls.push([name, ...args]);
    };
  host.objects.get = (...args: unknown[]) => {
    calls.push(['get', ...args]);
    return stored;
  };
  host.objects.set = record('set');
  host.objects.increment = record('increment');
  host.objects.push = record('push');
  host.objects.remove = record('remove');
  host.objects.begin = record('begin');
  host.objects.commit = () => {
    calls.push(['commit']);
    return commits.shift() ?? true;
  };
  host.objects.abort = record('abort');
});

/** Makes the fake `name` fail with the WIT error `payload`. */
function fails(name: string, payload: { tag: string; val: unknown }): void {
  host.objects[name] = (...args: unknown[]) => {
    calls.push([name, ...args]);
    throw new ComponentError(payload);
  };
}

test('each call passes its arguments to the host', () => {
  stored = '{"n":1}';
  assert.equal(objects.get('cart:ann', ''), '{"n":1}');
  stored = undefined;
  assert.equal(objects.get('cart:ann', '/items/0'), undefined);
  assert.equal(objects.set('cart:ann', '/owner', '"ann"'), undefined);
  objects.increment('cart:ann', '/n');
  objects.increment('cart:ann', '/n', 2);
  objects.increment('cart:ann', '/n', 2 ** 53);
  objects.increment('cart:ann', '/n', I64_MAX);
  objects.increment('cart:ann', '/n', 0);
  objects.push('cart:ann', '/items', '{"sku":7}');
  objects.remove('cart:ann', '/items/0');
  objects.remove('cart:ann', '');
  assert.deepEqual(calls, [
    ['get', 'cart:ann', ''],
    ['get', 'cart:ann', '/items/0'],
    ['set', 'cart:ann', '/owner', '"ann"'],
    ['increment', 'cart:ann', '/n', 1n],
    ['increment', 'cart:ann', '/n', 2n],
    ['increment', 'cart:ann', '/n', 9007199254740992n],
    ['increment', 'cart:ann', '/n', I64_MAX],
    ['increment', 'cart:ann', '/n', 0n],
    ['push', 'cart:ann', '/items', '{"sku":7}'],
    ['remove', 'cart:ann', '/items/0'],
    ['remove', 'cart:ann', ''],
  ]);
});

test('begin, commit and abort pass to the host', () => {
  objects.begin();
  objects.begin({});
  objects.begin({ readOnly: false });
  objects.begin({ readOnly: true });
  commits = [false, true];
  assert.equal(objects.commit(), false);
  assert.equal(objects.commit(), true);
  assert.equal(objects.abort(), undefined);
  assert.deepEqual(calls, [['begin', false], ['begin', false], ['begin', false], ['begin', true], ['commit'], ['commit'], ['abort']]);
});

test('makeObject and makeArray set an empty object and array', () => {
  objects.makeObject('doc', '');
  objects.makeArray('doc', '/a~1b');
  assert.deepEqual(calls, [
    ['set', 'doc', '', '{}'],
    ['set', 'doc', '/a~1b', '[]'],
  ]);
});

test('pointer escapes field names and takes array indexes', () => {
  const check = (tokens: unknown[], expect: string) => assert.equal(objects.pointer(...(tokens as string[])), expect, expect);
  check([], '');
  check([''], '/');
  check(['items', 0, 'a/b~c'], '/items/0/a~1b~0c');
  check(['~1', '-'], '/~01/-');
  check([12, 'x y', 'é'], '/12/x y/é');
  const refused = (token: unknown, type: ErrorConstructor, message: string) =>
    assert.throws(() => objects.pointer('a', token as string), (error: Error) => error instanceof type && error.message === message, message);
  refused(-1, RangeError, 'array index -1 is not a non-negative integer');
  refused(1.5, RangeError, 'array index 1.5 is not a non-negative integer');
  refused(Number.NaN, RangeError, 'array index NaN is not a non-negative integer');
  refused(1n, TypeError, 'a path token must be a string or a number, not the bigint 1');
  refused(null, TypeError, 'a path token must be a string or a number, not null');
  assert.deepEqual(calls, []);
});

test('the JSON helpers read and write values through JSON', () => {
  stored = '{"items":[{"sku":7}],"total":12.5,"note":null}';
  assert.deepEqual(objects.getJson('cart', ''), { items: [{ sku: 7 }], total: 12.5, note: null });
  stored = 'null';
  assert.equal(objects.getJson('cart', '/note'), null);
  stored = undefined;
  assert.equal(objects.getJson('cart', '/missing'), undefined);
  objects.setJson('cart', '', { items: [], when: new Date(0), skip: undefined });
  objects.setJson('cart', '/total', 0);
  objects.setJson('cart', '/note', null);
  objects.pushJson('cart', '/items', { sku: 8, name: 'tea "green"' });
  objects.pushJson('cart', '/items', 'x');
  assert.deepEqual(calls.slice(3), [
    ['set', 'cart', '', '{"items":[],"when":"1970-01-01T00:00:00.000Z"}'],
    ['set', 'cart', '/total', '0'],
    ['set', 'cart', '/note', 'null'],
    ['push', 'cart', '/items', '{"sku":8,"name":"tea \\"green\\""}'],
    ['push', 'cart', '/items', '"x"'],
  ]);
});

test('values of the wrong type are refused before the host sees them', () => {
  const refused = (call: () => unknown, type: ErrorConstructor, message: string) =>
    assert.throws(call, (error: Error) => error instanceof type && error.message === message, message);
  const anyObjects = objects as Record<string, (...args: unknown[]) => unknown>;
  refused(() => anyObjects.get!(7, ''), TypeError, 'object must be a string, not the number 7');
  refused(() => anyObjects.get!('doc', undefined), TypeError, 'path must be a string, not undefined');
  refused(() => anyObjects.set!('doc', '', { a: 1 }), TypeError, 'json must be a string, not Object');
  refused(() => anyObjects.push!('doc', '', new Uint8Array()), TypeError, 'json must be a string, not Uint8Array');
  refused(() => anyObjects.remove!(null, ''), TypeError, 'object must be a string, not null');
  refused(() => objects.increment('doc', '', 1.5), RangeError, 'by 1.5 is not an i64');
  refused(() => objects.increment('doc', '', Number.NaN), RangeError, 'by NaN is not an i64');
  refused(() => objects.increment('doc', '', 2 ** 63), RangeError, 'by 9223372036854776000 is not an i64');
  refused(() => objects.increment('doc', '', I64_MAX + 1n), RangeError, 'by 9223372036854775808 is not an i64');
  refused(() => objects.increment('doc', '', I64_MIN - 1n), RangeError, 'by -9223372036854775809 is not an i64');
  // componentize-js 0.23 would abort the instance on a negative s64 (ComponentizeJS#343).
  const negative = "is negative, which the JavaScript engine's bindings cannot pass to the platform yet (bytecodealliance/ComponentizeJS#343)";
  refused(() => objects.increment('doc', '', -1), RangeError, `by -1 ${negative}`);
  refused(() => objects.increment('doc', '', -3n), RangeError, `by -3 ${negative}`);
  refused(() => objects.increment('doc', '', I64_MIN), RangeError, `by -9223372036854775808 ${negative}`);
  refused(() => anyObjects.increment!('doc', '', '1'), TypeError, 'by must be a number or a bigint, not a string');
  refused(() => objects.setJson('doc', '', undefined), TypeError, 'value has no JSON text: it is undefined');
  refused(() => objects.pushJson('doc', '', () => 1), TypeError, 'value has no JSON text: it is function');
  assert.throws(() => objects.setJson('doc', '', 1n), TypeError); // JSON.stringify's own
  refused(() => anyObjects.begin!(null), TypeError, 'options must be an object, not null');
  refused(() => anyObjects.begin!(true), TypeError, 'options must be an object, not boolean');
  refused(() => anyObjects.begin!({ readOnly: 'yes' }), TypeError, 'readOnly must be a boolean, not a string');
  assert.deepEqual(calls, []);
});

test('a call the host refuses throws its TallyError', () => {
  fails('get', { tag: 'unavailable', val: 'no quorum' });
  assert.throws(
    () => objects.get('doc', ''),
    (error: unknown) => error instanceof Unavailable && error instanceof TallyError && error.message === 'unavailable: no quorum',
  );
  fails('increment', { tag: 'invalid-argument', val: '/name holds a string' });
  assert.throws(
    () => objects.increment('doc', '/name', 1),
    (error: unknown) => error instanceof InvalidArgument && error.detail === '/name holds a string',
  );
  fails('set', { tag: 'invalid-argument', val: 'not JSON' });
  assert.throws(() => objects.setJson('doc', '', 1), (error: unknown) => error instanceof InvalidArgument);
  fails('begin', { tag: 'invalid-argument', val: 'a transaction is open' });
  assert.throws(() => objects.begin(), (error: unknown) => error instanceof InvalidArgument);
  fails('commit', { tag: 'unavailable', val: 'sealed' });
  assert.throws(() => objects.commit(), (error: unknown) => error instanceof Unavailable);
  fails('abort', { tag: 'invalid-argument', val: 'no transaction' });
  assert.throws(() => objects.abort(), (error: unknown) => error instanceof InvalidArgument);
});

test('transaction runs the body between begin and commit and returns its result', () => {
  const result = objects.transaction(() => {
    objects.increment('doc', '/n', 1);
    return 'done';
  });
  assert.equal(result, 'done');
  assert.deepEqual(calls, [['begin', false], ['increment', 'doc', '/n', 1n], ['commit']]);
});

test('transaction runs the body again while the commit conflicts', () => {
  commits = [false, false, true];
  let runs = 0;
  const result = objects.transaction(
    () => {
      runs++;
      objects.get('doc', '/n');
      return runs;
    },
    { readOnly: true, retries: 2 },
  );
  assert.equal(result, 3);
  const attempt = [['begin', true], ['get', 'doc', '/n'], ['commit']];
  assert.deepEqual(calls, [...attempt, ...attempt, ...attempt]);
});

test('transaction throws TransactionConflict once its retries are spent', () => {
  const conflicts = (options: { retries?: number }, attempts: number) => {
    calls = [];
    commits = Array<boolean>(attempts).fill(false);
    let runs = 0;
    assert.throws(
      () => objects.transaction(() => runs++, options),
      (error: unknown) =>
        error instanceof TransactionConflict &&
        error instanceof TallyError &&
        error.attempts === attempts &&
        error.message === `transaction conflict: no commit in ${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`,
    );
    assert.equal(runs, attempts);
    assert.equal(calls.filter(([name]) => name === 'begin').length, attempts);
    assert.equal(calls.filter(([name]) => name === 'abort').length, 0);
  };
  conflicts({ retries: 0 }, 1);
  conflicts({ retries: 3 }, 4);
  conflicts({}, objects.DEFAULT_RETRIES + 1);
});

test('a body that throws aborts the transaction and is not run again', () => {
  commits = [false];
  const thrown = new Error('insufficient funds');
  let runs = 0;
  assert.throws(
    () =>
      objects.transaction(() => {
        runs++;
        objects.set('doc', '/n', '1');
        throw thrown;
      }),
    (error: unknown) => error === thrown,
  );
  assert.equal(runs, 1);
  assert.deepEqual(calls, [['begin', false], ['set', 'doc', '/n', '1'], ['abort']]);
  // The commit's answer was never asked for.
  assert.deepEqual(commits, [false]);
});

test("a body's error passes on even when the abort fails too", () => {
  fails('abort', { tag: 'unavailable', val: 'no quorum' });
  const thrown = new InvalidArgument('a read-only transaction refuses writes');
  assert.throws(
    () =>
      objects.transaction(() => {
        throw thrown;
      }),
    (error: unknown) => error === thrown,
  );
  assert.deepEqual(calls, [['begin', false], ['abort']]);
});

test('a body that returns a promise is aborted and refused', () => {
  assert.throws(
    () => objects.transaction(async () => 1),
    (error: unknown) =>
      error instanceof TypeError && error.message === 'the body of a transaction must be synchronous, but it returned a promise',
  );
  assert.deepEqual(calls, [['begin', false], ['abort']]);
});

test('transaction fails as begin and commit fail, without aborting', () => {
  fails('begin', { tag: 'invalid-argument', val: 'a transaction is open' });
  let runs = 0;
  assert.throws(
    () => objects.transaction(() => runs++),
    (error: unknown) => error instanceof InvalidArgument,
  );
  assert.equal(runs, 0);
  host.objects.begin = () => {
    calls.push(['begin']);
  };
  calls = [];
  fails('commit', { tag: 'unavailable', val: 'no quorum' });
  assert.throws(
    () => objects.transaction(() => runs++),
    (error: unknown) => error instanceof Unavailable,
  );
  assert.equal(runs, 1);
  assert.deepEqual(calls, [['begin'], ['commit']]);
});

test('transaction refuses bad options before it begins', () => {
  const refused = (body: unknown, options: unknown, type: ErrorConstructor, message: string) =>
    assert.throws(
      () => objects.transaction(body as () => unknown, options as { retries: number }),
      (error: Error) => error instanceof type && error.message === message,
      message,
    );
  const body = () => 1;
  refused(undefined, {}, TypeError, 'body must be a function, not undefined');
  refused(body, { retries: -1 }, RangeError, 'retries -1 is not a non-negative integer');
  refused(body, { retries: 1.5 }, RangeError, 'retries 1.5 is not a non-negative integer');
  refused(body, { retries: Number.POSITIVE_INFINITY }, RangeError, 'retries Infinity is not a non-negative integer');
  refused(body, { retries: 3n }, TypeError, 'retries must be a number, not the bigint 3');
  refused(body, { readOnly: 1 }, TypeError, 'readOnly must be a boolean, not the number 1');
  refused(body, null, TypeError, 'options must be an object, not null');
  assert.deepEqual(calls, []);
});
