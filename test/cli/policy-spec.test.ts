import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../../src/cli/command.js';
import { parsePolicySpec } from '../../src/cli/policy-spec.js';
import { type Policy } from '../../src/index.js';

describe('policy syntax', () => {
  it('builds each algorithm from its compact form', () => {
    const pick = (p: Policy) => ({ algorithm: p.algorithm, limit: p.limit, windowMs: p.windowMs });
    assert.deepEqual(pick(parsePolicySpec('fixed-window:5/1s')), {
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 1000,
    });
    assert.deepEqual(pick(parsePolicySpec('fixed-window:100/m')), {
      algorithm: 'fixed-window',
      limit: 100,
      windowMs: 60_000,
    });
    assert.deepEqual(pick(parsePolicySpec('sliding-log:7/250ms')), {
      algorithm: 'sliding-log',
      limit: 7,
      windowMs: 250,
    });
    // 10 tokens at 2 per second: empty to full in 5 s.
    assert.deepEqual(pick(parsePolicySpec('token-bucket:10@2/s')), {
      algorithm: 'token-bucket',
      limit: 10,
      windowMs: 5000,
    });
    assert.deepEqual(pick(parsePolicySpec('token-bucket:3@0.5/s')), {
      algorithm: 'token-bucket',
      limit: 3,
      windowMs: 6000,
    });
    assert.deepEqual(pick(parsePolicySpec('token-bucket:60@1/1m')), {
      algorithm: 'token-bucket',
      limit: 60,
      windowMs: 3_600_000,
    });
  });

  it('rejects a bad policy with one line naming --policy and the value', () => {
    const cases: [string, RegExp][] = [
      ['fixed-window', /--policy must be fixed-window:<limit>\/<window>.*; got "fixed-window"$/],
      ['leaky-bucket:5/1s', /--policy must be .*; got "leaky-bucket:5\/1s"$/],
      ['fixed-window:0/1s', /^sluice: --policy "fixed-window:0\/1s": option "limit" must be a whole number/],
      [
        'sliding-log:20000/1s',
        /^sluice: --policy "sliding-log:20000\/1s": option "limit" must be a whole number from 1 to 10000; got 20000$/,
      ],
      ['fixed-window:5/1x', /^sluice: --policy "fixed-window:5\/1x": option "window" must be a duration/],
      ['fixed-window:5/5ms', /option "window" must be a duration of at least 10 ms/],
      ['token-bucket:10@0/s', /option "refillPerSecond" must be a finite number greater than 0; got 0$/],
    ];
    for (const [spec, message] of cases) {
      assert.throws(
        () => parsePolicySpec(spec),
        (error: unknown) => error instanceof UsageError && message.test(error.message) && !error.message.includes('\n'),
        spec,
      );
    }
  });
});
