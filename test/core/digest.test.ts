import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sha1Hex, sha256Bytes, sha256Hex } from '../../src/core/digest.js';
import { hostileKeys } from '../support/hostile-keys.js';

const nodeDigest = (algorithm: 'sha1' | 'sha256', text: string) => createHash(algorithm).update(text).digest('hex');

// A fixed seed, so a failure replays the same way.
const RUNS = { seed: 16, numRuns: 2000 };

describe('digest', () => {
  it('matches node:crypto at every length around the block and padding boundaries', () => {
    for (let length = 0; length <= 260; length++) {
      for (const char of ['a', 'é', '€', '😀']) {
        const text = char.repeat(length);
        assert.equal(sha1Hex(text), nodeDigest('sha1', text), `sha1 of ${length} × ${char}`);
        assert.equal(sha256Hex(text), nodeDigest('sha256', text), `sha256 of ${length} × ${char}`);
      }
    }
  });

  it('matches node:crypto on any well-formed text, hostile keys among it', () => {
    for (const key of hostileKeys) assert.equal(sha256Hex(key), nodeDigest('sha256', key));
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 300 }), (text) => {
        assert.equal(sha1Hex(text), nodeDigest('sha1', text));
        assert.equal(sha256Hex(text), nodeDigest('sha256', text));
        assert.deepEqual(sha256Bytes(text), new Uint8Array(createHash('sha256').update(text).digest()));
      }),
      RUNS,
    );
  });

  it('gives the FIPS 180-4 test vectors', () => {
    assert.equal(sha1Hex('abc'), 'a9993e364706816aba3e25717850c26c9cd0d89d');
    assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.equal(sha256Hex('a'.repeat(1_000_000)), 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
  });
});
