import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgument } from '../src/errors.js';
import { errorMessage, exportHandle } from '../src/handler.js';

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const bytes = (value: string) => new TextEncoder().encode(value);

test('a handler output becomes ok bytes', async () => {
  const echo = exportHandle((input) => input);
  assert.deepEqual(echo(bytes('hi')), { tag: 'ok', val: bytes('hi') });
  const greet = exportHandle((input) => `hello ${text(input)}`);
  assert.deepEqual(greet(bytes('you')), { tag: 'ok', val: bytes('hello you') });
  const later = exportHandle(async (input) => `${input.length} bytes`);
  assert.deepEqual(await later(bytes('abc')), { tag: 'ok', val: bytes('3 bytes') });
});

test('a thrown error becomes the err message', async () => {
  const fails = exportHandle(() => {
    throw new Error('bad input');
  });
  assert.deepEqual(fails(bytes('')), { tag: 'err', val: 'bad input' });
  const rejects = exportHandle(async () => {
    throw new InvalidArgument('tag 0');
  });
  assert.deepEqual(await rejects(bytes('')), { tag: 'err', val: 'invalid argument: tag 0' });
  const throwsText = exportHandle(() => {
    throw 'plain text';
  });
  assert.deepEqual(throwsText(bytes('')), { tag: 'err', val: 'plain text' });
  const wrongOutput = exportHandle(() => 42 as unknown as string);
  assert.deepEqual(wrongOutput(bytes('')), { tag: 'err', val: 'handle returned the number 42, expected a Uint8Array or a string' });
});

test('a cause chain is joined like anyhow {:#}', () => {
  const cause = new SyntaxError('invalid digit found in string');
  assert.equal(errorMessage(new Error('the amount "x" is not a u64', { cause })), 'the amount "x" is not a u64: invalid digit found in string');
  assert.equal(errorMessage(new Error('outer', { cause: 'inner text' })), 'outer: inner text');
  assert.equal(errorMessage(new Error('')), '');
  assert.equal(errorMessage(42), '42');
  assert.equal(errorMessage(null), 'null');
  const cyclic: Error & { cause?: unknown } = new Error('loop');
  cyclic.cause = cyclic;
  assert.equal(errorMessage(cyclic).split(': ').length, 32);
});

test('an entry module without a handle function is refused', () => {
  assert.throws(() => exportHandle(undefined as never), TypeError);
});
