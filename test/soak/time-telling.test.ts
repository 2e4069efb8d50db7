import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, type Decision } from '../../src/index.js';
import { soakLimiters } from '../../soak/plan.js';
import { timeTelling } from '../../soak/time-telling.js';
import { uniquePrefix, useRedis, type StoreCase } from '../support/redis.js';

const harness = useRedis({ cluster: true });

/** The store's clock, in ms as its decisions read it: Redis's TIME (any node: one machine), or Date.now(). */
async function storeClock(storeCase: StoreCase): Promise<number> {
  if (!storeCase.redis) return Date.now();
  const [seconds, micros] = await storeCase.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

// The soak checks each admission at the server time its worker heard of (soak/check.ts): a time
// misread (another field of the reply) puts every admission at one instant, and the checker then
// reports thousands of them over their limits that Redis never admitted.
describe("the soak's worker hears the server time of each decision it times", () => {
  for (const storeCase of harness.cases) {
    it(`${storeCase.name}: every soak limiter's call and release`, async () => {
      const { store, timed } = timeTelling(storeCase.store());
      const prefix = uniquePrefix();
      for (const soak of soakLimiters) {
        // A timeout no busy machine reaches: the failure policy answers with no server time.
        const limiter = createLimiter({ store, policy: soak.policy, prefix, timeout: 60_000 });
        const leased = soak.invariant.kind === 'concurrency';
        const before = await storeClock(storeCase);
        const made = await timed<Decision>(() => (leased ? limiter.acquire('client') : limiter.limit('client')));
        const between = await storeClock(storeCase);
        const decision = made.value;
        assert.ok(decision?.allowed, `${soak.name}: a fresh key admits`);
        const heard = made.serverMs ?? NaN;
        assert.ok(before <= heard && heard <= between, `${soak.name}: heard ${heard}, not in [${before}, ${between}]`);
        if (!leased) continue;
        const released = await timed(() => (decision as Decision & { release(): Promise<boolean> }).release());
        const after = await storeClock(storeCase);
        assert.equal(released.value, true, `${soak.name}: the lease is released`);
        const heardRelease = released.serverMs ?? NaN;
        assert.ok(
          between <= heardRelease && heardRelease <= after,
          `${soak.name}: release heard ${heardRelease}, not in [${between}, ${after}]`,
        );
      }
    });
  }
});
