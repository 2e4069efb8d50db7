import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { createLimiter } from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { hostileKeys } from '../support/hostile-keys.js';
import { keysWithTtl, uniquePrefix, useRedis } from '../support/redis.js';
import { policyKey } from '../support/keys.js';

const HOUR = 3_600_000;
const harness = useRedis({ cluster: true });

for (const storeCase of harness.cases) {
  describe(`hostile keys: ${storeCase.name}`, () => {
    it('each key has its own quota: no key reads or changes another one', async () => {
      const limit = 3;
      const prefix = uniquePrefix();
      const limiters = algorithms.map((algorithm) =>
        createLimiter({ store: storeCase.store(), policy: algorithm.policy(limit, HOUR), prefix, timeout: '1m' }),
      );
      // Costs 1, 2, 3 in turn: had two keys one state, one of them would see less than its own cost taken.
      const cost = (i: number) => 1 + (i % limit);
      for (const limiter of limiters) {
        const spent = await Promise.all(hostileKeys.map((key, i) => limiter.limit(key, { cost: cost(i) })));
        assert.deepEqual(
          spent.map((d) => d.remaining),
          hostileKeys.map((_, i) => limit - cost(i)),
        );
        const seen = await Promise.all(hostileKeys.map((key) => limiter.peek(key)));
        assert.deepEqual(
          seen.map((d) => d.remaining),
          hostileKeys.map((_, i) => limit - cost(i)),
          limiter.policy.algorithm,
        );
      }
      if (!storeCase.redis) return;
      const stored = await keysWithTtl(storeCase.redis, prefix);
      assert.equal(stored.size, hostileKeys.length * limiters.length);
      for (const [key, ttl] of stored) {
        assert.ok(ttl > 0, `${key.slice(0, 40)} has PTTL ${ttl}`);
        assert.ok(
          Buffer.byteLength(key) <= prefix.length + 256 + 10,
          `a stored key of ${Buffer.byteLength(key)} bytes`,
        );
      }
      if (storeCase.redis instanceof Cluster) {
        // One client's keys share a slot, whatever braces the key holds, so multi-key scripts never see CROSSSLOT.
        for (const key of hostileKeys) {
          const slots = await Promise.all(limiters.map((l) => storeCase.redis?.cluster('KEYSLOT', policyKey(l, key))));
          assert.equal(new Set(slots).size, 1, JSON.stringify(key.slice(0, 20)));
        }
      }
    });
  });
}
