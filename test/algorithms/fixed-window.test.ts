import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, fixedWindow, redisStore } from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { policyKey } from '../support/keys.js';
import { numbers, withClock } from '../support/algorithms.js';

const harness = useRedis();

describe('fixed window in Redis: what each call writes', () => {
  function limiter() {
    const made = createLimiter({
      store: redisStore(harness.redis),
      policy: fixedWindow({ limit: 5, window: '1h' }),
      prefix: uniquePrefix(),
    });
    return { limiter: made, key: policyKey(made) };
  }

  it('admits with the count and its TTL in one write, keeping the TTL it has', async () => {
    const { limiter: l, key } = limiter();
    await l.limit('k');
    const ttl = await harness.redis.pttl(key);
    assert.ok(ttl > 0 && ttl <= 3_600_001, `PTTL ${ttl}`);
    await l.limit('k', { cost: 2 });
    assert.equal(await harness.redis.get(key), '3');
    assert.ok((await harness.redis.pttl(key)) <= ttl, 'the window end stays where it was');
  });

  it('counts on a counter written by hand in a form INCRBY refuses (3.0, " 3"), writing it as a plain count', async () => {
    for (const written of ['3.0', ' 3', '3e0']) {
      const { limiter: l, key } = limiter();
      await l.limit('k');
      const ttl = await harness.redis.pttl(key);
      await harness.redis.set(key, written, 'KEEPTTL');
      const decision = await l.limit('k');
      assert.deepEqual([decision.allowed, decision.remaining, decision.error], [true, 1, undefined], written);
      assert.equal(await harness.redis.get(key), '4', written);
      assert.ok((await harness.redis.pttl(key)) <= ttl, 'the window end stays where it was');
    }
  });

  it('gives a counter that lost its TTL (PERSIST) one back on a refund too, keeping its count', async () => {
    const { limiter: l, key } = limiter();
    await l.limit('k', { cost: 3 });
    assert.equal(await harness.redis.persist(key), 1);
    assert.equal(await l.refund('k', 1), true);
    assert.equal(await harness.redis.get(key), '2');
    assert.ok((await harness.redis.pttl(key)) > 0, 'the refund set a TTL');
  });
});

describe('fixedWindow twin', () => {
  it('aligns windows to the clock and reports the exact time to the window end', async () => {
    const { clock, limiter } = withClock(fixedWindow({ limit: 2, window: '1s' }), 10_250);
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: true,
      limit: 2,
      remaining: 1,
      resetAfterMs: 750,
      retryAfterMs: 0,
    });
    clock.now = 10_900;
    assert.equal((await limiter.limit('k')).remaining, 0);
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: false,
      limit: 2,
      remaining: 0,
      resetAfterMs: 100,
      retryAfterMs: 100,
    });
    clock.now = 10_999;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 11_000;
    assert.deepEqual(numbers(await limiter.limit('k')), {
      allowed: true,
      limit: 2,
      remaining: 1,
      resetAfterMs: 1000,
      retryAfterMs: 0,
    });
  });

  it('does not count denied requests', async () => {
    const { limiter } = withClock(fixedWindow({ limit: 3, window: '1m' }));
    await limiter.limit('k', { cost: 2 });
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, false);
    assert.equal((await limiter.limit('k', { cost: 1 })).allowed, true);
  });

  it('admits 10 of 10 around an edge', async () => {
    const { clock, limiter } = withClock(fixedWindow({ limit: 5, window: '1s' }), 4_900);
    let admitted = 0;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    clock.now = 5_100;
    for (let i = 0; i < 5; i++) admitted += (await limiter.limit('k')).allowed ? 1 : 0;
    assert.equal(admitted, 10);
  });
});
