import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CostExceedsLimitError,
  InvalidArgumentError,
  InvalidOptionError,
  WrongMethodError,
  concurrency,
  createLimiter,
  fixedWindow,
  gcra,
  slidingLog,
  tokenBucket,
  type LimiterOptions,
} from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';
import { assertEveryKeyHasTtl, keysWithTtl, uniquePrefix, useRedis, type StoreCase } from '../support/redis.js';
import { policyKey } from '../support/keys.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const HOUR = 3_600_000;
const harness = useRedis({ cluster: true });

function limiterOn(storeCase: StoreCase, options: Omit<LimiterOptions, 'store'>) {
  // Operations are tested, not the failure policy: on a busy machine a slow reply is still a reply.
  return createLimiter({ store: storeCase.store(), prefix: uniquePrefix(), timeout: '1m', ...options });
}

for (const storeCase of harness.cases) {
  describe(`operations: ${storeCase.name}`, () => {
    describe('several policies in one atomic step', () => {
      it('admits only what every policy admits, and counts a denial in none', async () => {
        const limiter = limiterOn(storeCase, {
          policy: [
            gcra({ limit: 3, period: '1h', name: 'short' }),
            fixedWindow({ limit: 5, window: '1h', name: 'long' }),
          ],
        });
        for (let i = 0; i < 3; i++) assert.equal((await limiter.limit('k')).allowed, true);
        const denied = await limiter.limit('k');
        assert.equal(denied.allowed, false);
        assert.deepEqual(
          denied.policies.map((p) => [p.name, p.allowed, p.remaining]),
          [
            ['short', false, 0],
            ['long', true, 2],
          ],
        );
        // the tightest policy speaks for the decision
        assert.equal(denied.limit, 3);
        assert.equal(denied.retryAfterMs, denied.policies[0]?.retryAfterMs);
        // the denial spent nothing in the long window
        assert.equal((await limiter.peek('k')).policies[1]?.remaining, 2);
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
      });

      it('admits exactly the tightest limit out of 1,000 concurrent calls', async () => {
        const limiter = limiterOn(storeCase, { policy: algorithms.map((a, i) => a.policy(100 + i * 10, HOUR)) });
        const decisions = await Promise.all(Array.from({ length: 1000 }, () => limiter.limit('hot')));
        assert.equal(decisions.filter((d) => d.allowed).length, 100);
        const after = await limiter.peek('hot');
        assert.deepEqual(
          after.policies.map((p) => p.remaining),
          algorithms.map((_, i) => i * 10),
        );
      });

      it('demands a cost every policy could admit', async () => {
        const limiter = limiterOn(storeCase, {
          policy: [fixedWindow({ limit: 10, window: '1m' }), gcra({ limit: 10, period: '1m', burst: 2 })],
        });
        await assert.rejects(
          limiter.limit('k', { cost: 3 }),
          (e: unknown) => e instanceof CostExceedsLimitError && e.limit === 2,
        );
      });
    });

    describe('refund', () => {
      for (const algorithm of algorithms) {
        it(`${algorithm.name}: gives units back, never creating state nor exceeding the limit`, async () => {
          const limiter = limiterOn(storeCase, { policy: algorithm.policy(5, HOUR) });
          assert.equal(await limiter.refund('fresh', 2), false);
          assert.equal((await limiter.peek('fresh')).remaining, 5);
          if (storeCase.redis) assert.equal((await keysWithTtl(storeCase.redis, limiter.prefix)).size, 0);
          await limiter.limit('k', { cost: 3 });
          assert.equal(await limiter.refund('k', 1), true);
          assert.equal((await limiter.peek('k')).remaining, 3);
          await limiter.refund('k', 10);
          assert.equal((await limiter.peek('k')).remaining, 5);
          await assertEveryKeyHasTtl(storeCase, limiter.prefix);
        });
      }

      if (storeCase.inRedis) {
        it('slidingLog: gives nothing back, and says so, when every entry has left the window but the key lives', async () => {
          const limiter = limiterOn(storeCase, { policy: slidingLog({ limit: 5, window: 50 }) });
          await limiter.limit('k', { cost: 2 });
          // The key outlives its entries, as it does for the last ms of its TTL.
          await storeCase.redis!.pexpire(policyKey(limiter), 60_000);
          await sleep(80);
          assert.equal(await limiter.refund('k'), false);
          assert.equal((await limiter.peek('k')).remaining, 5);
        });
      }

      it('rejects a bad cost, a cost by unit of 0 in every unit as 0 is, and a decision that is none', async () => {
        const limiter = limiterOn(storeCase, { policy: fixedWindow({ limit: 5, window: '1m', counts: 'tokens' }) });
        await limiter.limit('k', { cost: 3 });
        for (const cost of [0, 1.5, 2 ** 60, Number.NaN, { tokens: 0 }, {}])
          await assert.rejects(limiter.refund('k', cost as number), InvalidArgumentError, JSON.stringify(cost));
        for (const decision of [{}, 'yes', { allowed: true, decidedAt: -1 }])
          await assert.rejects(limiter.refund('k', 1, { decision: decision as never }), InvalidArgumentError);
        assert.equal((await limiter.peek('k')).remaining, 2, 'nothing was given back');
      });

      it('with { decision }: gives back where it charged, and nothing for a decision that charged nothing', async () => {
        await awayFromWindowEnd(60_000, 5_000);
        const limiter = limiterOn(storeCase, { policy: fixedWindow({ limit: 3, window: '1m' }) });
        const admitted = await limiter.limit('k', { cost: 3 });
        const denied = await limiter.limit('k');
        assert.equal(typeof admitted.decidedAt, 'number');
        assert.equal(await limiter.refund('k', 1, { decision: denied }), false);
        assert.equal(await limiter.refund('k', 1, { decision: { ...admitted, reason: 'timeout' } }), false);
        assert.equal(await limiter.refund('k', 1, { decision: { ...admitted, decidedAt: undefined } }), false);
        assert.equal((await limiter.peek('k')).remaining, 0, 'nothing given back for them');
        assert.equal(await limiter.refund('k', 2, { decision: admitted }), true);
        assert.equal((await limiter.peek('k')).remaining, 2);
        // Charged a minute earlier: that window's units went with it.
        const lastMinute = { ...admitted, decidedAt: (admitted.decidedAt as number) - 60_000 };
        assert.equal(await limiter.refund('k', 1, { decision: lastMinute }), false);
        assert.equal((await limiter.peek('k')).remaining, 2);
      });
    });

    describe('block and the penalty box', () => {
      it('a blocked key is denied without touching its state, and peek shows it', async () => {
        const limiter = limiterOn(storeCase, { policy: slidingLog({ limit: 5, window: '1h' }) });
        await limiter.limit('k');
        // Long enough that a loaded machine's pause before the next call does not end it.
        await limiter.block('k', 600);
        const denied = await limiter.limit('k');
        assert.equal(denied.allowed, false);
        assert.ok(
          denied.blockedForMs && denied.blockedForMs > 0 && denied.blockedForMs <= 600,
          String(denied.blockedForMs),
        );
        assert.equal(denied.retryAfterMs, denied.blockedForMs);
        assert.equal((await limiter.peek('k')).allowed, false);
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
        await sleep(denied.retryAfterMs + 2);
        assert.equal((await limiter.limit('k')).remaining, 3, 'the block spent nothing');
        await assert.rejects(
          limiter.block('k', '1x' as never),
          (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'duration',
        );
      });

      if (storeCase.inRedis) {
        it('a call during a block gives a block key that lost its TTL (PERSIST) its TTL back', async () => {
          const redis = storeCase.redis!;
          const limiter = limiterOn(storeCase, { policy: fixedWindow({ limit: 5, window: '1h' }) });
          const blockKey = limiter.storageKeys('k').block;
          await limiter.block('k', '1h');
          assert.equal(await redis.persist(blockKey), 1);
          assert.equal((await limiter.peek('k')).allowed, false);
          assert.equal(await redis.pttl(blockKey), -1, 'peek writes nothing');
          const denied = await limiter.limit('k');
          assert.ok(denied.blockedForMs && denied.blockedForMs > HOUR - 5_000, String(denied.blockedForMs));
          // It expires when the block ends: the time the key holds.
          assert.equal(await redis.call('PEXPIRETIME', blockKey), Number(await redis.get(blockKey)));
        });
      }

      it('blocks a key after N denials in a row; the Nth says so, with the block as its retryAfterMs', async () => {
        const limiter = limiterOn(storeCase, {
          policy: fixedWindow({ limit: 1, window: '1m' }),
          penalty: { after: 3, block: '1h' },
        });
        await awayFromWindowEnd(60_000, 10_000);
        await limiter.limit('k');
        for (let i = 0; i < 2; i++) assert.equal((await limiter.limit('k')).blockedForMs, undefined);
        // Its policy alone would admit the key again within a minute: a client told that would come
        // back to a block.
        const third = await limiter.limit('k');
        assert.deepEqual(
          [third.allowed, third.blockedForMs, third.retryAfterMs, third.policies[0]?.retryAfterMs],
          [false, HOUR, HOUR, HOUR],
        );
        const blocked = await limiter.limit('k');
        assert.ok(blocked.blockedForMs && blocked.blockedForMs > HOUR - 5_000);
        await limiter.reset('k');
        assert.equal((await limiter.limit('k')).allowed, true, 'reset lifts the block');
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
      });

      it('a block written by a call holds for the calls after it in the same tick', async () => {
        // The Redis store sends a tick's calls as one batch, which learns with one EXISTS that no
        // block key exists: a block its requests write must still be read by those after them.
        const limiter = limiterOn(storeCase, {
          policy: fixedWindow({ limit: 2, window: '1h' }),
          penalty: { after: 1, block: '1h' },
        });
        const struck = await Promise.all(Array.from({ length: 5 }, () => limiter.limit('struck')));
        assert.deepEqual(
          struck.map((d) => [d.allowed, d.blockedForMs !== undefined]),
          [
            [true, false],
            [true, false],
            [false, true],
            [false, true],
            [false, true],
          ],
        );
        const [, blocked] = await Promise.all([limiter.block('blocked', '1h'), limiter.limit('blocked')]);
        assert.ok(blocked.blockedForMs && blocked.blockedForMs > HOUR - 5_000, String(blocked.blockedForMs));
      });
    });

    describe('waitFor', () => {
      it('waits exactly retryAfterMs, then takes the units', async () => {
        const limiter = limiterOn(storeCase, { policy: gcra({ limit: 2, period: 400, burst: 1 }) });
        // Timed from before the first call: the store admits the second one 200 ms after the first by
        // its own clock, so no slowness here can shorten the wait. (Timed from after it, a late resume
        // did: 149 ms once, under load.) test/limiter/built-on-limit.test.ts times it exactly, on a fake clock.
        const started = Date.now();
        await limiter.limit('k');
        const decision = await limiter.waitFor('k');
        assert.equal(decision.allowed, true);
        assert.ok(Date.now() - started >= 150, `waited ${Date.now() - started} ms`);
      });

      it('gives up at once when the wait would pass the timeout, and honours an AbortSignal', async () => {
        // A sliding log waits the whole hour at any time of day (a fixed window's hour ends on the
        // clock's, and in its last seconds the wait would fit in the timeout).
        const limiter = limiterOn(storeCase, { policy: slidingLog({ limit: 1, window: '1h' }) });
        await limiter.limit('k');
        const started = Date.now();
        assert.equal((await limiter.waitFor('k', { timeout: '10s' })).allowed, false);
        // Back before the timeout could pass, so it did not wait: a bound no slowness of one call reaches.
        assert.ok(Date.now() - started < 10_000, `gave up after ${Date.now() - started} ms`);
        const slow = limiterOn(storeCase, { policy: gcra({ limit: 1, period: '10s', burst: 1 }) });
        await slow.limit('k');
        // Rejects with the signal's reason itself, whether aborted during the wait or before the call.
        const reason = new Error('the caller went away');
        const controller = new AbortController();
        const waiting = slow.waitFor('k', { signal: controller.signal });
        setTimeout(() => controller.abort(reason), 20);
        await assert.rejects(waiting, (e: unknown) => e === reason);
        await assert.rejects(slow.waitFor('k', { signal: controller.signal }), (e: unknown) => e === reason);
        await assert.rejects(slow.waitFor('k', { timeout: -1 as never }), InvalidArgumentError);
      });
    });

    it('a per-call policy (a paid tier) shares the key state', async () => {
      const free = fixedWindow({ limit: 2, window: '1h' });
      const paid = fixedWindow({ limit: 10, window: '1h' });
      const limiter = limiterOn(storeCase, { policy: free });
      await limiter.limit('k', { cost: 2 });
      assert.equal((await limiter.limit('k')).allowed, false);
      const upgraded = await limiter.limit('k', { policy: paid });
      assert.deepEqual([upgraded.allowed, upgraded.remaining], [true, 7]);
      await assert.rejects(
        limiter.limit('k', { policy: { limit: 3 } as never }),
        (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'policy',
      );
      await assert.rejects(
        limiter.limit('k', { policy: [paid, paid] }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.argument === 'policy' && /distinct names/.test(e.message),
      );
      assert.equal((await limiter.peek('k', { policy: paid })).remaining, 7);
    });

    it('shadow mode allows everything and says what it would have denied', async () => {
      const limiter = limiterOn(storeCase, {
        policy: tokenBucket({ capacity: 2, refillPerSecond: 0.001 }),
        shadow: true,
      });
      const decisions = [await limiter.limit('k'), await limiter.limit('k'), await limiter.limit('k')];
      assert.deepEqual(
        decisions.map((d) => [d.allowed, d.shadow, d.shadowDenied, d.retryAfterMs]),
        [
          [true, true, false, 0],
          [true, true, false, 0],
          [true, true, true, 0],
        ],
      );
      assert.throws(
        () =>
          createLimiter({
            store: storeCase.store(),
            policy: tokenBucket({ capacity: 2, refillPerSecond: 1 }),
            shadow: 'yes' as never,
          }),
        InvalidOptionError,
      );
    });

    describe('budgets: a cost per unit, reserve and settle', () => {
      const budget = () =>
        limiterOn(storeCase, {
          policy: [
            fixedWindow({ limit: 3, window: '1h', name: 'requests' }),
            tokenBucket({ capacity: 1000, refillPerSecond: 1000 / 86_400, name: 'tokens', counts: 'tokens' }),
            fixedWindow({ limit: 1500, window: '1d', name: 'tokens-daily', counts: 'tokens' }),
          ],
        });
      const remaining = (d: { policies: readonly { remaining: number }[] }) => d.policies.map((p) => p.remaining);

      it("takes each policy's own cost in one step; a denial takes none; a unit left out costs 0", async () => {
        const limiter = budget();
        const first = await limiter.limit('k', { cost: { requests: 1, tokens: 600 } });
        assert.deepEqual([first.allowed, remaining(first)], [true, [2, 400, 900]]);
        assert.deepEqual(
          first.policies.map((p) => p.counts),
          ['requests', 'tokens', 'tokens'],
        );
        const denied = await limiter.limit('k', { cost: { requests: 1, tokens: 600 } });
        assert.deepEqual([denied.allowed, denied.policies.map((p) => p.allowed)], [false, [true, false, true]]);
        assert.deepEqual(remaining(await limiter.peek('k')), [2, 400, 900]);
        assert.deepEqual(remaining(await limiter.limit('k', { cost: { requests: 1, tokens: 400 } })), [1, 0, 500]);
        const requestOnly = await limiter.limit('k', { cost: { requests: 1 } });
        assert.deepEqual([requestOnly.allowed, remaining(requestOnly)], [true, [0, 0, 500]]);
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
      });

      it('refuses a bad cost by unit, writing nothing', async () => {
        const limiter = budget();
        const refused = async (cost: unknown, argument: string) =>
          assert.rejects(
            limiter.limit('k', { cost: cost as never }),
            (e: unknown) => e instanceof InvalidArgumentError && e.argument === argument,
          );
        await refused({ tokens: -1 }, 'cost.tokens');
        await refused({ tokens: 1.5 }, 'cost.tokens');
        await refused({ token: 5 }, 'cost.token');
        await refused({ requests: 0, tokens: 0 }, 'cost');
        await refused([1, 2], 'cost');
        await assert.rejects(limiter.limit('k', { cost: { tokens: 1001 } }), CostExceedsLimitError);
        await assert.rejects(
          limiter.refund('k', { tokns: 1 }),
          (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'cost.tokns',
        );
        assert.deepEqual(remaining(await limiter.peek('k')), [3, 1000, 1500]);
        if (storeCase.redis) assert.equal((await keysWithTtl(storeCase.redis, limiter.prefix)).size, 0);
      });

      it('corrects each unit on its own; cancel gives everything back; a denied or unsettled reservation is what it was', async () => {
        const limiter = budget();
        const reservation = await limiter.reserve('k', { cost: { requests: 1, tokens: 500 } });
        assert.equal(await reservation.settle({ requests: 1, tokens: 800 }), true);
        assert.deepEqual(remaining(await limiter.peek('k')), [2, 200, 700]);
        // Units left out cost 0: this request's settle gives its request back too.
        const unit = await limiter.reserve('k', { cost: { requests: 1, tokens: 100 } });
        assert.equal(await unit.settle({ tokens: 50 }), true);
        assert.deepEqual(remaining(await limiter.peek('k')), [2, 150, 650]);
        const cancelled = await limiter.reserve('k', { cost: { requests: 1, tokens: 100 } });
        assert.equal(await cancelled.cancel(), true);
        assert.equal(await cancelled.settle({ tokens: 1 }), false);
        const denied = await limiter.reserve('k', { cost: { requests: 1, tokens: 151 } });
        assert.equal(denied.allowed, false);
        assert.equal(await denied.settle({ tokens: 151 }), false);
        await limiter.reserve('k', { cost: { requests: 1, tokens: 100 } });
        assert.deepEqual(remaining(await limiter.peek('k')), [1, 50, 550]);
        await assert.rejects(
          cancelled.settle({ tokens: -1 }),
          (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'actual.tokens',
        );
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
      });

      it('waitFor waits until every policy can take its own cost, or gives up at once', async () => {
        const limiter = limiterOn(storeCase, {
          policy: [
            fixedWindow({ limit: 100, window: '1h', name: 'requests' }),
            // Deep enough that the full bucket asked for last takes 2 s to refill: no pause between two
            // calls here comes near (with 10 tokens, 200 ms under load once refilled it).
            tokenBucket({ capacity: 100, refillPerSecond: 50, name: 'tokens', counts: 'tokens' }),
          ],
        });
        // Timed from before the bucket is emptied, so that no slowness here can shorten the wait.
        const started = Date.now();
        await limiter.limit('k', { cost: { requests: 1, tokens: 100 } });
        const waited = await limiter.waitFor('k', { cost: { requests: 1, tokens: 5 } });
        assert.equal(waited.allowed, true);
        assert.ok(Date.now() - started >= 90, `waited ${Date.now() - started} ms for 5 tokens at 50 a second`);
        const gaveUp = await limiter.waitFor('k', { cost: { requests: 1, tokens: 100 }, timeout: 50 });
        assert.deepEqual([gaveUp.allowed, gaveUp.policies[1]?.allowed], [false, false]);
        assert.ok(gaveUp.retryAfterMs > 50);
      });
    });

    describe('concurrency', () => {
      it('admits exactly the limit out of 1,000 concurrent acquisitions', async () => {
        const limiter = limiterOn(storeCase, { policy: concurrency({ limit: 100, leaseMs: '1m' }) });
        const leases = await Promise.all(Array.from({ length: 1000 }, () => limiter.acquire('k')));
        assert.equal(leases.filter((l) => l.allowed).length, 100);
        await Promise.all(leases.map((l) => l.release()));
        assert.equal((await limiter.peek('k')).remaining, 100);
      });

      it('releases once, extends, and frees the slot of a holder that never returns', async () => {
        // Leases long enough that a loaded machine's pauses between calls do not end them.
        const limiter = limiterOn(storeCase, { policy: concurrency({ limit: 1, leaseMs: 1000 }) });
        const lease = await limiter.acquire('k');
        assert.equal(lease.allowed, true);
        assert.equal((await limiter.acquire('k')).allowed, false);
        assert.equal(await lease.release(), true);
        assert.equal(await lease.release(), false, 'a second release is harmless');
        const crashed = await limiter.acquire('k');
        assert.equal(await crashed.extend(1500), true);
        const waiting = await limiter.acquire('k');
        assert.equal(waiting.allowed, false);
        // Extended past its own leaseMs (1000), and never beyond the 1500 ms asked.
        assert.ok(waiting.retryAfterMs > 1000 && waiting.retryAfterMs <= 1500, String(waiting.retryAfterMs));
        await assertEveryKeyHasTtl(storeCase, limiter.prefix);
        await sleep(waiting.retryAfterMs + 2);
        assert.equal((await limiter.acquire('k')).allowed, true, 'the expired lease freed its slot');
        assert.equal(await crashed.extend(), false, 'an expired lease cannot be extended');
      });

      it('does not release a lease that expired, even before it is pruned', async () => {
        const limiter = limiterOn(storeCase, { policy: concurrency({ limit: 2, leaseMs: 800 }) });
        const expired = await limiter.acquire('k');
        await sleep(400);
        // A later lease keeps the key, and the expired one in it, until it ends: 400 ms or more
        // after the first, so that a loaded machine's pause before its release does not end it too.
        const running = await limiter.acquire('k');
        await sleep(expired.resetAfterMs - 400 + 5);
        assert.equal(await expired.release(), false);
        assert.equal(await running.release(), true);
      });

      if (storeCase.inRedis) {
        it('a release gives a key that lost its TTL (PERSIST) its TTL back', async () => {
          const redis = storeCase.redis!;
          const limiter = limiterOn(storeCase, { policy: concurrency({ limit: 2, leaseMs: '1m' }) });
          const key = policyKey(limiter);
          const [first] = await Promise.all([limiter.acquire('k'), limiter.acquire('k')]);
          assert.equal(await redis.persist(key), 1);
          assert.equal(await first?.release(), true);
          assert.equal(await redis.zcard(key), 1);
          const ttl = await redis.pttl(key);
          assert.ok(ttl > 0 && ttl <= 60_001, `PTTL ${ttl}`);
        });
      }

      it('wants acquire(), and acquire() wants a concurrency policy', async () => {
        const limiter = limiterOn(storeCase, { policy: concurrency({ limit: 1, leaseMs: '1s' }) });
        await assert.rejects(limiter.limit('k'), WrongMethodError);
        const rate = limiterOn(storeCase, { policy: fixedWindow({ limit: 1, window: '1s' }) });
        await assert.rejects(
          rate.acquire('k'),
          (e: unknown) => e instanceof WrongMethodError && e.code === 'SLUICE_WRONG_METHOD',
        );
      });
    });
  });
}
