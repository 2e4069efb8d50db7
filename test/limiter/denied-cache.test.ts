import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  createLimiter,
  InvalidOptionError,
  memoryStore,
  type Decision,
  type Limiter,
  type Store,
} from '../../src/index.js';
import { algorithms } from '../support/algorithms.js';

/** A memory store on a fake clock that counts the steps it runs. */
function countingStore(clock: { now: number }): Store & { calls: number } {
  const store = memoryStore({ now: () => clock.now });
  const counting = {
    calls: 0,
    run: (...args: Parameters<Store['run']>) => {
      counting.calls++;
      return store.run(...args);
    },
  };
  return counting;
}

function limiters(clock: { now: number }, policy: ReturnType<(typeof algorithms)[number]['policy']>, maxKeys = 100) {
  const plainStore = countingStore(clock);
  const cachedStore = countingStore(clock);
  const now = () => clock.now;
  return {
    plain: createLimiter({ store: plainStore, policy }),
    cached: createLimiter({ store: cachedStore, policy, deniedCache: { maxKeys, now } }),
    plainStore,
    cachedStore,
  };
}

/** Both limiters decide the same request; their decisions must be equal. */
async function both(pair: { plain: Limiter; cached: Limiter }, key: string, cost = 1): Promise<Decision> {
  const expected = await pair.plain.limit(key, { cost });
  assert.deepEqual(await pair.cached.limit(key, { cost }), expected);
  return expected;
}

describe('deniedCache: answers from memory exactly what the store would', () => {
  for (const algorithm of algorithms) {
    it(`${algorithm.name}: a flood on a denied key asks the store once, until the denial ends`, async () => {
      const clock = { now: 1_000_000 };
      const pair = limiters(clock, algorithm.policy(2, 1000));
      await both(pair, 'k');
      await both(pair, 'k');
      const denied = await both(pair, 'k');
      assert.equal(denied.allowed, false);
      for (let step = 0; step < 20; step++) {
        clock.now += Math.floor(denied.retryAfterMs / 21);
        await both(pair, 'k');
      }
      assert.equal(pair.cachedStore.calls, 3, 'the flood was answered from memory');
      assert.equal(pair.plainStore.calls, 23);
      clock.now = 1_000_000 + denied.retryAfterMs;
      assert.equal((await both(pair, 'k')).allowed, true);
      assert.equal(pair.cachedStore.calls, 4, 'asked again once the denial ended');
    });
  }

  it('answers only cost-1 requests: a cost above 1 still asks the store', async () => {
    const clock = { now: 0 };
    const pair = limiters(clock, algorithms[0]!.policy(3, 1000));
    await both(pair, 'k', 3);
    await both(pair, 'k'); // denied: cached
    await both(pair, 'k');
    assert.equal(pair.cachedStore.calls, 2);
    assert.equal((await both(pair, 'k', 2)).allowed, false);
    assert.equal(pair.cachedStore.calls, 3);
  });

  it('forgets a key on reset, and the oldest key past maxKeys', async () => {
    const clock = { now: 0 };
    const pair = limiters(clock, algorithms[0]!.policy(1, 60_000), 2);
    for (const key of ['a', 'b', 'c']) {
      await both(pair, key);
      await both(pair, key); // denied, cached
    }
    const calls = pair.cachedStore.calls;
    await both(pair, 'b');
    await both(pair, 'c');
    assert.equal(pair.cachedStore.calls, calls, 'b and c are cached');
    await both(pair, 'a');
    assert.equal(pair.cachedStore.calls, calls + 1, 'a was evicted when c came in');
    await pair.plain.reset('b');
    await pair.cached.reset('b');
    assert.equal((await both(pair, 'b')).allowed, true);
  });

  it('rejects a bad deniedCache option when the limiter is built', () => {
    const policy = algorithms[0]!.policy(1, 1000);
    for (const [deniedCache, option] of [
      [{ maxKeys: 0 }, 'deniedCache.maxKeys'],
      [{}, 'deniedCache.maxKeys'],
      [{ maxKeys: 10, now: 5 }, 'deniedCache.now'],
      [true, 'deniedCache'],
    ] as const) {
      assert.throws(
        () => createLimiter({ store: memoryStore(), policy, deniedCache: deniedCache as never }),
        (e: unknown) => e instanceof InvalidOptionError && e.option === option,
      );
    }
  });
});
