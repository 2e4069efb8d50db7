import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, fixedWindow, memoryStore } from '../../src/index.js';

describe('memory store clock', () => {
  it('keeps expired state gone when the clock steps back, as Redis does, and keeps state written since', async () => {
    const clock = { now: 0 };
    const limiter = createLimiter({
      store: memoryStore({ now: () => clock.now }),
      policy: fixedWindow({ limit: 1, window: '1s' }),
    });
    assert.equal((await limiter.limit('k')).allowed, true); // expires at 1,001
    clock.now = 1_500;
    // Another client's call: the store sees the time pass without touching k.
    assert.equal((await limiter.limit('other')).allowed, true);
    clock.now = 500;
    assert.equal((await limiter.limit('k')).allowed, true, 'k expired at 1,001 and stays gone');
    // Written after the step back, expiring at 1,001 again: live until the clock passes that.
    clock.now = 600;
    assert.equal((await limiter.limit('k')).allowed, false);
    clock.now = 999;
    assert.equal((await limiter.limit('k')).allowed, false);
  });
});
