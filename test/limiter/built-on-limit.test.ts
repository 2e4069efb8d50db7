import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { setTimeout as sleep, setImmediate as turn } from 'node:timers/promises';
import { createLimiter, fixedWindow, gcra, memoryStore, type Decision, type Store } from '../../src/index.js';

/** The memory store, counting the calls made to it. */
function counted(memory: Store): { store: Store; calls: () => number } {
  let calls = 0;
  return { store: { run: (...args) => (calls++, memory.run(...args)) }, calls: () => calls };
}

describe('waitFor on a mocked clock', () => {
  // waitFor's sleep on Node's mocked setTimeout, the memory store on a clock moved with it: the wait
  // is measured exactly, however loaded the machine (the conformance suite checks it on every store).
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  it('waitFor waits exactly retryAfterMs, then takes the units', async () => {
    let now = 1_800_000_000_000;
    const { store, calls } = counted(memoryStore({ now: () => now }));
    const limiter = createLimiter({ store, policy: gcra({ limit: 2, period: 400, burst: 1 }) });
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
    const before = calls();
    await pass(retryAfterMs - 1);
    assert.deepEqual([decision, calls()], [undefined, before], 'nothing asked 1 ms before retryAfterMs');
    await pass(1);
    assert.deepEqual([decision?.allowed, decision?.remaining, calls()], [true, 0, before + 1]);
    await waiting;
    assert.equal((await limiter.peek('k')).allowed, false, 'the wait took the units');
  });
});

// Node's own timers: a mocked setTimeout takes any delay, where a real one past 2^31 - 1 ms fires at once.
it('waitFor on a key blocked for 30 days asks once and sleeps, without a TimeoutOverflowWarning', async () => {
  const { store, calls } = counted(memoryStore());
  const limiter = createLimiter({ store, policy: fixedWindow({ limit: 1, window: '1h' }) });
  await limiter.block('k', '30d');
  const warnings: Error[] = [];
  const listener = (warning: Error) => warnings.push(warning);
  process.on('warning', listener);
  try {
    const aborted = new AbortController();
    const before = calls();
    const waiting = limiter.waitFor('k', { signal: aborted.signal });
    let asked = 0;
    try {
      await sleep(100);
      asked = calls() - before;
    } finally {
      aborted.abort(new Error('gave up'));
    }
    await assert.rejects(waiting, /gave up/);
    assert.equal(asked, 1);
  } finally {
    process.off('warning', listener);
  }
  assert.deepEqual(
    warnings.map((w) => w.name),
    [],
  );
});
