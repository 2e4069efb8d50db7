import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freePort } from '../../src/cli/redis-server.js';
import { examplesOf, execExample, runExample } from '../support/examples.js';
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

  it('the first, with nothing listening at REDIS_URL: allowed, one warning naming the refused connection, and reset() throws saying so', async () => {
    const [first = ''] = await examplesOf('README.md');
    const port = await freePort();
    const refused = `sluice: store failed: connection refused by 127.0.0.1:${port}`;
    const { stdout, stderr, code } = await execExample(first, { REDIS_URL: `redis://127.0.0.1:${port}` });
    assert.deepEqual({ stdout, code }, { stdout: 'true 5\ntrue 5\n', code: 1 });
    const [warning, ...more] = stderr.split('\n').filter((line) => /warning/i.test(line) && !line.startsWith('(Use'));
    assert.match(warning ?? '', /^\(node:\d+\) \[SLUICE_STORE_FAILED\] Warning: /);
    assert.equal(warning?.replace(/^.*Warning: /, ''), `${refused} (store-error); answering 'allow' until it recovers`);
    assert.deepEqual(more, []);
    assert.ok(!stderr.includes('[ioredis]'), stderr);
    assert.match(stderr, new RegExp(`^StoreError: ${refused.replace(/\./g, '\\.')}$`, 'm'));
  });
});
