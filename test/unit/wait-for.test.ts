import assert from 'node:assert/strict';
import { afterEach, beforeEach, it, mock } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { createLimiter, gcra, memoryStore, type Decision, type Store } from '../../src/index.js';

// waitFor's sleep on Node's mocked setTimeout, the memory store on a clock moved with it: the wait is
// measured exactly, however loaded the machine (the conformance suite checks it on every store).
beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
afterEach(() => mock.timers.reset());

it('waitFor waits exactly retryAfterMs, then takes the units', async () => {
  let now = 1_800_000_000_000;
  const memory = memoryStore({ now: () => now });
  let calls = 0;
  const counting: Store = { run: (...args) => (calls++, memory.run(...args)) };
  const limiter = createLimiter({ store: counting, policy: gcra({ limit: 2, period: 400, burst: 1 }) });
  await limiter.limit('k');
  const { retryAfterMs } = await limiter.peek('k');
  assert.equal(retryAfterMs, 200);
  let decision: Decision | undefined;
  const waiting = limiter.waitFor('k').then((made) => (decision = made));
  const pass = async (ms: number) => {
    now += ms;
    mock.timers.tick(ms);
    await turn();
  };
  await turn();
  const before = calls;
  await pass(retryAfterMs - 1);
  assert.deepEqual([decision, calls], [undefined, before], 'nothing asked 1 ms before retryAfterMs');
  await pass(1);
  assert.deepEqual([decision?.allowed, decision?.remaining, calls], [true, 0, before + 1]);
  await waiting;
  assert.equal((await limiter.peek('k')).allowed, false, 'the wait took the units');
});
