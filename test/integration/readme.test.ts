import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { examplesOf, runExample } from '../support/examples.js';
import { useRedis } from '../support/redis.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const harness = useRedis();

describe('README examples', () => {
  it('run as written against a real Redis, and print what their comments say', async () => {
    const examples = await examplesOf('README.md');
    assert.ok(examples.length >= 2);
    for (const [i, example] of examples.entries()) {
      // Their fixed windows of a minute (and a day, which ends with a minute) count across calls.
      await awayFromWindowEnd(60_000, 10_000);
      await runExample(`README example ${i}`, example, { REDIS_URL: harness.server.url });
    }
  });
});
