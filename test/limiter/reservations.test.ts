import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter, fixedWindow, memoryStore, StoreError, StoreTimeoutError, type Store } from '../../src/index.js';
import { switchableStore } from '../support/switchable-store.js';

/** A memory store whose next call runs, then fails as if its reply were lost with the connection. */
function replyLosingStore() {
  const inner = memoryStore({ now: () => 1_000_000 });
  let loseNext = false;
  const store: Store = {
    async run(script, keys, args, deadline) {
      const reply = await inner.run(script, keys, args, deadline);
      if (!loseNext) return reply;
      loseNext = false;
      throw new StoreError('connection lost after the call was sent');
    },
  };
  return { store, loseNextReply: () => void (loseNext = true) };
}

describe('settle after a failure that may have run', () => {
  const policy = fixedWindow({ limit: 10, window: '1h' });

  it('a give-back retried is never given twice: the limit holds', async () => {
    const { store, loseNextReply } = replyLosingStore();
    const limiter = createLimiter({ store, policy });
    const reservation = await limiter.reserve('k', { cost: 6 });
    loseNextReply();
    await assert.rejects(reservation.settle(2), StoreError);
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
    const { store, loseNextReply } = replyLosingStore();
    const limiter = createLimiter({ store, policy });
    const reservation = await limiter.reserve('k', { cost: 2 });
    loseNextReply();
    await assert.rejects(reservation.settle(5), StoreError);
    assert.equal(await reservation.settle(5), true);
    assert.equal((await limiter.peek('k')).remaining, 2);
  });
});
