import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodeText, FetchError, isNullBodyStatus, witMethod, witTarget } from '../src/outgoing.js';

test('methods become WIT methods, unknown ones `other`', () => {
  const cases: [string, unknown][] = [
    ['GET', { tag: 'get' }],
    ['POST', { tag: 'post' }],
    ['PATCH', { tag: 'patch' }],
    ['OPTIONS', { tag: 'options' }],
    ['PURGE', { tag: 'other', val: 'PURGE' }],
    ['post', { tag: 'other', val: 'post' }],
  ];
  for (const [method, expected] of cases) {
    assert.deepEqual(witMethod(method), expected, method);
  }
});

test('a URL becomes a scheme, an authority and a path with its query', () => {
  const cases: [string, unknown][] = [
    ['http://127.0.0.1:9000/sink', { scheme: { tag: 'HTTP' }, authority: '127.0.0.1:9000', pathWithQuery: '/sink' }],
    ['https://api.example.com', { scheme: { tag: 'HTTPS' }, authority: 'api.example.com', pathWithQuery: '/' }],
    ['https://api.example.com:443/a%20b?x=1&y', { scheme: { tag: 'HTTPS' }, authority: 'api.example.com', pathWithQuery: '/a%20b?x=1&y' }],
    ['http://[::1]:8080/p#fragment', { scheme: { tag: 'HTTP' }, authority: '[::1]:8080', pathWithQuery: '/p' }],
  ];
  for (const [url, expected] of cases) {
    assert.deepEqual(witTarget(new URL(url)), expected, url);
  }
  assert.throws(() => witTarget(new URL('ftp://example.com/x')), /takes http and https URLs, not ftp:/);
});

test('an error code reads as its case and its payload', () => {
  const cases: [{ tag: string; val?: unknown }, string][] = [
    [{ tag: 'connection-refused' }, 'connection-refused'],
    [{ tag: 'HTTP-request-denied' }, 'HTTP-request-denied'],
    [{ tag: 'internal-error', val: undefined }, 'internal-error'],
    [{ tag: 'internal-error', val: 'oops' }, 'internal-error (oops)'],
    [{ tag: 'HTTP-response-body-size', val: 786433n }, 'HTTP-response-body-size (786433)'],
    [{ tag: 'DNS-error', val: { rcode: 'NXDOMAIN', infoCode: undefined } }, 'DNS-error (rcode NXDOMAIN)'],
    [{ tag: 'DNS-error', val: { rcode: undefined, infoCode: undefined } }, 'DNS-error'],
  ];
  for (const [code, expected] of cases) {
    assert.equal(errorCodeText(code), expected);
  }
});

test('a FetchError is a TypeError with the code, naming the origin only', () => {
  const error = new FetchError('POST', new URL('http://127.0.0.1:9/hook?token=secret'), { tag: 'connection-refused' });
  assert.ok(error instanceof TypeError);
  assert.equal(error.name, 'FetchError');
  assert.equal(error.code, 'connection-refused');
  assert.equal(error.message, 'POST http://127.0.0.1:9 failed: connection-refused');
});

test('null-body statuses', () => {
  assert.deepEqual(
    [101, 103, 200, 204, 205, 304, 404].filter(isNullBodyStatus),
    [101, 103, 204, 205, 304],
  );
});
