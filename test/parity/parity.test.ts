import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { memoryStore, redisStore } from '../../src/index.js';
import type { Policy, Reply } from '../../src/core/types.js';
import { algorithms } from '../support/algorithms.js';
import { uniquePrefix, useRedis } from '../support/redis.js';

const harness = useRedis();

/** A small deterministic generator, so a failing sequence can be replayed from its seed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

/**
 * Runs one sequence of (pause, cost, mode) through the Lua script in Redis, then each step through
 * the TypeScript twin at the very time Redis used (the reply's last field), and compares replies.
 */
async function compare(policy: Policy, seed: number, steps: number): Promise<void> {
  let now = 0;
  const twin = memoryStore({ now: () => now });
  const lua = redisStore(harness.redis);
  const key = `${uniquePrefix()}:{k}:${policy.keySuffix}`;
  const next = random(seed);
  for (let step = 0; step < steps; step++) {
    await sleep(Math.floor(next() * 60));
    const cost = 1 + Math.floor(next() * 3);
    const mode = next() < 0.2 ? 'peek' : 'consume';
    const args = policy.args(mode === 'peek' ? 1 : cost, mode);
    const fromRedis: Reply = await lua.run(policy.script, [key], args);
    now = fromRedis[4];
    const fromTwin = await twin.run(policy.script, [key], args);
    assert.deepEqual(fromTwin, fromRedis, `seed ${seed}, step ${step} (${mode}, cost ${cost}) at ${now}`);
  }
}

describe('parity: the Lua script and its TypeScript twin decide alike', { concurrency: true }, () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: a random sequence of pauses, costs and peeks`, async () => {
      // A short window, so the sequence crosses many windows and refills.
      await compare(algorithm.policy(5, 250), 1 + algorithm.name.length, 120);
    });
  }
});
