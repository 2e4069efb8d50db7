import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, slidingLog, tokenBucket } from '../../../src/index.js';
import { keysWithTtl, uniquePrefix, useRedis } from '../../support/redis.js';
import { limiterOn, sluice, sluiceJson } from '../../support/cli.js';

const harness = useRedis();

describe('sluice reset', () => {
  it('deletes the key under every algorithm, or under the one named', async () => {
    const prefix = uniquePrefix();
    const policies = [
      fixedWindow({ limit: 5, window: '1h' }),
      slidingLog({ limit: 5, window: '1h' }),
      tokenBucket({ capacity: 5, refillPerSecond: 1 }),
    ];
    const consumeAll = () =>
      Promise.all(policies.map((policy) => limiterOn(harness.redis, prefix, policy).limit('user:7')));
    await consumeAll();
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 3);

    const only = await sluiceJson([
      'reset',
      'user:7',
      '--policy',
      'token-bucket',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ]);
    assert.deepEqual(only.redisKeys, [`${prefix}:{user:7}:tb`]);
    assert.deepEqual([...(await keysWithTtl(harness.redis, prefix)).keys()].sort(), [
      `${prefix}:{user:7}:fw`,
      `${prefix}:{user:7}:sl`,
    ]);

    const all = await sluiceJson(['reset', 'user:7', '--prefix', prefix], { REDIS_URL: harness.server.url });
    assert.deepEqual(all.algorithms, ['fixed-window', 'sliding-log', 'sliding-window', 'gcra', 'token-bucket']);
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 0);

    await consumeAll();
    const text = await sluice([
      'reset',
      'user:7',
      '--policy',
      'sliding-log:5/1h',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ]);
    assert.deepEqual(text, {
      code: 0,
      err: [],
      out: [`reset user:7 on ${harness.server.url}: deleted ${prefix}:{user:7}:sl`],
    });
    assert.equal((await keysWithTtl(harness.redis, prefix)).size, 2);
  });
});
