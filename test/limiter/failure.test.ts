import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DENY_RETRY_AFTER_MS } from '../../src/limiter/failure-options.js';
import {
  InvalidArgumentError,
  InvalidOptionError,
  StoreError,
  concurrency,
  createLimiter,
  fixedWindow,
  memoryStore,
  type LimiterOptions,
  type Store,
  type StoreFailure,
  type StoreRecovery,
} from '../../src/index.js';
import { switchableStore } from '../support/switchable-store.js';

const policy = fixedWindow({ limit: 5, window: '1h' });

/** Runs `body` and returns what the process emitted meanwhile on `event` (warnings are emitted on the next tick). */
async function emittedDuring<T>(event: 'warning' | 'unhandledRejection', body: () => Promise<void>): Promise<T[]> {
  const emitted: T[] = [];
  const listener = (value: T) => emitted.push(value);
  process.on(event, listener);
  try {
    await body();
    await sleep(20);
  } finally {
    process.off(event, listener);
  }
  return emitted;
}

function limiterWith(options: Partial<LimiterOptions>) {
  const { store, control } = switchableStore();
  const failures: StoreFailure[] = [];
  const recoveries: StoreRecovery[] = [];
  const limiter = createLimiter({
    store,
    policy,
    onOutage: (f) => failures.push(f),
    onRecovery: (r) => recoveries.push(r),
    ...options,
  });
  return { limiter, control, failures, recoveries };
}

describe('failure policy', () => {
  it("'allow' admits while the store fails, says why, and returns to the store after", async () => {
    const { limiter, control, failures, recoveries } = limiterWith({ onStoreError: 'allow' });
    assert.equal((await limiter.limit('k', { cost: 5 })).remaining, 0);
    control.mode = 'fail';
    const open = await limiter.limit('k');
    assert.deepEqual(
      { ...open, error: undefined, policies: undefined },
      {
        allowed: true,
        limit: 5,
        remaining: 5,
        resetAfterMs: 0,
        retryAfterMs: 0,
        reason: 'store-error',
        error: undefined,
        policies: undefined,
      },
    );
    assert.deepEqual(
      open.policies.map((p) => [p.name, p.allowed, p.remaining]),
      [['5-per-1h', true, 5]],
    );
    assert.ok(
      open.error instanceof StoreError &&
        open.error.code === 'SLUICE_STORE_ERROR' &&
        open.error.message.includes('ECONNREFUSED'),
    );
    control.mode = 'throw';
    assert.equal((await limiter.peek('k')).reason, 'store-error');
    assert.deepEqual(
      failures.map((f) => [f.operation, f.reason, f.failures]),
      [
        ['limit', 'store-error', 1],
        ['peek', 'store-error', 2],
      ],
    );
    control.mode = 'up';
    const back = await limiter.limit('k');
    assert.deepEqual(
      { ...back, policies: undefined },
      {
        allowed: false,
        limit: 5,
        remaining: 0,
        resetAfterMs: back.resetAfterMs,
        retryAfterMs: back.retryAfterMs,
        policies: undefined,
        decidedAt: 1_000_000,
      },
    );
    assert.equal(recoveries.length, 1);
    assert.equal(recoveries[0]?.failures, 2);
    await limiter.limit('k');
    assert.equal(recoveries.length, 1, 'a recovery is reported once');
  });

  it("'deny' refuses while the store fails, with a retryAfterMs", async () => {
    const { limiter, control } = limiterWith({ onStoreError: 'deny' });
    control.mode = 'fail';
    const closed = await limiter.limit('k');
    assert.deepEqual(
      { ...closed, error: undefined, policies: undefined },
      {
        allowed: false,
        limit: 5,
        remaining: 0,
        resetAfterMs: DENY_RETRY_AFTER_MS,
        retryAfterMs: DENY_RETRY_AFTER_MS,
        reason: 'store-error',
        error: undefined,
        policies: undefined,
      },
    );
  });

  it('a fallback limiter decides while the store fails, and the store decides again after', async () => {
    const fallback = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 2, window: '1h' }) });
    const { limiter, control } = limiterWith({ onStoreError: fallback });
    await limiter.limit('k');
    control.mode = 'fail';
    const during = [
      await limiter.limit('k'),
      await limiter.limit('k'),
      await limiter.limit('k'),
      await limiter.peek('k'),
    ];
    assert.deepEqual(
      during.map((d) => [d.allowed, d.limit, d.remaining, d.reason]),
      [
        [true, 2, 1, 'store-error'],
        [true, 2, 0, 'store-error'],
        [false, 2, 0, 'store-error'],
        [false, 2, 0, 'store-error'],
      ],
    );
    control.mode = 'up';
    assert.deepEqual(await limiter.limit('k'), { ...(await limiter.peek('k')), remaining: 3 });
  });

  it('refuses at creation a fallback limiter that could not take the calls it would be asked in an outage', () => {
    const tokens = fixedWindow({ limit: 1000, window: '1m', counts: 'tokens', name: 'tokens' });
    const requestsOnly = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 5, window: '1m' }) });
    const slots = createLimiter({ store: memoryStore(), policy: concurrency({ limit: 2, leaseMs: '1m' }) });
    const refusals = [
      () => limiterWith({ policy: [policy, tokens], onStoreError: requestsOnly }),
      () => limiterWith({ policy: concurrency({ limit: 2, leaseMs: '1m' }), onStoreError: requestsOnly }),
      () => limiterWith({ onStoreError: slots }),
    ].map((create) => {
      try {
        create();
      } catch (error) {
        assert.ok(error instanceof InvalidOptionError);
        return [error.option, error.message];
      }
      return assert.fail('created');
    });
    assert.deepEqual(refusals, [
      [
        'onStoreError',
        'sluice: option "onStoreError" must be a fallback limiter counting every unit this limiter counts; it does not count tokens; got an object',
      ],
      [
        'onStoreError',
        'sluice: option "onStoreError" must be a fallback limiter with a concurrency policy, to lend the leases acquire() asks for; got an object',
      ],
      [
        'onStoreError',
        'sluice: option "onStoreError" must be a fallback limiter without a concurrency policy: limit() cannot take its slots; got an object',
      ],
    ]);
    const both = createLimiter({ store: memoryStore(), policy: [fixedWindow({ limit: 5, window: '1m' }), tokens] });
    assert.ok(limiterWith({ policy: [policy, tokens], onStoreError: both }).limiter);
  });

  it('answers within the timeout when the store hangs, and a late rejection is handled', async () => {
    const unhandled = await emittedDuring('unhandledRejection', async () => {
      const { limiter, control, failures } = limiterWith({ timeout: '20ms', onStoreError: 'deny' });
      control.mode = 'hang';
      const decision = await limiter.limit('k');
      assert.equal(decision.reason, 'timeout');
      assert.match(decision.error?.message ?? '', /no reply within 20 ms/);
      assert.equal(failures[0]?.reason, 'timeout');
      await assert.rejects(limiter.reset('k'), StoreError);
      // The store gives up on the timed-out call much later, as a client does when it reconnects.
      for (const reject of control.pending) reject(new Error('Connection is closed'));
    });
    assert.deepEqual(unhandled, []);
  });

  it('a call with no reply while the store says why it is unreachable fails with that reason, not as a timeout', async () => {
    const { store, control } = switchableStore();
    control.mode = 'hang';
    const refused = new StoreError('connection refused by 127.0.0.1:1');
    for (const [unreachable, reason, message] of [
      [() => refused, 'store-error', refused.message],
      [() => undefined, 'timeout', 'sluice: store failed: no reply within 20 ms'],
      // A custom store that breaks the contract is timed out as any other.
      [() => new Error('not a StoreError'), 'timeout', 'sluice: store failed: no reply within 20 ms'],
      [
        () => {
          throw new Error('thrown');
        },
        'timeout',
        'sluice: store failed: no reply within 20 ms',
      ],
    ] as const) {
      const limiter = createLimiter({
        store: { ...store, unreachable } as Store,
        policy,
        timeout: '20ms',
        onOutage: () => {},
      });
      const decision = await limiter.limit('k');
      assert.deepEqual([decision.reason, decision.error?.message], [reason, message]);
      await assert.rejects(limiter.reset('k'), { message });
    }
    for (const reject of control.pending) reject(new Error('Connection is closed'));
  });

  it('answers a reply no decision can be read from as a store error, never an unhandled rejection', async () => {
    const { limiter, control, failures } = limiterWith({ onStoreError: 'deny' });
    control.mode = 'garbage';
    const unhandled = await emittedDuring('unhandledRejection', async () => {
      const decision = await limiter.limit('k');
      assert.equal(decision.allowed, false);
      assert.equal(decision.reason, 'store-error');
      assert.ok(decision.error instanceof StoreError);
    });
    assert.deepEqual(unhandled, []);
    assert.equal(failures.length, 1);
  });

  it('answers a store that answers no promise or too short a reply, or rejects with a value without a toString, as a store error', async () => {
    const { limiter, control, failures } = limiterWith({ onStoreError: 'deny', timeout: '50ms' });
    const unhandled = await emittedDuring('unhandledRejection', async () => {
      control.mode = 'no-promise';
      const decision = await limiter.limit('k');
      assert.deepEqual([decision.allowed, decision.reason], [false, 'store-error']);
      assert.match(decision.error?.message ?? '', /the store answered object, not a promise/);
      control.mode = 'short-reply';
      const short = await limiter.limit('k');
      assert.deepEqual([short.allowed, short.reason], [false, 'store-error']);
      assert.match(short.error?.message ?? '', /the store's reply holds 3 numbers, not the 8 a decision needs/);
      control.mode = 'odd-rejection';
      const odd = await limiter.limit('k');
      assert.deepEqual([odd.reason, odd.error?.message], ['store-error', 'sluice: store failed: [object Object]']);
      // Past the timeout: neither call is reported again as timed out.
      await sleep(80);
    });
    assert.deepEqual(unhandled, []);
    assert.deepEqual(
      failures.map((f) => f.reason),
      ['store-error', 'store-error', 'store-error'],
    );
  });

  it('a fallback limiter that throws, or answers no promise, answers the call: with its error, or its decision', async () => {
    const fallback = createLimiter({ store: memoryStore(), policy });
    const broken = (limit: () => unknown) =>
      limiterWith({ onStoreError: { ...fallback, limit } as never, timeout: '20ms' });
    const unhandled = await emittedDuring('unhandledRejection', async () => {
      for (const mode of ['fail', 'hang'] as const) {
        const throwing = broken(() => {
          throw new Error('fallback broke');
        });
        throwing.control.mode = mode;
        await assert.rejects(throwing.limiter.limit('k'), /fallback broke/, mode);
        const plain = broken(() => ({
          allowed: true,
          limit: 5,
          remaining: 7,
          resetAfterMs: 0,
          retryAfterMs: 0,
          policies: [],
        }));
        plain.control.mode = mode;
        const decision = await plain.limiter.limit('k');
        assert.deepEqual([decision.remaining, decision.reason], [7, mode === 'fail' ? 'store-error' : 'timeout']);
      }
    });
    assert.deepEqual(unhandled, []);
  });

  it('calls a watcher as methods of the object given, so a class instance keeps its this', async () => {
    const seen: string[] = [];
    // The callbacks reach `record` through `this`.
    class Monitor {
      onOutage(failure: StoreFailure) {
        this.record(`failed ${failure.failures}`);
      }
      onRecovery(recovery: StoreRecovery) {
        this.record(`recovered after ${recovery.failures}`);
      }
      record(line: string) {
        seen.push(line);
      }
    }
    const { store, control } = switchableStore();
    const limiter = createLimiter({ store, policy, onOutage: () => undefined });
    limiter.watchStore(new Monitor());
    control.mode = 'fail';
    await limiter.limit('k');
    control.mode = 'up';
    await limiter.limit('k');
    assert.deepEqual(seen, ['failed 1', 'recovered after 1']);
  });

  it('refuses a watcher that is not an object of functions, naming the bad callback', () => {
    const limiter = createLimiter({ store: switchableStore().store, policy });
    assert.throws(() => limiter.watchStore(null as never), InvalidArgumentError);
    assert.throws(() => limiter.watchStore({ onOutage: 'log' } as never), /watcher\.onOutage/);
  });

  it('a hook that throws changes nothing but a warning', async () => {
    const warnings = await emittedDuring<Error>('warning', async () => {
      for (const thrown of [new Error('metrics down'), Object.create(null) as unknown]) {
        const { store, control } = switchableStore();
        const onOutage = () => {
          throw thrown;
        };
        const limiter = createLimiter({ store, policy, onOutage });
        control.mode = 'fail';
        assert.equal((await limiter.limit('k')).reason, 'store-error');
      }
    });
    assert.deepEqual(
      warnings.map((w) => [(w as Error & { code?: string }).code, w.message]),
      [
        ['SLUICE_HOOK_FAILED', 'sluice: onOutage threw: metrics down'],
        ['SLUICE_HOOK_FAILED', 'sluice: onOutage threw: [object Object]'],
      ],
    );
  });

  it('fails open by default, with one warning per outage when no onOutage callback is set', async () => {
    const warnings = await emittedDuring<Error>('warning', async () => {
      const { store, control } = switchableStore();
      const limiter = createLimiter({ store, policy });
      control.mode = 'fail';
      assert.equal((await limiter.limit('k')).allowed, true);
      assert.equal((await limiter.limit('k')).allowed, true);
      control.mode = 'up';
      await limiter.limit('k');
      control.mode = 'fail';
      await limiter.limit('k');
    });
    assert.deepEqual(
      warnings.map((w) => (w as Error & { code?: string }).code),
      ['SLUICE_STORE_FAILED', 'SLUICE_STORE_FAILED'],
    );
    assert.match(
      warnings[0]?.message ?? '',
      /^sluice: store failed: ECONNREFUSED \(store-error\); answering 'allow' until it recovers$/,
    );
  });

  it('watchStore adds a watcher told what onOutage and onRecovery are; the default warning still speaks for the limiter', async () => {
    const told: string[] = [];
    const warnings = await emittedDuring<Error>('warning', async () => {
      const { store, control } = switchableStore();
      const limiter = createLimiter({ store, policy });
      limiter.watchStore({
        onOutage: (f) => told.push(`${f.operation} ${f.reason} ${f.failures}`),
        onRecovery: (r) => told.push(`recovered after ${r.failures}`),
      });
      control.mode = 'fail';
      await limiter.limit('k');
      await assert.rejects(limiter.reset('k'), StoreError);
      control.mode = 'up';
      await limiter.limit('k');
    });
    assert.deepEqual(told, ['limit store-error 1', 'reset store-error 2', 'recovered after 2']);
    assert.deepEqual(
      warnings.map((w) => (w as Error & { code?: string }).code),
      ['SLUICE_STORE_FAILED'],
    );
  });

  it('rejects bad failure options at construction', () => {
    const store = memoryStore();
    for (const [option, value] of [
      ['timeout', 0],
      ['timeout', '5 minutes'],
      // Past the longest a timer waits (2^31 - 1 ms), though a duration may be up to 366 days.
      ['timeout', '25d'],
      ['onStoreError', 'ignore'],
      ['onStoreError', {}],
      ['onOutage', 'log'],
      ['onRecovery', 42],
    ] as const) {
      assert.throws(
        () => createLimiter({ store, policy, [option]: value }),
        (e: unknown) => e instanceof InvalidOptionError && e.option === option,
        `${option}: ${JSON.stringify(value)}`,
      );
    }
    assert.equal(createLimiter({ store, policy, timeout: '24d' }).prefix, 'sluice');
  });
});
