import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, fixedWindow, StoreError, StoreTimeoutError } from '../../src/index.js';
import { switchableStore } from '../support/switchable-store.js';

describe('settle after a failure that may have run', () => {
  const policy = fixedWindow({ limit: 10, window: '1h' });

  it('a give-back retried is never given twice: the limit holds', async () => {
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy });
    const reservation = await limiter.reserve('k', { cost: 6 });
    control.mode = 'lose-reply';
    await assert.rejects(reservation.settle(2), StoreError);
    control.mode = 'up';
    // The lost settle gave 4 back; its retry gives nothing more, and settles the reservation.
    assert.equal(await reservation.settle(2), true);
    assert.equal((await limiter.peek('k')).remaining, 8);
    assert.equal(await reservation.settle(2), false);
  });

  it('a give-back that timed out is not given on a retry either: a reply may come after the timeout', async () => {
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy, timeout: 20 });
    const reservation = await limiter.reserve('k', { cost: 6 });
    control.mode = 'hang';
    await assert.rejects(reservation.settle(2), StoreTimeoutError);
    control.mode = 'up';
    assert.equal(await reservation.settle(2), true);
    assert.equal((await limiter.peek('k')).remaining, 4);
  });

  it('a charge retried may be taken twice: stricter, never looser', async () => {
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy });
    const reservation = await limiter.reserve('k', { cost: 2 });
    control.mode = 'lose-reply';
    await assert.rejects(reservation.settle(5), StoreError);
    control.mode = 'up';
    assert.equal(await reservation.settle(5), true);
    assert.equal((await limiter.peek('k')).remaining, 2);
  });
});
