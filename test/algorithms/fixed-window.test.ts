import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, fixedWindow, redisStore } from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { policyKey } from '../support/keys.js';

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
