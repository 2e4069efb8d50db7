import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow, slidingLog, tokenBucket } from '../../../src/index.js';
import { uniquePrefix, useRedis } from '../../support/redis.js';
import { limiterOn, sluice, sluiceJson } from '../../support/cli.js';

const harness = useRedis();

describe('sluice inspect', () => {
  it('shows remaining and reset without consuming, as JSON and as text', async () => {
    const prefix = uniquePrefix();
    await limiterOn(harness.redis, prefix, fixedWindow({ limit: 5, window: '1h' })).limit('user:42', { cost: 3 });
    const argv = [
      'inspect',
      'user:42',
      '--policy',
      'fixed-window:5/1h',
      '--prefix',
      prefix,
      '--redis',
      harness.server.url,
    ];
    const report = await sluiceJson(argv);
    const decision = report.decision as Record<string, number | boolean>;
    assert.deepEqual(
      { ...report, decision: { ...decision, resetAfterMs: undefined, policies: undefined, decidedAt: undefined } },
      {
        redis: `${harness.server.url}`,
        key: 'user:42',
        prefix,
        redisKey: `${prefix}:{user:42}:fw`,
        policy: { spec: 'fixed-window:5/1h', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
        decision: {
          allowed: true,
          limit: 5,
          remaining: 2,
          retryAfterMs: 0,
          resetAfterMs: undefined,
          policies: undefined,
          decidedAt: undefined,
        },
      },
    );
    assert.ok((decision.resetAfterMs as number) > 0 && (decision.resetAfterMs as number) <= 3_600_000);
    // Redis's clock, which is this machine's.
    assert.ok(Math.abs((decision.decidedAt as number) - Date.now()) < 60_000, String(decision.decidedAt));
    // Inspecting again sees the same: nothing was consumed.
    assert.equal(((await sluiceJson(argv)).decision as Record<string, number>).remaining, 2);
    const text = await sluice(argv.slice(0, -2), { REDIS_URL: harness.server.url });
    assert.equal(text.code, 0);
    assert.deepEqual(text.out.slice(0, 4), [
      `key        user:42 (redis key ${prefix}:{user:42}:fw on ${harness.server.url})`,
      'policy     fixed-window, limit 5 per 3600 s',
      'next call  allowed',
      'remaining  2 of 5',
    ]);
  });

  it('reports a denial of a spent token bucket and sliding log, with the time to retry', async () => {
    const prefix = uniquePrefix();
    await limiterOn(harness.redis, prefix, tokenBucket({ capacity: 3, refillPerSecond: 1 / 3600 })).limit('k', {
      cost: 3,
    });
    await limiterOn(harness.redis, prefix, slidingLog({ limit: 2, window: '1h' })).limit('k', { cost: 2 });
    for (const spec of ['token-bucket:3@1/1h', 'sliding-log:2/1h']) {
      const decision = (
        await sluiceJson(['inspect', 'k', '--policy', spec, '--prefix', prefix], { REDIS_URL: harness.server.url })
      ).decision as Record<string, number | boolean>;
      assert.equal(decision.allowed, false, spec);
      assert.equal(decision.remaining, 0, spec);
      assert.ok((decision.retryAfterMs as number) > 3_500_000, `${spec}: retryAfterMs ${decision.retryAfterMs}`);
    }
  });
});
