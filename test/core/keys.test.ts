import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_RAW_KEY_BYTES, aclKeyPattern, clientId, partName, splitKey, storageKey } from '../../src/core/keys.js';
import { InvalidArgumentError, InvalidOptionError, createLimiter, fixedWindow, memoryStore } from '../../src/index.js';
import { hostileKeys } from '../support/hostile-keys.js';

describe('keys', () => {
  it('gives every distinct key its own Redis key, of bounded length', () => {
    const stored = hostileKeys.map((key) => storageKey('p', key, 'fw'));
    assert.equal(new Set(stored).size, hostileKeys.length);
    for (const key of stored) assert.ok(Buffer.byteLength(key) <= MAX_RAW_KEY_BYTES + 10, `${key.length} bytes`);
  });

  it('hashes keys past the limit and keys that would empty their hash tag, keeps the rest readable', () => {
    assert.equal(storageKey('p', 'user:1', 'fw'), 'p:{user:1}:fw');
    assert.equal(storageKey('p', 'x'.repeat(MAX_RAW_KEY_BYTES), 'fw'), `p:{${'x'.repeat(MAX_RAW_KEY_BYTES)}}:fw`);
    assert.match(storageKey('p', 'x'.repeat(MAX_RAW_KEY_BYTES + 1), 'fw'), /^p:#\{[0-9a-f]{64}\}:fw$/);
    assert.match(storageKey('p', '}a', 'fw'), /^p:#\{[0-9a-f]{64}\}:fw$/);
  });

  it('measures keys in UTF-8 bytes, whatever characters make them up', () => {
    for (const char of ['x', 'é', '€', '😀']) {
      for (let length = 80; length <= 260; length++) {
        const key = char.repeat(length);
        assert.equal(clientId(key) !== key, Buffer.byteLength(key) > MAX_RAW_KEY_BYTES, `${length} × ${char}`);
      }
    }
  });

  it('splits every Redis key back into its client and part, as the memory store holds them', () => {
    const ids = new Set<string>();
    for (const key of hostileKeys) {
      for (const [prefix, suffix] of [
        ['p', 'fw'],
        ['a:b#c', 'blk'],
        ['p', 'sl1'],
      ] as const) {
        assert.deepEqual(
          splitKey(storageKey(prefix, key, suffix)),
          { id: clientId(key), part: partName(prefix, suffix) },
          JSON.stringify(key.slice(0, 20)),
        );
      }
      ids.add(clientId(key));
    }
    assert.equal(ids.size, hostileKeys.length, 'distinct keys, distinct clients');
    for (const foreign of ['not-ours', 'ab{x}:fw', 'a b:{x}:fw', 'a:{x}:b c', 'a:{x}:FW', '{x}:fw', 'a:{x}']) {
      assert.equal(splitKey(foreign), undefined, foreign);
    }
  });

  it('names the ACL key pattern of a key prefix, its glob characters escaped, for plain and hashed keys', () => {
    for (const key of ['user:1', '}a', 'x'.repeat(MAX_RAW_KEY_BYTES + 1)]) {
      assert.equal(aclKeyPattern(storageKey('sluice', key, 'fw')), '~sluice:*');
      assert.equal(aclKeyPattern(storageKey('app:v2#x', key, 'blk')), '~app:v2#x:*');
      assert.equal(aclKeyPattern(storageKey('a*[b]?\\c', key, 'sl1')), '~a\\*\\[b\\]\\?\\\\c:*');
    }
  });

  it('rejects keys and prefixes with lone surrogates, which have no UTF-8 form to keep them apart', async () => {
    const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
    for (const key of ['\uD800', 'a\uDFFF', '\uDC00\uD800']) {
      await assert.rejects(
        limiter.limit(key),
        (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'key',
      );
    }
    assert.equal((await limiter.limit('\uD83D\uDE42')).allowed, true, 'a surrogate pair is fine');
    assert.throws(
      () => createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }), prefix: 'p\uD800' }),
      InvalidOptionError,
    );
  });
});
