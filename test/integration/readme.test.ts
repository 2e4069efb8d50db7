import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { examplesOf, runExample } from '../support/examples.js';
import { useRedis } from '../support/redis.js';

const harness = useRedis();

describe('README examples', () => {
  it('run as written against a real Redis, and print what their comments say', async () => {
    const examples = await examplesOf('README.md');
    assert.ok(examples.length >= 2);
    for (const [i, example] of examples.entries())
      await runExample(`README example ${i}`, example, { REDIS_URL: harness.server.url });
  });
});
