import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  Conflict,
  Failed,
  InvalidArgument,
  NotFound,
  TallyError,
  Timeout,
  TooLarge,
  TransactionConflict,
  Unavailable,
  fromHostError,
  fromWit,
} from '../src/errors.js';

test('each WIT error case becomes its class, with the Rust SDK message', () => {
  const cases = [
    [{ tag: 'invalid-argument', val: 'tag 0' }, InvalidArgument, 'InvalidArgument', 'invalid argument: tag 0'],
    [{ tag: 'not-found', val: 'f' }, NotFound, 'NotFound', 'not found: f'],
    [{ tag: 'conflict', val: 7n }, Conflict, 'Conflict', 'conflict: the position is held by record 7'],
    [{ tag: 'conflict', val: undefined }, Conflict, 'Conflict', 'conflict: the position is held by a trimmed record'],
    [{ tag: 'unavailable', val: 'no quorum' }, Unavailable, 'Unavailable', 'unavailable: no quorum'],
    [{ tag: 'too-large', val: 'record' }, TooLarge, 'TooLarge', 'too large: record'],
    [{ tag: 'timeout', val: 'append' }, Timeout, 'Timeout', 'timeout: append'],
    [{ tag: 'failed', val: 'child trapped' }, Failed, 'Failed', 'failed: child trapped'],
  ] as const;
  for (const [wit, type, name, message] of cases) {
    const error = fromWit(wit);
    assert.ok(error instanceof type, name);
    assert.ok(error instanceof TallyError);
    assert.ok(error instanceof Error);
    assert.equal(error.name, name);
    assert.equal(error.message, message);
    assert.equal(String(error), `${name}: ${message}`);
  }
  assert.equal((fromWit({ tag: 'conflict', val: 7n }) as Conflict).holder, 7n);
  assert.equal((fromWit({ tag: 'conflict', val: undefined }) as Conflict).holder, undefined);
  assert.equal((fromWit({ tag: 'not-found', val: 'f' }) as NotFound).detail, 'f');
});

test('a host call error with a WIT payload becomes a TallyError, anything else passes', () => {
  class ComponentError extends Error {
    payload: unknown;
    constructor(payload: unknown) {
      super('(see error.payload)');
      this.payload = payload;
    }
  }
  const mapped = fromHostError(new ComponentError({ tag: 'timeout', val: 'read' }));
  assert.ok(mapped instanceof Timeout);
  assert.equal((mapped as Timeout).message, 'timeout: read');

  const typeError = new TypeError('expected a string');
  assert.equal(fromHostError(typeError), typeError);
  const other = new ComponentError({ tag: 'something-else', val: '' });
  assert.equal(fromHostError(other), other);
  assert.equal(fromHostError('text'), 'text');
});

test('a transaction that kept conflicting is a TallyError of its own', () => {
  const once = new TransactionConflict(1);
  assert.ok(once instanceof TallyError);
  assert.equal(once.name, 'TransactionConflict');
  assert.equal(String(once), 'TransactionConflict: transaction conflict: no commit in 1 attempt');
  const many = new TransactionConflict(11);
  assert.equal(many.attempts, 11);
  assert.equal(many.message, 'transaction conflict: no commit in 11 attempts');
});
