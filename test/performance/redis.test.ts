import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import {
  createLimiter,
  fixedWindow,
  InvalidArgumentError,
  redisStore,
  tokenBucket,
  type Decision,
} from '../../src/index.js';
import { hashSlot } from '../../src/stores/slot.js';
import { algorithms } from '../support/algorithms.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { policyKey } from '../support/keys.js';

const harness = useRedis();
const HOUR = 3_600_000;

/** The real Redis of the harness, seen through a client that records every EVALSHA's keys. */
function recordingClient(redis: () => Redis, cluster = false) {
  const evalshas: string[][] = [];
  return {
    evalshas,
    isCluster: cluster,
    evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]) {
      evalshas.push(keysAndArgs.slice(0, numKeys));
      return redis().evalsha(sha, numKeys, ...keysAndArgs);
    },
    eval(lua: string, numKeys: number, ...keysAndArgs: string[]) {
      return redis().eval(lua, numKeys, ...keysAndArgs);
    },
    del(...keys: string[]) {
      return redis().del(...keys);
    },
  };
}

describe('deniedCache against Redis', () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: a flood of 200 on a denied key costs Redis 1 call, each answer what Redis says`, async () => {
      const client = recordingClient(() => harness.redis);
      const prefix = uniquePrefix();
      const policy = algorithm.policy(5, HOUR);
      const cached = createLimiter({ store: redisStore(client), policy, prefix, deniedCache: { maxKeys: 10 } });
      const truth = createLimiter({ store: redisStore(harness.redis), policy, prefix });
      for (let i = 0; i < 5; i++) assert.equal((await cached.limit('k')).allowed, true);
      for (let i = 0; i < 200; i++) {
        const fromRedis = await truth.peek('k');
        const fromCache = await cached.limit('k');
        // A cached denial's decidedAt is Redis's time estimated by the time elapsed here.
        const withoutTimes = (d: Decision) => ({
          ...d,
          decidedAt: 0,
          resetAfterMs: 0,
          retryAfterMs: 0,
          policies: d.policies.map((p) => ({ ...p, resetAfterMs: 0, retryAfterMs: 0 })),
        });
        assert.deepEqual(withoutTimes(fromCache), withoutTimes(fromRedis));
        // Counted from when the request was sent, so never longer than Redis's, a moment earlier.
        assert.ok(
          fromCache.retryAfterMs <= fromRedis.retryAfterMs && fromCache.retryAfterMs > fromRedis.retryAfterMs - 1000,
          `${fromCache.retryAfterMs} vs ${fromRedis.retryAfterMs}`,
        );
        assert.ok(
          fromCache.resetAfterMs <= fromRedis.resetAfterMs && fromCache.resetAfterMs > fromRedis.resetAfterMs - 1000,
          `${fromCache.resetAfterMs} vs ${fromRedis.resetAfterMs}`,
        );
      }
      // tokenBucket and gcra: first, the store's one question whether the server has PEXPIRETIME.
      const question = policy.kind.luaWithoutPexpiretime === undefined ? 0 : 1;
      assert.equal(client.evalshas.length, question + 6, '5 admitted and the first denial');
    });
  }
});

describe('batches: decisions asked in one tick share one EVALSHA', () => {
  it('limitMany decides 100 keys in one call, a repeated key in order', async () => {
    const client = recordingClient(() => harness.redis);
    const limiter = createLimiter({
      store: redisStore(client),
      policy: fixedWindow({ limit: 2, window: '1h' }),
      prefix: uniquePrefix(),
    });
    const keys = [...Array.from({ length: 97 }, (_, i) => `user:${i}`), 'hot', 'hot', 'hot'];
    const decisions = await limiter.limitMany(keys);
    assert.equal(client.evalshas.length, 1);
    assert.deepEqual(
      decisions.slice(0, 97).map((d) => d.remaining),
      Array.from({ length: 97 }, () => 1),
    );
    assert.deepEqual(
      decisions.slice(97).map((d) => [d.allowed, d.remaining]),
      [
        [true, 1],
        [true, 0],
        [false, 0],
      ],
    );
  });

  it('limitMany checks every key first: a bad one rejects and nothing is counted', async () => {
    const limiter = createLimiter({
      store: redisStore(harness.redis),
      policy: fixedWindow({ limit: 2, window: '1h' }),
      prefix: uniquePrefix(),
    });
    await assert.rejects(
      limiter.limitMany(['a', '', 'b']),
      (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'key',
    );
    await assert.rejects(
      limiter.limitMany('a' as never),
      (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'keys',
    );
    assert.equal((await limiter.peek('a')).remaining, 2);
  });

  it('a key of the wrong type in a batch is healed and decided, as are the rest (a failing request fails alone: test/stores/redis.test.ts)', async () => {
    const prefix = uniquePrefix();
    const limiter = createLimiter({
      store: redisStore(harness.redis),
      policy: tokenBucket({ capacity: 3, refillPerSecond: 1 }),
      prefix,
    });
    const broken = policyKey(limiter, 'broken');
    await harness.redis.hset(broken, 'x', '1');
    const results = await Promise.all([limiter.limit('a'), limiter.limit('broken'), limiter.limit('b')]);
    assert.deepEqual(
      results.map((d) => [d.allowed, d.reason, d.remaining]),
      [
        [true, undefined, 2],
        [true, undefined, 2],
        [true, undefined, 2],
      ],
    );
    assert.equal(await harness.redis.type(broken), 'string');
    assert.ok((await harness.redis.pttl(broken)) > 0);
  });

  it('recovers a batch after SCRIPT FLUSH', async () => {
    const limiter = createLimiter({
      store: redisStore(harness.redis),
      policy: fixedWindow({ limit: 5, window: '1h' }),
      prefix: uniquePrefix(),
    });
    await limiter.limitMany(['a', 'b']);
    await harness.redis.script('FLUSH');
    assert.deepEqual(
      (await limiter.limitMany(['a', 'b', 'c'])).map((d) => d.remaining),
      [3, 3, 4],
    );
  });

  it('on a cluster client, one batch per slot', async () => {
    const client = recordingClient(() => harness.redis, true);
    const limiter = createLimiter({
      store: redisStore(client),
      policy: fixedWindow({ limit: 5, window: '1h' }),
      prefix: uniquePrefix(),
    });
    // a, b, c and same hash to four different slots; `same` comes three times.
    const keys = ['a', 'b', 'c', 'same', 'same', 'same'];
    await limiter.limitMany(keys);
    assert.equal(client.evalshas.length, 4);
    for (const batch of client.evalshas)
      assert.equal(new Set(batch.map(hashSlot)).size, 1, `one slot in ${batch.join(', ')}`);
  });
});

describe('hashSlot', () => {
  it('maps keys to slots as Redis Cluster does', () => {
    assert.equal(hashSlot('123456789'), 12739); // the CRC16/XMODEM check value, 0x31C3
    assert.equal(hashSlot('somekey'), 11058);
    assert.equal(hashSlot('foo{hash_tag}'), 2515);
    assert.equal(hashSlot('bar{hash_tag}'), 2515);
    // Values from CLUSTER KEYSLOT on Redis 7.0: an empty tag hashes the whole key; the first { opens the tag.
    assert.equal(hashSlot('foo{}{bar}'), 8363);
    assert.equal(hashSlot('foo{{bar}}zap'), 4015);
    assert.equal(hashSlot('sluice:{user:1}:fw'), 10778);
  });
});
