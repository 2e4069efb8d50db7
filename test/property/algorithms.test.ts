import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { callKeys } from '../../src/core/keys.js';
import { scriptArgs, scriptFor } from '../../src/engine/driver.js';
import type { Decision, Policy } from '../../src/core/types.js';
import type { Reply } from '../../src/engine/script.js';
import { createLimiter, memoryStore, redisStore, tokenBucket, type Store } from '../../src/index.js';
import { assertNeverOverAdmitted, type Admission } from '../support/admissions.js';
import { algorithms } from '../support/algorithms.js';
import { junkKinds, serverNow } from '../support/junk.js';
import { keysWithTtl, uniquePrefix, useRedis } from '../support/redis.js';
import { decodeReply } from '../../src/engine/reply.js';

const harness = useRedis();
// A fixed seed, so a failure replays the same way (fast-check prints the shrunk counterexample);
// SEED=<n> explores other sequences.
const SEED = Number(process.env.SEED ?? 20_260_530);

/** A decision, or the script's reply for a single policy. */
function assertSound(decision: Decision | Reply, limit: number): void {
  const { allowed, remaining, retryAfterMs } =
    'allowed' in decision
      ? decision
      : (decodeReply(decision).policies[0] ?? { allowed: false, remaining: -1, retryAfterMs: -1 });
  assert.ok(Number.isInteger(remaining) && remaining >= 0 && remaining <= limit, `remaining ${remaining}`);
  assert.equal(retryAfterMs === 0, allowed, `retryAfterMs ${retryAfterMs} when allowed is ${allowed}`);
}

/**
 * A memory store whose every write is checked: a TTL of at least 1 ms and at most about what the
 * algorithm keeps (a window; two for the sliding window counter, which remembers the last one).
 */
function ttlCheckedStore(inner: Store, policy: Policy, windowMs: number): Store {
  const most = (policy.algorithm === 'sliding-window' ? 2 * windowMs : windowMs) + 2;
  return {
    run: (script, keys, args) =>
      inner.run(
        {
          ...script,
          twin(now, cells, scriptArgsList) {
            const reply = script.twin(now, cells, scriptArgsList);
            for (const cell of cells) {
              if (cell.written && cell.held)
                assert.ok(cell.ttlMs >= 1 && cell.ttlMs <= most, `TTL ${cell.ttlMs} for a ${windowMs} ms window`);
            }
            return reply;
          },
        },
        keys,
        args,
      ),
  };
}

const step = (maxCost: number, maxPauseMs: number) =>
  fc.record({
    pauseMs: fc.integer({ min: 0, max: maxPauseMs }),
    key: fc.constantFrom('a', 'b', 'c'),
    cost: fc.integer({ min: 1, max: maxCost }),
    retryIfDenied: fc.boolean(),
  });

describe('properties of every twin, on a fake clock', () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: never over the limit, remaining never negative, a retry after retryAfterMs admitted, every write with a TTL`, async () => {
      const scenario = fc
        .record({
          limit: fc.integer({ min: 1, max: 8 }),
          windowMs: fc.integer({ min: 10, max: 2_000 }),
          start: fc.integer({ min: 0, max: 10 ** 12 }),
        })
        .chain((p) =>
          fc.record({
            policy: fc.constant(p),
            steps: fc.array(step(p.limit, p.windowMs), { minLength: 1, maxLength: 60 }),
          }),
        );
      await fc.assert(
        fc.asyncProperty(scenario, async ({ policy: { limit, windowMs, start }, steps }) => {
          const policy = algorithm.policy(limit, windowMs);
          let now = start;
          const limiter = createLimiter({
            store: ttlCheckedStore(memoryStore({ now: () => now }), policy, windowMs),
            policy,
          });
          const admissions: Admission[] = [];
          const ask = async (key: string, cost: number) => {
            const decision = await limiter.limit(key, { cost });
            assertSound(decision, limit);
            if (decision.allowed) admissions.push({ key, at: now, cost });
            return decision;
          };
          for (const { pauseMs, key, cost, retryIfDenied } of steps) {
            now += pauseMs;
            const decision = await ask(key, cost);
            if (!decision.allowed && retryIfDenied) {
              now += decision.retryAfterMs;
              assert.equal((await ask(key, cost)).allowed, true, `a retry after ${decision.retryAfterMs} ms`);
            }
          }
          assertNeverOverAdmitted(policy, windowMs, admissions);
        }),
        { numRuns: 300, seed: SEED, includeErrorInReport: true },
      );
    });
  }
});

describe('reserve and settle, on a stopped clock: what a key holds is what was settled, owing at most one limit', () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: admitted while the estimate fits; settle gives back down to 0 or takes up to two limits`, async () => {
      const scenario = fc.integer({ min: 1, max: 8 }).chain((limit) =>
        fc.record({
          limit: fc.constant(limit),
          steps: fc.array(
            fc.record({
              estimate: fc.integer({ min: 1, max: limit }),
              actual: fc.integer({ min: 0, max: 3 * limit }),
              end: fc.constantFrom('settle', 'cancel', 'none'),
            }),
            {
              minLength: 1,
              maxLength: 40,
            },
          ),
        }),
      );
      await fc.assert(
        fc.asyncProperty(scenario, async ({ limit, steps }) => {
          // In the middle of an hour's window, still: no window ends and nothing refills.
          const now = 1_800_000_000_000 + 1_800_000;
          const limiter = createLimiter({
            store: memoryStore({ now: () => now }),
            policy: algorithm.policy(limit, 3_600_000, { counts: 'tokens' }),
          });
          let held = 0;
          for (const { estimate, actual, end } of steps) {
            const reservation = await limiter.reserve('k', { cost: { tokens: estimate } });
            assert.equal(
              reservation.allowed,
              held + estimate <= limit,
              `holding ${held} of ${limit}, asked ${estimate}`,
            );
            if (reservation.allowed) held += estimate;
            const settled =
              end === 'settle'
                ? await reservation.settle({ tokens: actual })
                : end === 'cancel'
                  ? await reservation.cancel()
                  : false;
            if (settled) {
              const delta = (end === 'settle' ? actual : 0) - estimate;
              held = delta < 0 ? Math.max(0, held + delta) : held + Math.min(delta, 2 * limit - held);
            }
            assert.equal((await limiter.peek('k')).remaining, Math.max(0, limit - held), `holding ${held} of ${limit}`);
          }
        }),
        { numRuns: 100, seed: SEED, includeErrorInReport: true },
      );
    });
  }
});

describe('token bucket retryAfterMs (found by the properties above)', () => {
  it('is never 1 ms short when (cost - tokens) / rate rounds down', async () => {
    let now = 613_116_540_349;
    const limiter = createLimiter({
      store: memoryStore({ now: () => now }),
      policy: tokenBucket({ capacity: 3, refillPerSecond: 3000 / 164 }),
    });
    await limiter.limit('k', { cost: 3 });
    now += (await limiter.limit('k')).retryAfterMs;
    assert.equal((await limiter.limit('k')).allowed, true);
    const denied = await limiter.limit('k', { cost: 2 });
    now += denied.retryAfterMs;
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, true, `retried after ${denied.retryAfterMs} ms`);
  });
});

describe('properties of every Lua script, checked against its twin', { concurrency: true }, () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: Redis decides as the twin does at Redis's time, within the limit, every key with a TTL`, async () => {
      const scenario = fc
        .record({ limit: fc.integer({ min: 1, max: 5 }), windowMs: fc.integer({ min: 20, max: 80 }) })
        .chain((p) =>
          fc.record({ policy: fc.constant(p), steps: fc.array(step(p.limit, 15), { minLength: 1, maxLength: 25 }) }),
        );
      await fc.assert(
        fc.asyncProperty(scenario, async ({ policy: { limit, windowMs }, steps }) => {
          const policy = algorithm.policy(limit, windowMs);
          const prefix = uniquePrefix();
          const lua = redisStore(harness.redis);
          const script = scriptFor([policy.kind]);
          // The twin runs each step at the very ms Redis used: the reply's second field.
          let now = 0;
          const twin = ttlCheckedStore(memoryStore({ now: () => now }), policy, windowMs);
          const admissions: Admission[] = [];
          const ask = async (key: string, cost: number): Promise<Reply> => {
            const keys = callKeys(prefix, key, [policy]);
            const args = scriptArgs({
              op: 'limit',
              cost,
              target: 0,
              ms: 0,
              penalty: { strikes: 0, blockMs: 0 },
              policies: [policy],
            });
            const fromRedis = await lua.run(script, keys, args);
            const decoded = decodeReply(fromRedis);
            now = decoded.nowMs;
            assert.deepEqual(await twin.run(script, keys, args), fromRedis, `${key}, cost ${cost} at ${now}`);
            assertSound(fromRedis, limit);
            if (policy.algorithm === 'gcra' || policy.algorithm === 'token-bucket') {
              // The key expires the very ms its state equals a fresh key's (resetAfterMs from now).
              const expiry = Number(await harness.redis.call('PEXPIRETIME', keys.at(-1) ?? ''));
              const reset = decoded.policies[0]?.resetAfterMs ?? 0;
              // Read after the call: a key fresh within a ms or two may be gone by then, but only once that time has passed.
              const [seconds = 0, micros = 0] = expiry === -2 ? (await harness.redis.time()).map(Number) : [];
              const gone = expiry === -2 && Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) >= now + reset;
              if (reset > 0 && !gone)
                assert.equal(expiry, now + reset, `${key} expires at ${expiry}, fresh at ${now + reset}`);
              else
                assert.ok(
                  expiry === -2 || (expiry > 0 && expiry <= now),
                  `${key}, fresh at ${now}, expires at ${expiry}`,
                );
            }
            if (decoded.allowed) admissions.push({ key, at: now, cost });
            return fromRedis;
          };
          for (const { pauseMs, key, cost, retryIfDenied } of steps) {
            if (pauseMs > 0) await sleep(pauseMs);
            const reply = await ask(key, cost);
            const { allowed, policies } = decodeReply(reply);
            const retryAfterMs = policies[0]?.retryAfterMs ?? 0;
            if (!allowed && retryIfDenied) {
              // A timer may fire a ms early; Redis's clock must have passed retryAfterMs.
              await sleep(retryAfterMs + 2);
              assert.equal(decodeReply(await ask(key, cost)).allowed, true, `a retry after ${retryAfterMs} ms`);
            }
          }
          assertNeverOverAdmitted(policy, windowMs, admissions);
          // 0: under a ms left, which these short windows make likely; -1 would be a key kept forever.
          for (const [key, ttl] of await keysWithTtl(harness.redis, prefix))
            assert.ok(ttl >= 0, `${key} has PTTL ${ttl}`);
        }),
        { numRuns: 15, seed: SEED, includeErrorInReport: true },
      );
    });
  }
});

// Where junk can be written: any kind into the block key, and every kind meant for it into the policy's.
const junkPlacements = junkKinds.flatMap((kind) =>
  (kind.roles ?? ['policy', 'block']).filter((role) => role !== 'strikes').map((role) => ({ kind, role })),
);

describe('every Lua script heals junk written into its keys', { concurrency: true }, () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: whatever junk is written, and when, no error, within the limit from then on, every key with a TTL`, async () => {
      const scenario = fc
        .record({ limit: fc.integer({ min: 1, max: 5 }), windowMs: fc.integer({ min: 20, max: 80 }) })
        .chain((p) =>
          fc.record({
            policy: fc.constant(p),
            steps: fc.array(step(p.limit, 15), { minLength: 1, maxLength: 25 }),
            placement: fc.constantFrom(...junkPlacements),
            at: fc.nat({ max: 24 }),
          }),
        );
      await fc.assert(
        fc.asyncProperty(scenario, async ({ policy: { limit, windowMs }, steps, placement: { kind, role }, at }) => {
          const policy = algorithm.policy(limit, windowMs);
          const prefix = uniquePrefix();
          const lua = redisStore(harness.redis);
          const script = scriptFor([policy.kind]);
          const args = (cost: number) =>
            scriptArgs({
              op: 'limit',
              cost,
              target: 0,
              ms: 0,
              penalty: { strikes: 0, blockMs: 0 },
              policies: [policy],
            });
          let admissions: Admission[] = [];
          for (const [i, { pauseMs, key, cost }] of steps.entries()) {
            const keys = callKeys(prefix, key, [policy]);
            if (i === Math.min(at, steps.length - 1)) {
              const target = (role === 'block' ? keys[0] : keys[1]) ?? '';
              await harness.redis.del(target);
              await kind.write(harness.redis, target, await serverNow(harness.redis), windowMs);
              // Junk in the policy's key reads as empty: the key's count starts again.
              if (role === 'policy') admissions = admissions.filter((a) => a.key !== key);
            }
            if (pauseMs > 0) await sleep(pauseMs);
            const reply = await lua.run(script, keys, args(cost));
            assertSound(reply, limit);
            const { allowed, nowMs } = decodeReply(reply);
            if (allowed) admissions.push({ key, at: nowMs, cost });
          }
          assertNeverOverAdmitted(policy, windowMs, admissions);
          for (const [key, ttl] of await keysWithTtl(harness.redis, prefix))
            assert.ok(ttl >= 0, `${key} has PTTL ${ttl}`);
        }),
        { numRuns: 15, seed: SEED, includeErrorInReport: true },
      );
    });
  }
});
