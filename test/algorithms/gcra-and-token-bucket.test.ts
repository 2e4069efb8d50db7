import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { scriptFor, type Op } from '../../src/engine/driver.js';
import { createLimiter, gcra, redisStore, tokenBucket } from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { enginePolicy, type EnginePolicy } from '../../src/engine/algorithm.js';
import { storageKey } from '../../src/core/keys.js';
import { callScript } from '../support/script-call.js';

const harness = useRedis();

// Each built from (limit, period): `limit` at once, then `limit` per period.
const cases: readonly { name: string; policy: (limit: number, periodMs: number) => EnginePolicy }[] = [
  { name: 'gcra', policy: (limit, periodMs) => enginePolicy(gcra({ limit, period: periodMs })) },
  {
    name: 'tokenBucket',
    policy: (limit, periodMs) =>
      enginePolicy(tokenBucket({ capacity: limit, refillPerSecond: (limit * 1000) / periodMs })),
  },
];

/** The policy's parameters: units per admitted unit, units admitted at once, units per ms. */
function units(policy: EnginePolicy): { step: number; size: number; perMs: number } {
  const [step = 0, size = 0, perMs = 0] = policy.params;
  return { step, size, perMs };
}

/** One call of the policy's script, with the time Redis used. */
function run(policy: EnginePolicy, prefix: string, op: Op, cost = 1) {
  return callScript(harness.redis, policy, prefix, op, cost);
}

/** The key's expiry (ms) and value, as Redis holds them. */
async function stored(key: string): Promise<{ expiry: number; value: number }> {
  const [expiry, value] = await Promise.all([harness.redis.call('PEXPIRETIME', key), harness.redis.get(key)]);
  return { expiry: Number(expiry), value: Number(value) };
}

for (const { name, policy: build } of cases) {
  describe(`${name}: the state is the instant the key is fresh again, held in the key's expiry`, () => {
    it("expires exactly when its state equals a fresh key's, the value holding the sub-ms rest", async () => {
      const policy = build(3, 1000);
      const { step, perMs } = units(policy);
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      const first = await run(policy, prefix, 'limit', 2);
      const { expiry, value } = await stored(key);
      assert.equal(expiry, first.now + first.part.resetAfterMs, 'the expiry is resetAfterMs from now');
      assert.ok(Number.isInteger(value) && value >= 0 && value < perMs, `value ${value}`);
      assert.equal(expiry * perMs - value, first.now * perMs + 2 * step, 'two steps after now, to the unit');
      const second = await run(policy, prefix, 'limit', 1);
      const next = await stored(key);
      assert.equal(next.expiry * perMs - next.value, Math.max(first.now * perMs + 2 * step, second.now * perMs) + step);
    });

    it('after a refund, expires earlier; refunded to fresh, the key is deleted', async () => {
      const policy = build(3, 60_000);
      const { step, perMs } = units(policy);
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      const { now } = await run(policy, prefix, 'limit', 3);
      await run(policy, prefix, 'refund', 1);
      const { expiry, value } = await stored(key);
      assert.equal(expiry * perMs - value, now * perMs + 2 * step);
      await run(policy, prefix, 'refund', 2);
      assert.equal(await harness.redis.exists(key), 0);
      assert.equal(
        (await run(policy, prefix, 'refund', 1)).reply.allowed,
        false,
        'a fresh key has nothing to give back',
      );
    });

    it('a key that lost its TTL (PERSIST) admits nothing until a full period drains, and gets its expiry back', async () => {
      const policy = build(3, 3_600_000);
      const { step, size, perMs } = units(policy);
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      await run(policy, prefix, 'limit', 1);
      assert.equal(await harness.redis.persist(key), 1);
      // Its instant is lost: it is read as a full key, never as a fresh one.
      const peeked = await run(policy, prefix, 'peek');
      assert.deepEqual([peeked.part.allowed, peeked.part.remaining], [false, 0]);
      const denied = await run(policy, prefix, 'limit');
      assert.equal(denied.reply.allowed, false);
      const { expiry, value } = await stored(key);
      assert.equal(expiry * perMs - value, denied.now * perMs + size * step, 'healed as a full key');
      const limiter = createLimiter({ store: redisStore(harness.redis), policy, prefix });
      const decisions = await Promise.all(Array.from({ length: 5 }, () => limiter.limit('k')));
      assert.equal(decisions.filter((d) => d.allowed).length, 0);
      assert.ok((await harness.redis.pttl(key)) > 3_500_000);
    });

    it('reads a key whose expiry has passed by TIME, though Redis keeps it, as a missing key', async () => {
      const policy = build(3, 1000);
      const { size, perMs } = units(policy);
      const key = storageKey(uniquePrefix(), 'k', policy.kind.id);
      // The script's clock is `now`, passed in: here ahead of the clock Redis expires keys by.
      const id = policy.kind.id;
      const lua = `${scriptFor([policy.kind]).setup}
local now, p = tonumber(ARGV[1]), { ${policy.params.join(', ')} }
local allowed, remaining, reset, retry = ALG.${id}.decide(KEYS[1], 1, now, p, false, {})
return { allowed and 1 or 0, remaining, reset, retry, ALG.${id}.refund(KEYS[1], 1, now, p, 0) and 1 or 0 }`;
      const [seconds] = await harness.redis.time();
      const expiry = (Number(seconds) + 60) * 1000;
      await harness.redis.call('SET', key, perMs - 1, 'PXAT', expiry);
      const at = async (now: number) => harness.redis.eval(lua, 1, key, now);
      // One ms before: the instant is 1 unit past now - 1, a step later than a fresh key's.
      assert.deepEqual(await at(expiry - 1), [1, size - 1, 1, 0, 1]);
      await harness.redis.call('SET', key, perMs - 1, 'PXAT', expiry);
      for (const now of [expiry, expiry + 1])
        assert.deepEqual(await at(now), [1, size, 0, 0, 0], `at ${now - expiry} ms past the expiry`);
      assert.deepEqual(await stored(key), { expiry, value: perMs - 1 }, 'nothing written');
    });

    it('reads a value that is not a remainder (hand-written, or an older format) as the expiry alone', async () => {
      const policy = build(3, 3_600_000);
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      await harness.redis.set(key, name === 'gcra' ? '1764489600123456' : '1.5 1764489600000', 'PX', 1_800_000);
      const limiter = createLimiter({ store: redisStore(harness.redis), policy, prefix });
      const decision = await limiter.peek('k');
      // Half the period ahead: 1.5 of 3 drained, one whole request admitted.
      assert.equal(decision.remaining, 1);
      assert.ok(
        decision.resetAfterMs > 1_790_000 && decision.resetAfterMs <= 1_800_000,
        `resetAfterMs ${decision.resetAfterMs}`,
      );
    });
  });
}
