import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { aroundTheEdge } from '../../src/cli/demo.js';
import {
  CostExceedsLimitError,
  InvalidArgumentError,
  concurrency,
  createLimiter,
  fixedWindow,
  slidingLog,
  tokenBucket,
  type Decision,
  type Limiter,
  type Policy,
} from '../../src/index.js';
import { algorithms, numbers } from '../support/algorithms.js';
import { junkKinds, serverNow } from '../support/junk.js';
import {
  WITHOUT_PEXPIRETIME,
  assertEveryKeyHasTtl,
  flushScripts,
  keysWithTtl,
  uniquePrefix,
  useRedis,
  type StoreCase,
} from '../support/redis.js';
import { policyKey } from '../support/keys.js';

const HOUR = 3_600_000;
const harness = useRedis({ cluster: true });
// tokenBucket and gcra read PEXPIRETIME where the server has it: on one without (Redis 6.2), their
// other form. The other algorithms call no command newer than Redis 6.2.
const olderServer = useRedis({ serverArgs: WITHOUT_PEXPIRETIME, variant: 'without PEXPIRETIME' });
const suites = [
  ...harness.cases.map((storeCase) => ({ storeCase, algorithms, whole: true })),
  ...olderServer.cases
    .filter((storeCase) => storeCase.inRedis)
    .map((storeCase) => ({
      storeCase,
      algorithms: algorithms.filter((a) => a.name === 'tokenBucket' || a.name === 'gcra'),
      whole: false,
    })),
];

function limiterFor(storeCase: StoreCase, policy: ReturnType<(typeof algorithms)[number]['policy']>): Limiter {
  // The suite tests stores, not the failure policy: on a busy machine a slow reply is still a reply.
  return createLimiter({ store: storeCase.store(), policy, prefix: uniquePrefix(), timeout: '1m' });
}

/** Asserts that nothing under the limiter's prefix exists (Redis) or that the key is untouched (memory). */
async function assertNothingWritten(storeCase: StoreCase, limiter: Limiter, key: string): Promise<void> {
  if (storeCase.redis) assert.equal((await keysWithTtl(storeCase.redis, limiter.prefix)).size, 0);
  assert.equal((await limiter.peek(key)).remaining, limiter.policy.limit);
}

/**
 * For each kind of junk and each of a call's keys (the policy's, the block key, the strikes key of a
 * penalty box), written by hand without a TTL: peek and the next calls never fail on the store, never
 * report more remaining than the limit (3), leave the key with a TTL (or gone), and count exactly
 * from an empty state. Junk in the strikes key is met by a denial: two more make the block.
 */
async function assertHealsJunk(
  storeCase: StoreCase,
  policy: Policy,
  take: (limiter: Limiter, key: string) => Promise<Decision>,
): Promise<void> {
  const redis = storeCase.redis!;
  const limiter = createLimiter({
    store: storeCase.store(),
    policy,
    prefix: uniquePrefix(),
    timeout: '1m',
    penalty: { after: 2, block: '1h' },
  });
  const sound = (decision: Decision, what: string) => {
    assert.equal(decision.reason, undefined, `${what}: ${String(decision.error?.cause)}`);
    assert.ok(decision.remaining <= 3, `${what}: remaining ${decision.remaining}`);
    return decision;
  };
  for (const [i, junk] of junkKinds.entries()) {
    for (const role of junk.roles ?? (['policy', 'block', 'strikes'] as const)) {
      const key = `${role}-${i}`;
      const what = `${junk.name} in the ${role} key`;
      const keys = limiter.storageKeys(key);
      const stored = role === 'policy' ? policyKey(limiter, key) : keys[role];
      const taken: Decision[] = [];
      if (role === 'strikes') for (let n = 0; n < 3; n++) taken.push(sound(await take(limiter, key), what));
      await junk.write(redis, stored, await serverNow(redis), HOUR);
      if (role !== 'strikes')
        assert.equal(sound(await limiter.peek(key), `${what}, peek`).remaining, 3, `${what}: read as empty`);
      taken.push(sound(await take(limiter, key), what));
      const ttl = await redis.pttl(stored);
      assert.ok(ttl > 0 || ttl === -2, `${what}: PTTL ${ttl}`);
      while (taken.length < 4) taken.push(sound(await take(limiter, key), what));
      assert.deepEqual(
        taken.map((d) => [d.allowed, d.remaining]),
        [
          [true, 2],
          [true, 1],
          [true, 0],
          [false, 0],
        ],
        what,
      );
      if (role === 'strikes') {
        sound(await take(limiter, key), what);
        assert.ok(
          (sound(await take(limiter, key), what).blockedForMs ?? 0) > HOUR - 60_000,
          `${what}: two denials after the junk block the key`,
        );
      }
    }
  }
  for (const [key, ttl] of await keysWithTtl(redis, limiter.prefix)) assert.ok(ttl !== -1, `${key} has no TTL`);
}

for (const { storeCase, algorithms, whole } of suites) {
  describe(`conformance: ${storeCase.name}`, () => {
    for (const algorithm of algorithms) {
      describe(algorithm.name, () => {
        it('admits exactly the limit out of 1,000 concurrent calls on one key', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(100, HOUR));
          const decisions = await Promise.all(Array.from({ length: 1000 }, () => limiter.limit('hot')));
          assert.equal(decisions.filter((d) => d.allowed).length, 100);
          assert.equal(decisions.at(-1)?.remaining, 0);
          assert.equal((await limiter.peek('hot')).allowed, false);
        });

        it('settle gives back, takes more into debt (at most one limit), and settles once', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(100, HOUR, { counts: 'tokens' }));
          const tokens = (n: number) => ({ cost: { tokens: n } });
          const estimated = await limiter.reserve('k', tokens(40));
          assert.deepEqual([estimated.allowed, estimated.remaining], [true, 60]);
          assert.equal(await estimated.settle({ tokens: 25 }), true);
          assert.equal((await limiter.peek('k')).remaining, 75);
          assert.equal(await estimated.settle({ tokens: 99 }), false, 'a second settle changes nothing');
          assert.equal(await estimated.cancel(), false);
          assert.equal((await limiter.peek('k')).remaining, 75);
          // 50 estimated, 100 used: 25 past the limit, a debt that denies even a cost of 1.
          const overrun = await limiter.reserve('k', tokens(50));
          assert.equal(await overrun.settle({ tokens: 100 }), true);
          const inDebt = await limiter.limit('k', tokens(1));
          assert.deepEqual([inDebt.allowed, inDebt.remaining], [false, 0]);
          assert.ok(inDebt.retryAfterMs > 0);
          assert.equal((await limiter.reserve('k', tokens(1))).allowed, false);
          // 125 held: giving back 26 leaves 99, one token free.
          await limiter.refund('k', { tokens: 26 });
          assert.equal((await limiter.peek('k')).remaining, 1);
          // Far past the limit: what is owed stops at one limit (200 held in all).
          const last = await limiter.reserve('k', tokens(1));
          assert.equal(await last.settle({ tokens: 1_000_000 }), true);
          await limiter.refund('k', { tokens: 100 });
          assert.equal((await limiter.peek('k')).remaining, 0);
          await limiter.refund('k', { tokens: 1 });
          assert.equal((await limiter.peek('k')).remaining, 1);
          await assertEveryKeyHasTtl(storeCase, limiter.prefix);
        });

        it('1,000 concurrent reserve and settle pairs owe at most one limit', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(100, HOUR, { counts: 'tokens' }));
          // Each reserves 2 and uses 5: settling takes min(3, what keeps the debt within 100).
          const pairs = await Promise.all(
            Array.from({ length: 1000 }, async () => {
              const reservation = await limiter.reserve('hot', { cost: { tokens: 2 } });
              return { admitted: reservation.allowed, settled: await reservation.settle({ tokens: 5 }) };
            }),
          );
          const admitted = pairs.filter((p) => p.admitted).length;
          assert.deepEqual(pairs.filter((p) => p.settled).length, admitted);
          // Admitted only within the limit at the estimates: at least 100 / 5, at most 100 / 2.
          assert.ok(admitted >= 20 && admitted <= 50, `${admitted} admitted`);
          // Held: 5 per admitted request, up to 200. Giving back 100 shows how much is held past 100.
          await limiter.refund('hot', { tokens: 100 });
          assert.equal((await limiter.peek('hot')).remaining, 200 - Math.min(5 * admitted, 200));
          await assertEveryKeyHasTtl(storeCase, limiter.prefix);
        });

        it('counts a cost, reports remaining, and keeps keys apart', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(10, HOUR));
          const first = await limiter.limit('a', { cost: 3 });
          assert.deepEqual(
            { ...numbers(first), resetAfterMs: undefined },
            { allowed: true, limit: 10, remaining: 7, retryAfterMs: 0, resetAfterMs: undefined },
          );
          // A sliding window counter remembers the current window's count through the next window.
          assert.ok(first.resetAfterMs > 0 && first.resetAfterMs <= 2 * HOUR, `resetAfterMs ${first.resetAfterMs}`);
          assert.equal((await limiter.limit('a', { cost: 7 })).remaining, 0);
          const denied = await limiter.limit('a');
          assert.equal(denied.allowed, false);
          assert.ok(denied.retryAfterMs > 0, `retryAfterMs ${denied.retryAfterMs}`);
          assert.equal((await limiter.limit('b')).remaining, 9);
        });

        it('peek consumes nothing and writes nothing', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(5, HOUR));
          const fresh = await limiter.peek('k');
          assert.deepEqual(numbers(fresh), { allowed: true, limit: 5, remaining: 5, resetAfterMs: 0, retryAfterMs: 0 });
          await assertNothingWritten(storeCase, limiter, 'k');
          await limiter.limit('k', { cost: 2 });
          const before = storeCase.redis ? await storeCase.redis.dump(policyKey(limiter)) : null;
          assert.equal((await limiter.peek('k')).remaining, 3);
          assert.equal((await limiter.peek('k')).remaining, 3);
          if (storeCase.redis) assert.deepEqual(await storeCase.redis.dump(policyKey(limiter)), before);
        });

        it('reset forgets the key', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(2, HOUR));
          await limiter.limit('k', { cost: 2 });
          assert.equal((await limiter.limit('k')).allowed, false);
          await limiter.reset('k');
          assert.equal((await limiter.limit('k')).remaining, 1);
        });

        it('admits a denied request once its retryAfterMs has passed', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(3, 300));
          // Both calls at once: Redis decides them in one batch, at one server time, memory microseconds
          // apart, so no slowness between them refills the key (a request's worth comes back every 100 ms).
          const spendAndAsk = async (key: string) =>
            (await Promise.all([limiter.limit(key, { cost: 3 }), limiter.limit(key)]))[1];
          let key = 'k';
          let denied = await spendAndAsk(key);
          // A fixed window admits again once its edge passes, which can fall between the two calls
          // in memory (they are microseconds apart): then once more, on a fresh key.
          if (denied.allowed && algorithm.name === 'fixedWindow') {
            key = 'k2';
            denied = await spendAndAsk(key);
          }
          assert.equal(denied.allowed, false);
          assert.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= 2 * 300, `retryAfterMs ${denied.retryAfterMs}`);
          await sleep(denied.retryAfterMs + 2);
          assert.equal((await limiter.limit(key)).allowed, true);
        });

        it('rejects bad keys and costs with a typed error and writes nothing', async () => {
          const limiter = limiterFor(storeCase, algorithm.policy(5, HOUR));
          for (const key of ['', 42, undefined, null, {}]) {
            await assert.rejects(
              limiter.limit(key as string),
              (e: unknown) =>
                e instanceof InvalidArgumentError && e.code === 'SLUICE_INVALID_ARGUMENT' && e.argument === 'key',
            );
            await assert.rejects(limiter.peek(key as string), InvalidArgumentError);
            await assert.rejects(limiter.reset(key as string), InvalidArgumentError);
          }
          for (const cost of [0, -1, 1.5, Number.NaN, Infinity, '2']) {
            await assert.rejects(
              limiter.limit('k', { cost: cost as number }),
              (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'cost',
            );
          }
          await assert.rejects(limiter.limit('k', 3 as never), InvalidArgumentError);
          await assert.rejects(
            limiter.limit('k', { cost: 6 }),
            (e: unknown) =>
              e instanceof CostExceedsLimitError &&
              e.code === 'SLUICE_COST_EXCEEDS_LIMIT' &&
              e.cost === 6 &&
              e.limit === 5,
          );
          await assertNothingWritten(storeCase, limiter, 'k');
        });

        if (storeCase.inRedis) {
          const redisOf = () => storeCase.redis!;

          it('gives a key that lost its TTL (PERSIST) a TTL again on the next call', async () => {
            const limiter = limiterFor(storeCase, algorithm.policy(3, HOUR));
            const key = policyKey(limiter);
            const decisions = [await limiter.limit('k')];
            assert.equal(await redisOf().persist(key), 1);
            assert.equal(await redisOf().pttl(key), -1);
            decisions.push(await limiter.limit('k'));
            assert.ok((await redisOf().pttl(key)) > 0);
            // and a denied call heals it too
            decisions.push(await limiter.limit('k'));
            await redisOf().persist(key);
            assert.equal((await limiter.limit('k')).allowed, false);
            assert.ok((await redisOf().pttl(key)) > 0);
            // Whatever a key that lost its TTL is read as, it never lets more than the limit in.
            decisions.push(...(await Promise.all(Array.from({ length: 5 }, () => limiter.limit('k')))));
            assert.ok(
              decisions.filter((d) => d.allowed).length <= 3,
              `${decisions.filter((d) => d.allowed).length} admitted`,
            );
          });

          it('gives a key that lost its TTL (PERSIST) a TTL again on a refund', async () => {
            const limiter = limiterFor(storeCase, algorithm.policy(3, HOUR));
            const key = policyKey(limiter);
            await limiter.limit('k', { cost: 2 });
            assert.equal(await redisOf().persist(key), 1);
            const refunded = await limiter.refund('k');
            const ttl = await redisOf().pttl(key);
            // A refund that empties the state may delete the key; one that keeps it keeps a TTL.
            assert.ok(ttl > 0 || (ttl === -2 && refunded), `PTTL ${ttl} after a refund that returned ${refunded}`);
          });

          it('heals any junk in any of its keys: no store error, never more remaining than the limit, a TTL, exact counting after', async () => {
            await assertHealsJunk(storeCase, algorithm.policy(3, HOUR), (limiter, key) => limiter.limit(key));
          });

          it('leaves no key without a TTL after a mixed workload', async () => {
            const limiter = limiterFor(storeCase, algorithm.policy(5, 60_000));
            const work: Promise<unknown>[] = [];
            for (let i = 0; i < 300; i++) {
              const key = `user:${i % 40}`;
              if (i % 7 === 0) work.push(limiter.peek(key));
              else if (i % 11 === 0) work.push(limiter.reset(key));
              else work.push(limiter.limit(key, { cost: 1 + (i % 3) }));
            }
            await Promise.all(work);
            const keys = await keysWithTtl(redisOf(), limiter.prefix);
            assert.ok(keys.size > 0);
            // -1 is a key without a TTL; -2 one that expired between SCAN and PTTL.
            for (const [key, ttl] of keys) assert.ok(ttl !== -1, `${key} has PTTL ${ttl}`);
          });

          it('decides the same after SCRIPT FLUSH between calls', async () => {
            const limiter = limiterFor(storeCase, algorithm.policy(5, HOUR));
            await limiter.limit('k', { cost: 2 });
            await flushScripts(redisOf());
            assert.equal((await limiter.limit('k')).remaining, 2);
            await flushScripts(redisOf());
            assert.equal((await limiter.peek('k')).remaining, 2);
          });
        }
      });
    }

    if (storeCase.inRedis && whole) {
      it('concurrency heals any junk in any of its keys: no store error, never more remaining than the limit, a TTL, exact counting after', async () => {
        await assertHealsJunk(storeCase, concurrency({ limit: 3, leaseMs: '1h' }), (limiter, key) =>
          limiter.acquire(key),
        );
      });
    }

    if (whole) {
      it('shows the window edge: fixed window 10 of 10, sliding log 5 of 10', async () => {
        const prefix = uniquePrefix();
        const store = storeCase.store();
        const fixed = createLimiter({ store, prefix, policy: fixedWindow({ limit: 5, window: '1s' }) });
        const log = createLimiter({ store, prefix, policy: slidingLog({ limit: 5, window: '1s' }) });
        assert.deepEqual(await aroundTheEdge([fixed, log], 'edge', storeCase.clockOffsetMs), [10, 5]);
      });
    }

    it('token bucket, capacity 3 at 1 token/s: 1 1 1 0 0, then 1 after 1.1 s', async () => {
      const limiter = createLimiter({
        store: storeCase.store(),
        prefix: uniquePrefix(),
        policy: tokenBucket({ capacity: 3, refillPerSecond: 1 }),
      });
      const taken: number[] = [];
      for (let i = 0; i < 5; i++) taken.push((await limiter.limit('k')).allowed ? 1 : 0);
      await sleep(1100);
      taken.push((await limiter.limit('k')).allowed ? 1 : 0);
      assert.deepEqual(taken, [1, 1, 1, 0, 0, 1]);
    });
  });
}
