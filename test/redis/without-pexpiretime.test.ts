import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { scriptFor, type Op } from '../../src/engine/driver.js';
import type { Script } from '../../src/engine/script.js';
import { createLimiter, fixedWindow, gcra, redisStore, tokenBucket } from '../../src/index.js';
import { WITHOUT_PEXPIRETIME, uniquePrefix, useRedis, type Harness } from '../support/redis.js';
import { enginePolicy, type EnginePolicy } from '../../src/engine/algorithm.js';
import { storageKey } from '../../src/core/keys.js';
import { callScript } from '../support/script-call.js';

// Redis 6.2, as tokenBucket and gcra see it; and a server with PEXPIRETIME, as after an upgrade.
const older = useRedis({ serverArgs: WITHOUT_PEXPIRETIME });
const newer = useRedis();

const CYCLE_MS = 1e9;

const cases: readonly { name: string; policy: EnginePolicy }[] = [
  { name: 'gcra', policy: enginePolicy(gcra({ limit: 3, period: '1h' })) },
  { name: 'tokenBucket', policy: enginePolicy(tokenBucket({ capacity: 3, refillPerSecond: 3 / 3600 })) },
];

/** One call of `script` (either form) through a store on `harness`'s server, with the time Redis used. */
function run(harness: Harness, script: Script, policy: EnginePolicy, prefix: string, op: Op, cost = 1) {
  return callScript(harness.redis, policy, prefix, op, cost, script);
}

for (const { name, policy } of cases) {
  const [step = 0, , perMs = 0] = policy.params;
  const script = scriptFor([policy.kind]);
  const olderForm = script.withoutPexpiretime;

  describe(`${name} on a server without PEXPIRETIME (Redis 6.2)`, () => {
    it('has a form that calls no PEXPIRETIME', () => {
      assert.ok(olderForm);
      assert.ok(script.lua.includes("'PEXPIRETIME'"));
      assert.ok(!olderForm.lua.includes("'PEXPIRETIME'"));
    });

    it("keeps the expiry's last nine digits in the value beside the remainder, and the expiry exact", async () => {
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      const { part, now } = await run(older, script, policy, prefix, 'limit', 2);
      const expiry = now + part.resetAfterMs;
      const value = Number(await older.redis.get(key));
      const rest = expiry * perMs - (now * perMs + 2 * step);
      assert.ok(rest >= 0 && rest < perMs, `rest ${rest}`);
      assert.equal(value, (CYCLE_MS + (expiry % CYCLE_MS)) * perMs + rest);
      const ttl = await older.redis.pttl(key);
      assert.ok(ttl <= expiry - now && ttl >= expiry - now - 1000, `PTTL ${ttl}, expiry ${expiry - now} ms from now`);
    });

    it('a first call that is a refund of several policies refunds each once', async () => {
      // Were the form learnt from a failed call, the fixed window would be refunded before the
      // script failed at gcra's PEXPIRETIME, and again by the retry.
      const policies = [fixedWindow({ limit: 3, window: '1h', name: 'hourly' }), policy];
      const prefix = uniquePrefix();
      await createLimiter({ store: redisStore(older.redis), policy: policies, prefix }).limit('k', { cost: 2 });
      const limiter = createLimiter({ store: redisStore(older.redis), policy: policies, prefix });
      assert.equal(await limiter.refund('k'), true);
      assert.deepEqual(
        (await limiter.peek('k')).policies?.map((p) => p.remaining),
        [2, 2],
      );
    });
  });

  describe(`${name}: keys move between the forms`, () => {
    it('a server with PEXPIRETIME reads a key of the older form as its expiry alone', async () => {
      assert.ok(olderForm);
      const prefix = uniquePrefix();
      const written = await run(newer, olderForm, policy, prefix, 'limit', 1);
      const read = await run(newer, script, policy, prefix, 'peek');
      // One step ahead (a whole number of ms here, so the remainder it reads as 0 is 0).
      assert.deepEqual(
        [read.part.allowed, read.part.remaining, read.part.resetAfterMs],
        [true, 2, written.now + written.part.resetAfterMs - read.now],
      );
    });

    it('the older form reads a key of the newer form from PTTL, and writes it in its own form', async () => {
      assert.ok(olderForm);
      const prefix = uniquePrefix();
      const key = storageKey(prefix, 'k', policy.kind.id);
      const written = await run(newer, script, policy, prefix, 'limit', 2);
      const read = await run(newer, olderForm, policy, prefix, 'peek');
      // now + PTTL is off by as much as Redis's expiry clock and TIME differ during the script: a
      // ms, more on a machine busy enough to pause the script between the two.
      const lag = read.part.resetAfterMs - (written.now + written.part.resetAfterMs - read.now);
      assert.ok(Math.abs(lag) <= 50, `resetAfter off by ${lag} ms`);
      await run(newer, olderForm, policy, prefix, 'limit', 1);
      assert.ok(Number(await newer.redis.get(key)) >= CYCLE_MS * perMs);
    });
  });
}

describe('a server without PEXPIRETIME: the store asks once', () => {
  it('asks on the first call only, and each store once', async () => {
    const policy = gcra({ limit: 5, period: '1h' });
    const store = redisStore(older.redis);
    const limiter = createLimiter({ store, policy, prefix: uniquePrefix() });
    await older.redis.script('FLUSH');
    await older.redis.config('RESETSTAT');
    const decisions = await Promise.all(Array.from({ length: 7 }, () => limiter.limit('k')));
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, true, true, true, false, false],
    );
    await limiter.limit('k');
    const stats = await older.redis.info('commandstats');
    // Each an EVALSHA answered NOSCRIPT, then an EVAL: the question, once; the batch of seven; the last call.
    assert.match(stats, /cmdstat_evalsha:calls=3,/);
    assert.match(stats, /cmdstat_eval:calls=3,/);
  });
});
