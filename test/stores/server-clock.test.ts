import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServerClock } from '../../src/stores/server-clock.js';

describe('ServerClock', () => {
  it('knows nothing before a reply', () => {
    assert.equal(new ServerClock().serverTime(100), undefined);
  });

  it("keeps the fastest reply's bound: the server's lead is at least its time minus the arrival", () => {
    const clock = new ServerClock();
    clock.observe(5_010, 12); // made at most 12 ms local: lead >= 4,998
    clock.observe(5_020, 20); // lead >= 5,000: the tighter bound
    clock.observe(5_030, 40); // lead >= 4,990: a slow reply, ignored
    assert.equal(clock.serverTime(100), 5_100);
  });

  it('forgets a bound after two windows, so drift cannot pile up', () => {
    const clock = new ServerClock();
    clock.observe(10_000, 0); // lead 10,000
    clock.observe(12_060, 2_100); // a new window (the server's clock slows): 10,000 kept from the last one
    assert.equal(clock.serverTime(3_000), 13_000);
    clock.observe(14_150, 4_200); // lead 9,950; the first bound is two windows back, forgotten
    assert.equal(clock.serverTime(5_000), 14_960);
  });

  it('rounds down: a deadline is never later than the bound allows', () => {
    const clock = new ServerClock();
    clock.observe(1_000, 0.4);
    assert.equal(clock.serverTime(10), 1_009);
  });
});
