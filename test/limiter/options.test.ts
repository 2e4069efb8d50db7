import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  InvalidOptionError,
  createLimiter,
  fixedWindow,
  memoryStore,
  redisStore,
  slidingLog,
  tokenBucket,
} from '../../src/index.js';
import { SLIDING_LOG_MAX_LIMIT } from '../../src/algorithms/sliding-log.js';
import { rejectsOption } from '../support/options.js';

describe('policy options', () => {
  it('fixedWindow', () => {
    rejectsOption(() => fixedWindow({ limit: 0, window: '1s' }), 'limit', '0');
    rejectsOption(() => fixedWindow({ limit: 2.5, window: '1s' }), 'limit', '2.5');
    rejectsOption(() => fixedWindow({ limit: Infinity, window: '1s' }), 'limit', 'Infinity');
    rejectsOption(() => fixedWindow({ limit: 5, window: '1x' as never }), 'window', '"1x"');
    rejectsOption(() => fixedWindow({ limit: 5, window: 5 }), 'window', '5');
    rejectsOption(() => fixedWindow(undefined as never), 'fixedWindow', 'undefined');
    rejectsOption(() => fixedWindow({ limit: 5, window: '1s', name: 'has space' }), 'name', '"has space"');
  });

  it('slidingLog', () => {
    rejectsOption(() => slidingLog({ limit: -1, window: '1s' }), 'limit', '-1');
    rejectsOption(
      () => slidingLog({ limit: SLIDING_LOG_MAX_LIMIT + 1, window: '1s' }),
      'limit',
      String(SLIDING_LOG_MAX_LIMIT + 1),
    );
    rejectsOption(() => slidingLog({ limit: 5, window: undefined as never }), 'window', 'undefined');
  });

  it('tokenBucket', () => {
    rejectsOption(() => tokenBucket({ capacity: 0, refillPerSecond: 1 }), 'capacity', '0');
    rejectsOption(() => tokenBucket({ capacity: 5, refillPerSecond: 0 }), 'refillPerSecond', '0');
    rejectsOption(() => tokenBucket({ capacity: 5, refillPerSecond: Number.NaN }), 'refillPerSecond', 'NaN');
    rejectsOption(() => tokenBucket({ capacity: 5, refillPerSecond: -1 }), 'refillPerSecond', '-1');
    rejectsOption(() => tokenBucket({ capacity: 5, refillPerSecond: 1e-9 }), 'refillPerSecond', '1e-9');
    // A token's refill time is kept in whole 100 ns: 30,000 per second would round 33.3 µs up to 33.4 µs.
    rejectsOption(() => tokenBucket({ capacity: 5, refillPerSecond: 30_000 }), 'refillPerSecond', '30000');
    for (const refillPerSecond of [10_000, 9_999, 100_000, 1_000_000])
      assert.equal(tokenBucket({ capacity: 5, refillPerSecond }).limit, 5);
  });
});

describe('default policy names', () => {
  it('say what an unnamed policy allows, so two unnamed policies of one algorithm differ', async () => {
    const { gcra, slidingWindow, concurrency } = await import('../../src/index.js');
    const names = [
      fixedWindow({ limit: 5, window: '1s' }),
      fixedWindow({ limit: 100, window: '15m' }),
      slidingLog({ limit: 5, window: '1m' }),
      slidingLog({ limit: 5, window: 90_000 }),
      slidingWindow({ limit: 1000, window: '1d' }),
      slidingWindow({ limit: 3, window: 1500 }),
      tokenBucket({ capacity: 10, refillPerSecond: 2 }),
      tokenBucket({ capacity: 10, refillPerSecond: 0.5 }),
      gcra({ limit: 5, period: '1s' }),
      gcra({ limit: 5, period: '1h', burst: 10 }),
      concurrency({ limit: 4, leaseMs: '30s' }),
      fixedWindow({ limit: 5, window: '1s', name: 'login' }),
    ].map((policy) => policy.name);
    assert.deepEqual(names, [
      '5-per-1s',
      '100-per-15m',
      '5-per-1m',
      '5-per-90s',
      '1000-per-1d',
      '3-per-1500ms',
      '10-burst-2-per-1s',
      '10-burst-0.5-per-1s',
      '5-per-1s',
      '10-burst-5-per-1h',
      '4-concurrent',
      'login',
    ]);
  });
});

describe('createLimiter and stores', () => {
  const policy = fixedWindow({ limit: 5, window: '1s' });
  it('demands a store and a policy, and a valid prefix', () => {
    rejectsOption(() => createLimiter({ policy } as never), 'store', 'undefined');
    rejectsOption(() => createLimiter({ store: memoryStore() } as never), 'policy', 'undefined');
    rejectsOption(() => createLimiter({ store: {} as never, policy }), 'store', 'an object');
    rejectsOption(() => createLimiter({ store: memoryStore(), policy: { limit: 5 } as never }), 'policy', 'an object');
    rejectsOption(() => createLimiter({ store: memoryStore(), policy, prefix: 'a{b' }), 'prefix', '"a{b"');
    rejectsOption(() => createLimiter({ store: memoryStore(), policy, prefix: '' }), 'prefix', '""');
    rejectsOption(() => createLimiter(null as never), 'createLimiter', 'null');
  });

  it('checks store options and clients', () => {
    rejectsOption(() => memoryStore({ maxKeys: 0 }), 'maxKeys', '0');
    rejectsOption(() => memoryStore({ now: 5 as never }), 'now', '5');
    rejectsOption(() => redisStore({} as never), 'client', 'an object');
    rejectsOption(() => redisStore(undefined as never), 'client', 'undefined');
  });
});

describe('options of gcra, slidingWindow, concurrency and the limiter extras', () => {
  it('name the option and the bad value', async () => {
    const { gcra, slidingWindow, concurrency } = await import('../../src/index.js');
    rejectsOption(() => gcra({ limit: 0, period: '1s' }), 'limit', '0');
    rejectsOption(() => gcra({ limit: 5, period: '1y' as never }), 'period', '"1y"');
    rejectsOption(() => gcra({ limit: 5, period: '1s', burst: 0 }), 'burst', '0');
    rejectsOption(() => gcra({ limit: 2001, period: '1s' }), 'limit', '2001');
    assert.equal(gcra({ limit: 2000, period: '1s' }).limit, 2000);
    // Three bursts of 1,000,000 µs intervals stay below 2^53 µs.
    assert.equal(gcra({ limit: 1, period: '1s', burst: 3_002_399_751 }).maxCost, 3_002_399_751);
    rejectsOption(() => gcra({ limit: 1, period: '1s', burst: 3_002_399_752 }), 'burst', '3002399752');
    rejectsOption(() => slidingWindow({ limit: 5, window: 5 }), 'window', '5');
    rejectsOption(() => slidingWindow({ limit: 1.5, window: '1s' }), 'limit', '1.5');
    // Three times limit * window (ms) stays below 2^53, so the weighted count is exact.
    rejectsOption(() => slidingWindow({ limit: 1e9, window: '1d' }), 'limit', '1000000000');
    assert.equal(slidingWindow({ limit: 34_749_997, window: '1d' }).limit, 34_749_997);
    rejectsOption(() => slidingWindow({ limit: 34_749_998, window: '1d' }), 'limit', '34749998');
    rejectsOption(() => concurrency({ limit: 5, leaseMs: 0 }), 'leaseMs', '0');
    rejectsOption(() => concurrency({ limit: -2, leaseMs: '1s' }), 'limit', '-2');
    const store = memoryStore();
    const policy = fixedWindow({ limit: 5, window: '1s' });
    rejectsOption(() => createLimiter({ store, policy: [] }), 'policy', 'an array');
    rejectsOption(
      () => createLimiter({ store, policy: [policy, fixedWindow({ limit: 50, window: '1m', name: '5-per-1s' })] }),
      'policy',
      'an array',
    );
    rejectsOption(
      () =>
        createLimiter({
          store,
          policy: [slidingLog({ limit: 5, window: '1s' }), slidingLog({ limit: 5, window: '1s' })],
        }),
      'policy',
      'an array',
    );
    rejectsOption(() => createLimiter({ store, policy, penalty: { after: 0, block: '1m' } }), 'penalty.after', '0');
    rejectsOption(
      () => createLimiter({ store, policy, penalty: { after: 3, block: 'soon' as never } }),
      'penalty.block',
      '"soon"',
    );
    rejectsOption(() => createLimiter({ store, policy, timeout: '0ms' }), 'timeout', '"0ms"');
    rejectsOption(() => createLimiter({ store, policy, onStoreError: 'maybe' as never }), 'onStoreError', '"maybe"');
  });
});

/**
 * Asserts that `build` throws InvalidOptionError naming the unknown `option` by its path (`penalty.for`
 * for a nested one), with `instead` in its message.
 */
function rejectsUnknown(build: () => unknown, option: string, instead: string): void {
  assert.throws(build, (error: unknown) => {
    assert.ok(error instanceof InvalidOptionError, String(error));
    assert.equal(error.option, option);
    assert.ok(error.message.includes(`has no option "${option.split('.').at(-1)}"; ${instead}`), error.message);
    return true;
  });
}

describe('unknown options', () => {
  const store = memoryStore();
  const policy = fixedWindow({ limit: 5, window: '1s' });

  it("are refused by every policy, naming the option to use for a peer's name", async () => {
    const { gcra, slidingWindow, concurrency } = await import('../../src/index.js');
    rejectsUnknown(
      () => fixedWindow({ limit: 5, window: '1s', windowMs: 1000 } as never),
      'windowMs',
      'use "window" (ms, or a string such as "1m")',
    );
    rejectsUnknown(() => fixedWindow({ max: 5, window: '1s' } as never), 'max', 'use "limit"');
    rejectsUnknown(
      () => slidingLog({ limit: 5, window: '1s', nmae: 'x' } as never),
      'nmae',
      'its options are limit, window, name',
    );
    rejectsUnknown(() => slidingWindow({ points: 5, window: '1s' } as never), 'points', 'use "limit"');
    rejectsUnknown(
      () => slidingWindow({ limit: 5, duration: 60 } as never),
      'duration',
      'use "window" (ms, or a string such as "1m"; rate-limiter-flexible\'s duration is in seconds, sluice\'s numbers in ms)',
    );
    rejectsUnknown(
      () => tokenBucket({ limit: 5, refillPerSecond: 1 } as never),
      'limit',
      'use "capacity" (the largest burst) and "refillPerSecond"',
    );
    rejectsUnknown(
      () => tokenBucket({ capacity: 5, tokensPerInterval: 1 } as never),
      'tokensPerInterval',
      'use "refillPerSecond"',
    );
    rejectsUnknown(() => gcra({ limit: 5, window: '1s' } as never), 'window', 'use "period"');
    rejectsUnknown(
      () => concurrency({ limit: 5, timeout: '1s' } as never),
      'timeout',
      'use "leaseMs": how long a slot is held unless released',
    );
  });

  it('are refused by createLimiter and its nested options, stores, the denied cache and observe()', async () => {
    const { observe } = await import('../../src/index.js');
    rejectsUnknown(() => createLimiter({ store, policy, keyPrefix: 'api' } as never), 'keyPrefix', 'use "prefix"');
    rejectsUnknown(
      () => createLimiter({ store, points: 5, duration: 1 } as never),
      'points',
      'use "policy": a policy such as fixedWindow({ limit: 5, window: "1s" }), or an array of them',
    );
    rejectsUnknown(
      () => createLimiter({ storeClient: {}, policy } as never),
      'storeClient',
      'use "store": redisStore(client)',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, blockDuration: 60 } as never),
      'blockDuration',
      'use "penalty": { after: denials in a row, block: a duration }',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, insuranceLimiter: {} } as never),
      'insuranceLimiter',
      'use "onStoreError": a fallback limiter',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, shadowMode: true } as never),
      'shadowMode',
      'its options are store, policy, prefix, shadow, penalty, deniedCache, lease, timeout, onStoreError, onOutage, onRecovery',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, penalty: { after: 3, block: '1m', for: '1h' } } as never),
      'penalty.for',
      'its options are after, block',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, deniedCache: { maxKeys: 10, size: 10 } } as never),
      'deniedCache.size',
      'its options are maxKeys, now',
    );
    rejectsUnknown(
      () => createLimiter({ store, policy, hooks: { storeError: () => undefined } } as never),
      'hooks',
      'use "onOutage": (failure) => ... and "onRecovery": (recovery) => ..., what hooks.storeError and hooks.recover were',
    );
    rejectsUnknown(() => memoryStore({ max: 10 } as never), 'max', 'its options are maxKeys, now');
    const limiter = createLimiter({ store, policy });
    rejectsUnknown(
      () => observe(limiter, { includeKey: true } as never),
      'includeKey',
      'its options are meter, onDecision, includeKeys',
    );
    for (const [old, now] of [
      ['onStoreError', 'onOutage'],
      ['onRecover', 'onRecovery'],
    ] as const) {
      rejectsUnknown(
        () => observe(limiter, { [old]: () => undefined }),
        old,
        `use the limiter's "${now}": store failures and recoveries are the limiter's to report: createLimiter({ ..., onOutage, onRecovery }); observe() counts them in sluice.store.errors`,
      );
    }
  });
});
