import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tag, tagOfHash } from '../src/tag.js';
import { readVectors } from './vectors.js';

test('Tag.named matches every vector of guest-sdks/test-vectors/tags.json', () => {
  const { vectors } = readVectors('tags.json');
  assert.ok(vectors.length > 0);
  for (const { name, tag } of vectors) {
    assert.equal(Tag.named(name), BigInt(tag), `Tag.named(${JSON.stringify(name)})`);
  }
});

test('Tag.named matches the documented vectors', () => {
  assert.equal(Tag.named(''), 0x4bf2_9ce4_8422_2325n);
  assert.equal(Tag.named('a'), 0x2f63_dc4c_8601_ec8cn);
  assert.equal(Tag.named('orders'), 0x0012_5d92_50be_8b4cn);
});

test('a hash becomes a tag that is neither ALL nor reserved', () => {
  // No short name hashes to these, so the hash-to-tag step is checked alone.
  assert.equal(tagOfHash(0n), 1n);
  assert.equal(tagOfHash(1n << 63n), 1n);
  assert.equal(tagOfHash(0xffff_ffff_ffff_ffffn), 0x7fff_ffff_ffff_ffffn);
  assert.equal(tagOfHash(42n), 42n);
  assert.equal(Tag.ALL, 0n);
});
