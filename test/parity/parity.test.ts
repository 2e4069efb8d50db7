import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { concurrency, memoryStore, redisStore, type Policy } from '../../src/index.js';
import { callKeys } from '../../src/core/keys.js';
import { scriptArgs, scriptFor, type Op } from '../../src/engine/driver.js';
import type { Reply } from '../../src/engine/script.js';
import { algorithms } from '../support/algorithms.js';
import { WITHOUT_PEXPIRETIME, uniquePrefix, useRedis, type Harness } from '../support/redis.js';
import { enginePolicy } from '../../src/engine/algorithm.js';
import { decodeReply } from '../../src/engine/reply.js';

const servers: readonly { name: string; harness: Harness; algorithms: typeof algorithms }[] = [
  { name: 'Redis', harness: useRedis(), algorithms },
  // Redis 6.2 to tokenBucket and gcra, which run their other form there.
  {
    name: 'Redis without PEXPIRETIME',
    harness: useRedis({ serverArgs: WITHOUT_PEXPIRETIME }),
    algorithms: algorithms.filter((a) => a.name === 'tokenBucket' || a.name === 'gcra'),
  },
];

/** A small deterministic generator, so a failing sequence can be replayed from its seed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

/**
 * Runs one random sequence of calls (limit with a cost, one for all policies or each its own; peek;
 * a quota lease's take of one policy; refund, settle into debt and back, each naming when an earlier admission was charged, or not;
 * release and extend of the leases taken) through the script in Redis, then each call through the TypeScript twins at the
 * very time Redis used (the reply's second field), and demands equal replies.
 */
async function compare(
  harness: Harness,
  publicPolicies: readonly Policy[],
  seed: number,
  steps: number,
  penalty = { strikes: 0, blockMs: 0 },
): Promise<void> {
  const policies = publicPolicies.map(enginePolicy);
  let now = 0;
  const twin = memoryStore({ now: () => now });
  const lua = redisStore(harness.redis);
  const prefix = uniquePrefix();
  const keys = callKeys(prefix, 'k', policies, penalty.strikes > 0);
  const script = scriptFor(policies.map((p) => p.kind));
  const next = random(seed);
  const leases: number[] = [];
  // When past calls were admitted: what refunds and settles name as their charge's time (or 0).
  const chargedAt: number[] = [];
  // A quota lease's take, on the one policy it leases (never a concurrency policy's slots).
  const takes = policies.length === 1 && policies[0]?.algorithm !== 'concurrency';
  for (let step = 0; step < steps; step++) {
    await sleep(Math.floor(next() * 40));
    const roll = next();
    const cost = 1 + Math.floor(next() * 3);
    const lease = leases.length > 0 && roll > 0.8 ? leases.splice(Math.floor(next() * leases.length), 1)[0] : undefined;
    const op: Op =
      lease !== undefined
        ? roll > 0.9
          ? 'extend'
          : 'release'
        : roll < 0.15
          ? 'peek'
          : roll < 0.25
            ? 'refund'
            : roll < 0.35
              ? 'settle'
              : takes && roll < 0.5
                ? 'take'
                : 'limit';
    // A cost of its own per policy (a cost by unit) a third of the time; settle's signed, and never
    // a lease's (reserve refuses concurrency).
    const own = (least: number, most: number) =>
      policies.map((p) =>
        p.algorithm === 'concurrency' && op === 'settle' ? 0 : least + Math.floor(next() * (most - least + 1)),
      );
    const costs =
      op === 'settle'
        ? own(-3, 6)
        : op === 'take'
          ? 2 + Math.floor(next() * 4)
          : op !== 'peek' && next() < 0.33
            ? own(0, 3)
            : op === 'peek'
              ? 1
              : cost;
    // take: at most the limit (5, as a lease's units are), and the fewest units it takes, below that.
    const least = typeof costs === 'number' ? 1 + Math.floor(next() * (costs - 1)) : 0;
    const charge =
      (op === 'refund' || op === 'settle') && chargedAt.length > 0 && next() < 0.6
        ? (chargedAt[Math.floor(next() * chargedAt.length)] as number)
        : 0;
    const target = op === 'take' ? least : (lease ?? charge);
    const args = scriptArgs({ op, cost: costs, target, ms: 150, penalty, policies });
    const fromRedis: Reply = await lua.run(script, keys, args);
    const decoded = decodeReply(fromRedis);
    now = decoded.nowMs;
    const fromTwin = await twin.run(script, keys, args);
    assert.deepEqual(fromTwin, fromRedis, `seed ${seed}, step ${step} (${op}, cost ${String(costs)}) at ${now}`);
    if (op === 'limit') for (const { leaseId } of decoded.policies) if (leaseId > 0) leases.push(leaseId);
    if ((op === 'limit' || op === 'take') && decoded.allowed) chargedAt.push(now);
  }
}

for (const { name, harness, algorithms } of servers) {
  describe(`parity on ${name}: the Lua scripts and their TypeScript twins decide alike`, { concurrency: true }, () => {
    for (const [i, algorithm] of algorithms.entries()) {
      it(`${algorithm.name}: a random sequence of pauses, costs, peeks, takes, refunds and settles`, async () => {
        // A short window, so the sequence crosses many windows and refills.
        await compare(harness, [algorithm.policy(5, 250)], 11 + i, 120);
      });
    }

    it('concurrency: acquisitions, releases and extensions of leases', async () => {
      await compare(harness, [concurrency({ limit: 4, leaseMs: 200 })], 7, 150);
    });

    it('several policies in one step, with the penalty box', async () => {
      const policies = [...algorithms.map((a) => a.policy(6, 300)), concurrency({ limit: 5, leaseMs: 250 })];
      await compare(harness, policies, 3, 150, { strikes: 3, blockMs: 120 });
    });
  });
}
