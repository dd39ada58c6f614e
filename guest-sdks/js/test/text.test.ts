import assert from 'node:assert/strict';
import { test } from 'node:test';
import { debugString, escapeAscii } from '../src/text.js';

test('escapeAscii is Rust escape_ascii', () => {
  assert.equal(escapeAscii(new Uint8Array([0x41, 0x20, 0x7e])), 'A ~');
  assert.equal(escapeAscii(new Uint8Array([0x09, 0x0a, 0x0d, 0x22, 0x27, 0x5c])), '\\t\\n\\r\\"\\\'\\\\');
  assert.equal(escapeAscii(new Uint8Array([0x00, 0x1f, 0x7f, 0x80, 0xff])), '\\x00\\x1f\\x7f\\x80\\xff');
});

test('debugString is Rust {:?} for a str', () => {
  assert.equal(debugString('abc'), '"abc"');
  assert.equal(debugString(''), '""');
  assert.equal(debugString('a"b\\c\'d'), '"a\\"b\\\\c\'d"');
  assert.equal(debugString('\0\t\r\n'), '"\\0\\t\\r\\n"');
  assert.equal(debugString('\x01\x7f\u0085\u00a0'), '"\\u{1}\\u{7f}\\u{85}\\u{a0}"');
  assert.equal(debugString('é日本🎉'), '"é日本🎉"');
  assert.equal(debugString('e\u0301'), '"e\\u{301}"');
  assert.equal(debugString('\u200b\u2028\ufeff'), '"\\u{200b}\\u{2028}\\u{feff}"');
});
