import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { metrics } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { Redis } from 'ioredis';
import {
  InvalidArgumentError,
  InvalidOptionError,
  StoreError,
  createLimiter,
  fixedWindow,
  memoryStore,
  observe,
  redisStore,
  tokenBucket,
  type Decision,
  type DecisionEvent,
  type Limiter,
  type StoreFailure,
  type StoreRecovery,
} from '../../src/index.js';
import { uniquePrefix, useRedis } from '../support/redis.js';
import { switchableStore } from '../support/switchable-store.js';
import { awayFromWindowEnd } from '../support/window-edge.js';

const harness = useRedis();

/** Collects on demand, so a test reads exactly what has been recorded so far. */
class OnDemandReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

interface Point {
  attributes: Record<string, unknown>;
  value: number;
}

/** Every metric collected, by name: counters' sums, histograms' counts. */
async function collect(reader: MetricReader): Promise<Map<string, Point[]>> {
  const { resourceMetrics, errors } = await reader.collect();
  assert.deepEqual(errors, []);
  const found = new Map<string, Point[]>();
  const metricsList: MetricData[] = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
  for (const metric of metricsList) {
    const points = metric.dataPoints.map((point) => ({
      attributes: { ...point.attributes },
      value:
        metric.dataPointType === DataPointType.HISTOGRAM
          ? (point.value as { count: number }).count
          : (point.value as number),
    }));
    found.set(metric.descriptor.name, points);
  }
  return found;
}

function meterWithReader() {
  const reader = new OnDemandReader();
  const provider = new MeterProvider({ readers: [reader] });
  return { reader, provider, meter: provider.getMeter('sluice-test') };
}

const labelsOf = (limiter: Limiter) => ({
  'sluice.prefix': limiter.prefix,
  'sluice.policy': limiter.policy.name,
  'sluice.algorithm': limiter.policy.algorithm,
});

describe('observe: metrics through a real OpenTelemetry MeterProvider', () => {
  it('counts allowed and denied requests and times every call, by prefix and policy', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const windowed = observe(
      createLimiter({
        store: redisStore(harness.redis),
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 3, window: '1h' }),
      }),
      { meter },
    );
    const bucket = observe(
      createLimiter({
        store: redisStore(harness.redis),
        prefix: uniquePrefix(),
        policy: tokenBucket({ capacity: 1, refillPerSecond: 0.001 }),
      }),
      { meter },
    );
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push((await windowed.limit('k')).allowed);
    assert.deepEqual(answers, [true, true, true, false, false]);
    assert.equal((await windowed.peek('k')).remaining, 0);
    await windowed.reset('k');
    await bucket.limit('k');
    await bucket.limit('k');
    // Misuse is the caller's mistake: rejected as before, and neither a store error nor a sample.
    await assert.rejects(windowed.limit(''), InvalidArgumentError);

    const found = await collect(reader);
    const w = labelsOf(windowed);
    const b = labelsOf(bucket);
    const byAttributes = (name: string) =>
      (found.get(name) ?? []).map((p) => JSON.stringify([p.attributes, p.value])).sort();
    assert.deepEqual(byAttributes('sluice.requests.allowed'), [JSON.stringify([w, 3]), JSON.stringify([b, 1])].sort());
    assert.deepEqual(byAttributes('sluice.requests.denied'), [JSON.stringify([w, 2]), JSON.stringify([b, 1])].sort());
    assert.deepEqual(
      byAttributes('sluice.operation.duration'),
      [
        JSON.stringify([{ ...w, 'sluice.operation': 'limit' }, 5]),
        JSON.stringify([{ ...w, 'sluice.operation': 'peek' }, 1]),
        JSON.stringify([{ ...w, 'sluice.operation': 'reset' }, 1]),
        JSON.stringify([{ ...b, 'sluice.operation': 'limit' }, 2]),
      ].sort(),
    );
    assert.equal(found.has('sluice.store.errors'), false);
    assert.equal(found.has('sluice.requests.shadow_denied'), false);
  });

  it('counts, times and tells each limitNow() decision at once, as a limit() call', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const told: DecisionEvent[] = [];
    const limiter = observe(createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1h' }) }), {
      meter,
      onDecision: (event) => told.push(event),
    });
    const limitNow = limiter.limitNow as NonNullable<Limiter['limitNow']>;
    assert.deepEqual([limitNow('k').allowed, told.length, limitNow('k').allowed, told.length], [true, 1, false, 2]);
    assert.throws(() => limitNow(''), InvalidArgumentError);
    assert.deepEqual(
      told.map((e) => [e.operation, e.decision.allowed]),
      [
        ['limit', true],
        ['limit', false],
      ],
    );
    const found = await collect(reader);
    const labels = labelsOf(limiter);
    assert.deepEqual(
      found.get('sluice.requests.allowed')?.map((p) => [p.attributes, p.value]),
      [[labels, 1]],
    );
    assert.deepEqual(
      found.get('sluice.requests.denied')?.map((p) => [p.attributes, p.value]),
      [[labels, 1]],
    );
    assert.deepEqual(
      found.get('sluice.operation.duration')?.map((p) => [p.attributes, p.value]),
      [[{ ...labels, 'sluice.operation': 'limit' }, 2]],
    );
  });

  it('counts and times each decision limitMany and waitFor make, as limit() calls', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const limiter = observe(
      createLimiter({
        store: redisStore(harness.redis),
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 2, window: 1500 }),
      }),
      { meter },
    );
    // With a second of the window left, 'a' is still spent when waitFor asks, on a loaded machine too.
    await awayFromWindowEnd(1500, 1000);
    const many = await limiter.limitMany(['a', 'a', 'a', 'b']);
    assert.deepEqual(
      many.map((d) => d.allowed),
      [true, true, false, true],
    );
    // A bad key counts nothing, as in the limiter it wraps.
    await assert.rejects(limiter.limitMany(['c', '']), InvalidArgumentError);
    // 'a' is spent for this window: waitFor is denied (at least) once, then admitted in the next one.
    const waited = await limiter.waitFor('a', { timeout: '5s' });
    assert.equal(waited.allowed, true);
    const found = await collect(reader);
    const labels = labelsOf(limiter);
    const sum = (name: string) => (found.get(name) ?? []).reduce((total, point) => total + point.value, 0);
    const denied = sum('sluice.requests.denied');
    assert.ok(denied >= 2, `denied ${denied}: limitMany's one and waitFor's waiting`);
    assert.equal(sum('sluice.requests.allowed'), 4);
    assert.deepEqual(found.get('sluice.operation.duration'), [
      { attributes: { ...labels, 'sluice.operation': 'limit' }, value: 4 + denied },
    ]);
  });

  it('decides exactly as the limiter it wraps', async () => {
    let now = 1_000_000;
    const clock = () => now;
    const policy = fixedWindow({ limit: 2, window: '1s' });
    const plain = createLimiter({ store: memoryStore({ now: clock }), policy });
    const observed = observe(createLimiter({ store: memoryStore({ now: clock }), policy }), {
      meter: meterWithReader().meter,
    });
    assert.equal(observed.prefix, plain.prefix);
    assert.equal(observed.policy, plain.policy);
    for (const step of [0, 10, 10, 990, 5]) {
      now += step;
      assert.deepEqual(await observed.limit('k'), await plain.limit('k'));
      assert.deepEqual(await observed.peek('k'), await plain.peek('k'));
    }
    await assert.rejects(
      observed.limit('k', { cost: 3 }),
      (e: unknown) => e instanceof Error && e.name === 'CostExceedsLimitError',
    );
  });

  it('uses the global MeterProvider when no meter is given', async () => {
    const { reader, provider } = meterWithReader();
    assert.ok(metrics.setGlobalMeterProvider(provider));
    after(() => metrics.disable());
    const limiter = observe(
      createLimiter({
        store: redisStore(harness.redis),
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 1, window: '1h' }),
      }),
    );
    await limiter.limit('k');
    await limiter.limit('k');
    const found = await collect(reader);
    assert.deepEqual(found.get('sluice.requests.allowed'), [{ attributes: labelsOf(limiter), value: 1 }]);
    assert.deepEqual(found.get('sluice.requests.denied'), [{ attributes: labelsOf(limiter), value: 1 }]);
  });
});

describe('observe: store errors and recovery against a real Redis', () => {
  it('counts the failures the limiter reports; the limiter tells each once, without the key, and its recovery once', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const client = new Redis(harness.server.url);
    after(() => client.quit());
    const failures: StoreFailure[] = [];
    const recoveries: StoreRecovery[] = [];
    const decisions: DecisionEvent[] = [];
    const limiter = observe(
      createLimiter({
        store: redisStore(client),
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 5, window: '1h' }),
        onOutage: (failure) => failures.push(failure),
        onRecovery: (recovery) => recoveries.push(recovery),
      }),
      { meter, onDecision: (event) => decisions.push(event) },
    );
    await limiter.limit('user:secret-42');
    // Real failures: Redis refuses scripts to this user (NOPERM) until the permission comes back.
    await harness.redis.call('ACL', 'SETUSER', 'default', '-evalsha', '-eval');
    try {
      // The limiter's failure policy (fail open by default) answers, saying why.
      const failed = [await limiter.limit('user:secret-42'), await limiter.peek('user:secret-42')];
      assert.deepEqual(
        failed.map((d) => [d.allowed, d.reason, d.error instanceof StoreError]),
        [
          [true, 'store-error', true],
          [true, 'store-error', true],
        ],
      );
    } finally {
      await harness.redis.call('ACL', 'SETUSER', 'default', '+evalsha', '+eval');
    }
    assert.equal(recoveries.length, 0);
    await limiter.limit('user:secret-42');
    await limiter.limit('user:secret-42');

    assert.deepEqual(
      failures.map((f) => [f.operation, f.reason, f.error.name, f.error.code, f.failures]),
      [
        ['limit', 'store-error', 'StorePermissionError', 'SLUICE_STORE_ERROR', 1],
        ['peek', 'store-error', 'StorePermissionError', 'SLUICE_STORE_ERROR', 2],
      ],
    );
    assert.match(failures[0]?.error.message ?? '', /lacks \+evalsha \(NOPERM/);
    assert.equal(recoveries.length, 1);
    assert.deepEqual({ ...recoveries[0], downForMs: undefined }, { failures: 2, downForMs: undefined });
    assert.ok((recoveries[0]?.downForMs ?? -1) >= 0);
    assert.equal(decisions.length, 5);
    for (const event of [...failures, ...recoveries, ...decisions])
      assert.doesNotMatch(JSON.stringify(event), /secret-42/);

    const found = await collect(reader);
    const errorPoints = (found.get('sluice.store.errors') ?? []).map((p) => [
      p.attributes['sluice.operation'],
      p.attributes['sluice.error.reason'],
      p.value,
    ]);
    assert.deepEqual(errorPoints.sort(), [
      ['limit', 'store-error', 1],
      ['peek', 'store-error', 1],
    ]);
    assert.deepEqual(found.get('sluice.requests.allowed'), [{ attributes: labelsOf(limiter), value: 4 }]);
  });
});

/** A real limiter whose decisions get the fields shadow mode adds. */
function withExtras(limiter: Limiter, extras: (decision: Decision) => Record<string, unknown>): Limiter {
  return {
    ...limiter,
    async limit(key, options) {
      const decision = await limiter.limit(key, options);
      return { ...decision, ...extras(decision) };
    },
  };
}

describe('observe: decisions from shadow mode and from failure handling', () => {
  it('counts shadow-denied requests as admitted and shadow-denied', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const real = createLimiter({
      store: memoryStore(),
      prefix: uniquePrefix(),
      policy: fixedWindow({ limit: 2, window: '1h' }),
    });
    const limiter = observe(
      withExtras(real, (d) => ({ allowed: true, shadow: true, shadowDenied: !d.allowed })),
      { meter },
    );
    for (let i = 0; i < 5; i++) assert.equal((await limiter.limit('k')).allowed, true);
    const found = await collect(reader);
    assert.deepEqual(found.get('sluice.requests.allowed'), [{ attributes: labelsOf(limiter), value: 5 }]);
    assert.deepEqual(found.get('sluice.requests.shadow_denied'), [{ attributes: labelsOf(limiter), value: 3 }]);
    assert.equal(found.has('sluice.requests.denied'), false);
  });

  it('counts every store call the failure guard saw fail (timeout, store-error), by its operation', async () => {
    const { reader, provider, meter } = meterWithReader();
    after(() => provider.shutdown());
    const recoveries: StoreRecovery[] = [];
    const { store, control } = switchableStore();
    const limiter = observe(
      createLimiter({
        store,
        prefix: uniquePrefix(),
        policy: fixedWindow({ limit: 10, window: '1h' }),
        timeout: '20ms',
        onRecovery: (recovery) => recoveries.push(recovery),
      }),
      { meter },
    );
    control.mode = 'hang';
    assert.equal((await limiter.limit('user:7')).reason, 'timeout');
    control.mode = 'fail';
    assert.equal((await limiter.limit('user:7')).reason, 'store-error');
    // A call observe() does not wrap still reaches the store through the guard, and is counted.
    await assert.rejects(limiter.refund('user:7'), StoreError);
    control.mode = 'up';
    for (let i = 0; i < 2; i++) assert.equal((await limiter.limit('user:7')).reason, undefined);
    for (const reject of control.pending) reject(new Error('Connection is closed'));
    assert.deepEqual(
      recoveries.map((r) => r.failures),
      [3],
    );
    const found = await collect(reader);
    const reasons = (found.get('sluice.store.errors') ?? [])
      .map((p) => [p.attributes['sluice.operation'], p.attributes['sluice.error.reason'], p.value])
      .sort();
    assert.deepEqual(reasons, [
      ['limit', 'store-error', 1],
      ['limit', 'timeout', 1],
      ['refund', 'store-error', 1],
    ]);
    assert.deepEqual(found.get('sluice.requests.allowed'), [{ attributes: labelsOf(limiter), value: 4 }]);
  });
});

describe('observe: hooks and options', () => {
  it('turns a throwing hook into a process warning, never into a failed call', async () => {
    const limiter = observe(createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1h' }) }), {
      meter: meterWithReader().meter,
      onDecision: () => {
        throw new Error('log sink down');
      },
    });
    const warned = once(process, 'warning');
    assert.equal((await limiter.limit('k')).allowed, true);
    const [warning] = (await warned) as [Error & { code?: string }];
    assert.equal(warning.code, 'SLUICE_HOOK_FAILED');
    assert.match(warning.message, /log sink down/);
  });

  it('rejects bad arguments and options by name', () => {
    const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1h' }) });
    assert.throws(
      () => observe({} as Limiter),
      (e: unknown) => e instanceof InvalidArgumentError && e.argument === 'limiter',
    );
    const bad: [string, unknown][] = [
      ['meter', {}],
      ['onDecision', 'log'],
      ['onStoreError', 1],
      ['onRecover', {}],
      ['includeKeys', 'yes'],
    ];
    for (const [option, value] of bad) {
      assert.throws(
        () => observe(limiter, { [option]: value }),
        (e: unknown) => e instanceof InvalidOptionError && e.option === option,
        option,
      );
    }
    assert.throws(
      () => observe(limiter, 'fast' as never),
      (e: unknown) => e instanceof InvalidOptionError && e.option === 'observe',
    );
  });
});
