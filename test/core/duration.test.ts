import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../src/core/duration.js';
import { rejectsOption } from '../support/options.js';

describe('durations', () => {
  it('parses milliseconds and unit strings', () => {
    assert.equal(parseDuration('window', 1500), 1500);
    assert.equal(parseDuration('window', '250ms'), 250);
    assert.equal(parseDuration('window', '1s'), 1000);
    assert.equal(parseDuration('window', '1.5s'), 1500);
    assert.equal(parseDuration('window', '1m'), 60_000);
    assert.equal(parseDuration('window', '1h'), 3_600_000);
    assert.equal(parseDuration('window', '1d'), 86_400_000);
  });

  it('rejects what is not a positive whole number of ms', () => {
    for (const bad of ['1x', '', 'ms', '-1s', '1 s', '0.5ms', 0, -5, 1.5, Number.NaN, Infinity, '400d'])
      rejectsOption(() => parseDuration('window', bad), 'window', bad === '' ? '""' : String(bad));
    rejectsOption(() => parseDuration('window', null), 'window', 'null');
    rejectsOption(() => parseDuration('window', {}), 'window', 'an object');
  });
});
