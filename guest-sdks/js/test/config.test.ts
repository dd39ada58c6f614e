import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ComponentError, host } from './platform.js';

// After the fakes are registered: the module imports `wasi:config/store`.
const config = await import('../src/config.js');

test('get returns a setting, or undefined for a missing one', () => {
  const asked: unknown[] = [];
  host.config.get = (key: unknown) => {
    asked.push(key);
    return key === 'upstream' ? 'http://127.0.0.1:9000' : undefined;
  };
  assert.equal(config.get('upstream'), 'http://127.0.0.1:9000');
  assert.equal(config.get('other'), undefined);
  assert.deepEqual(asked, ['upstream', 'other']);
});

test('getAll returns every setting by key', () => {
  host.config.getAll = () => [
    ['upstream', 'http://127.0.0.1:9000'],
    ['webhook_secret', 's'],
  ];
  assert.deepEqual(
    config.getAll(),
    new Map([
      ['upstream', 'http://127.0.0.1:9000'],
      ['webhook_secret', 's'],
    ]),
  );
});

test('a WIT error is a ConfigError naming its case', () => {
  const cases: [unknown, string, string][] = [
    [{ tag: 'upstream', val: 'the store is down' }, 'upstream', 'config upstream error: the store is down'],
    [{ tag: 'io', val: 'read failed' }, 'io', 'config io error: read failed'],
  ];
  for (const [payload, kind, message] of cases) {
    host.config.get = () => {
      throw new ComponentError(payload);
    };
    host.config.getAll = host.config.get;
    for (const call of [() => config.get('k'), () => config.getAll()]) {
      assert.throws(call, (error: unknown) => {
        assert.ok(error instanceof config.ConfigError);
        assert.equal(error.kind, kind);
        assert.equal(error.message, message);
        assert.equal(error.name, 'ConfigError');
        return true;
      });
    }
  }
});

test('a key that is not a string is a TypeError before the host sees it', () => {
  host.config.get = () => assert.fail('the host was called');
  assert.throws(() => config.get(7 as unknown as string), TypeError);
});

test('anything else the host throws passes unchanged', () => {
  const thrown = new RangeError('bad');
  host.config.get = () => {
    throw thrown;
  };
  assert.throws(() => config.get('k'), (error: unknown) => error === thrown);
});
