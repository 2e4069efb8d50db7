import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { createRateLimit } from '../../src/adapters/middleware.js';
import { type RateLimitOptions } from '../../src/adapters/middleware-options.js';
import { rateLimit as fastifyRateLimit } from '../../src/adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../../src/adapters/hono.js';
import {
  concurrency,
  createLimiter,
  fixedWindow,
  InvalidOptionError,
  memoryStore,
  type Decision,
} from '../../src/index.js';

const limiter = createLimiter({ store: memoryStore(), policy: fixedWindow({ limit: 1, window: '1m' }) });
const isOption = (option: string) => (error: unknown) => error instanceof InvalidOptionError && error.option === option;

describe('middleware options', () => {
  it('are checked when the middleware is built, each bad one named', () => {
    const bad: [string, unknown][] = [
      ['limiter', { limiter: {} }],
      ['limiter', {}],
      ['policy', { store: memoryStore() }],
      ['store', { policy: fixedWindow({ limit: 1, window: '1s' }) }],
      ['key', { limiter, key: 'ip' }],
      ['skip', { limiter, skip: true }],
      ['headers', { limiter, headers: 'draft-9' }],
      ['respond', { limiter, respond: { status: 403 } }],
      ['body', { limiter, body: () => 'no', respond: () => ({ status: 403 }) }],
      ['status', { limiter, status: 302 }],
      ['status', { limiter, status: 600 }],
      ['status', { limiter, status: '429' }],
      ['status', { limiter, status: 429.5 }],
      ['onStoreError', { limiter, onStoreError: 'ignore' }],
      ['onStoreError', { limiter, onStoreError: 'deny' }],
      [
        'onStoreError',
        { policy: fixedWindow({ limit: 1, window: '1s' }), store: memoryStore(), onStoreError: 'ignore' },
      ],
      ['trustedProxies', { limiter, trustedProxies: true }],
      ['trustedProxies', { limiter, trustedProxies: 'framework' }],
      ['rateLimit', null],
      ['limiter', { policy: () => fixedWindow({ limit: 1, window: '1s' }) }],
      ['limiter', { policy: () => fixedWindow({ limit: 1, window: '1s' }), store: memoryStore() }],
      ['policy', { limiter, policy: fixedWindow({ limit: 1, window: '1s' }) }],
      ['store', { limiter, store: memoryStore() }],
      ['skipFailedRequests', { limiter, skipFailedRequests: 'yes' }],
      ['limiter', { limiter: { limit: (key: string) => limiter.limit(key) }, skipSuccessfulRequests: true }],
      [
        'limiter',
        { limiter: createLimiter({ store: memoryStore(), policy: concurrency({ limit: 2, leaseMs: '30s' }) }) },
      ],
      ['policy', { policy: concurrency({ limit: 2, leaseMs: '30s' }), store: memoryStore() }],
      [
        'headers',
        {
          limiter: createLimiter({
            store: memoryStore(),
            policy: fixedWindow({ limit: 100, window: '1m', counts: 'llm:tokens' }),
          }),
          headers: 'openai',
        },
      ],
      [
        'policy',
        {
          policy: [fixedWindow({ limit: 1, window: '1s' }), concurrency({ limit: 2, leaseMs: '30s' })],
          store: memoryStore(),
        },
      ],
    ];
    for (const [option, options] of bad)
      assert.throws(() => createRateLimit(options as RateLimitOptions<unknown>), isOption(option), option);
  });

  it("refuse unknown options, naming sluice's option for what express-rate-limit, @fastify/rate-limit and koa-ratelimit call theirs", () => {
    const renamed: [string, unknown, string][] = [
      [
        'keyGenerator',
        () => 'k',
        'use "key": (req) => the client\'s key (the adapter\'s clientAddress(req) gives the default one)',
      ],
      ['max', 100, 'use "policy" (e.g. fixedWindow({ limit: 100, window: "15m" })) with "store", or a "limiter"'],
      ['limit', 100, 'use "policy" (e.g. fixedWindow({ limit: 100, window: "15m" })) with "store", or a "limiter"'],
      [
        'windowMs',
        60_000,
        'use "policy" (e.g. fixedWindow({ limit: 100, window: "15m" })) with "store", or a "limiter"',
      ],
      [
        'timeWindow',
        '1 minute',
        'use "policy" (e.g. fixedWindow({ limit: 100, window: "15m" })) with "store", or a "limiter"',
      ],
      [
        'standardHeaders',
        'draft-7',
        'use "headers": "draft-11" (the default), "draft-8", "draft-7", "draft-6", "legacy", "openai" or false',
      ],
      [
        'legacyHeaders',
        false,
        'use "headers": "draft-11" (the default), "draft-8", "draft-7", "draft-6", "legacy", "openai" or false',
      ],
      ['message', 'slow down', 'use "body": (req, denial) => what to send'],
      ['errorResponseBuilder', () => ({}), 'use "body": (req, denial) => what to send'],
      [
        'handler',
        () => undefined,
        'use "respond": (req, denial) => ({ status, headers, body }), or "body" for the body alone; "onDenied": (req, denial) => a side effect on each denial',
      ],
      ['statusCode', 429, 'use "status"'],
      ['allowList', ['127.0.0.1'], 'use "skip": (req) => true lets a request through uncounted'],
      [
        'skipOnError',
        true,
        'failing open is the default; "onStoreError" chooses otherwise (beside "policy" and "store", or createLimiter\'s for a "limiter")',
      ],
      [
        'passOnStoreError',
        true,
        'failing open is the default; "onStoreError" chooses otherwise (beside "policy" and "store", or createLimiter\'s for a "limiter")',
      ],
      [
        'onWarning',
        () => undefined,
        "sluice's warnings are process warnings, each with a code (docs/errors.md#warnings): process.on('warning', (warning) => ...)",
      ],
      ['keyPrefix', 'api', 'use "prefix"'],
      ['validate', false, 'sluice checks every option when the middleware is built; there is nothing to turn off'],
      [
        'trustedProxy',
        1,
        'its options are limiter, policy, store, prefix, key, cost, settle, skip, skipSuccessfulRequests, skipFailedRequests, headers, status, onDenied, body, respond, onStoreError, trustedProxies, proxyHeader, ipv6Subnet',
      ],
    ];
    for (const [option, value, instead] of renamed) {
      assert.throws(
        () => createRateLimit({ limiter, [option]: value }),
        (error: unknown) =>
          isOption(option)(error) &&
          (error as Error).message === `sluice: rateLimit has no option "${option}"; ${instead}`,
        option,
      );
    }
  });

  it('on Hono, take getConnInfo besides the shared options; elsewhere it is unknown', () => {
    assert.throws(
      () => honoRateLimit({ limiter, getConnInfo: () => ({ remote: {} }), getConnectionInfo: 1 } as never),
      isOption('getConnectionInfo'),
    );
    assert.throws(
      () => createRateLimit({ limiter, getConnInfo: () => ({ remote: {} }) } as RateLimitOptions<unknown>),
      isOption('getConnInfo'),
    );
  });

  it("on Fastify, reject register() for an unknown plugin option, and take Fastify's own register options", async () => {
    const app = Fastify();
    await assert.rejects(async () => app.register(fastifyRateLimit, { limiter, max: 5 } as never), isOption('max'));
    await app.close();
    const ok = Fastify();
    await ok.register(fastifyRateLimit, { limiter, logLevel: 'warn' } as never);
    assert.throws(
      () => ok.get('/', { config: { rateLimit: { timeWindow: 1000 } as never } }, () => 'home'),
      isOption('timeWindow'),
    );
    await ok.close();
  });

  it('build a limiter from a policy and a store', async () => {
    const decide = createRateLimit({
      policy: fixedWindow({ limit: 1, window: '1m' }),
      store: memoryStore(),
      key: () => 'k',
    });
    const facts = { header: () => undefined, remoteAddress: undefined };
    assert.equal((await decide(undefined, facts)).pass, true);
    assert.equal((await decide(undefined, facts)).pass, false);
  });

  it("give the handler the limiter's decision whole, its fields in their order, and the key", async () => {
    const facts = { header: () => undefined, remoteAddress: undefined };
    const policy = fixedWindow({ limit: 5, window: '1m' });
    const plain = createLimiter({ store: memoryStore(), policy });
    const shadow = createLimiter({ store: memoryStore(), policy, shadow: true });
    const withOwnField: typeof plain = {
      ...plain,
      limit: async (key, options) => ({ ...(await plain.limit(key, options)), tier: 'gold' }),
    };
    // The six fields of a decision of createLimiter, in an order of its own.
    const reordered: typeof plain = {
      ...plain,
      limit: async (key, options) => {
        const { policies, ...rest } = await plain.limit(key, options);
        return { policies, ...rest };
      },
    };
    for (const [name, own] of Object.entries({ plain, shadow, withOwnField, reordered })) {
      let decided: Decision | undefined;
      const decide = createRateLimit({
        limiter: { ...own, limit: async (key, options) => (decided = await own.limit(key, options)) },
        key: () => name,
      });
      for (let i = 0; i < 2; i++) {
        const outcome = await decide(undefined, facts);
        const info = outcome.pass ? outcome.rateLimit : undefined;
        assert.deepEqual(info, { ...decided, key: name }, name);
        assert.deepEqual(Object.keys(info ?? {}), [...Object.keys(decided ?? {}), 'key'], name);
      }
    }
  });

  it('on Hono, need the runtime getConnInfo unless a key is given', () => {
    assert.throws(() => honoRateLimit({ limiter }), isOption('getConnInfo'));
    assert.doesNotThrow(() => honoRateLimit({ limiter, key: () => 'everyone' }));
  });

  it('on Fastify, fail at start for a route with bad options', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, { limiter });
    assert.throws(
      () => app.get('/', { config: { rateLimit: { limiter, status: 200 } } }, () => 'home'),
      isOption('status'),
    );
    await app.close();
  });

  it("on Fastify, let a route with its own policy use it, not the plugin's limiter", async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, { limiter, key: () => 'k' });
    app.get('/', () => 'home');
    app.get(
      '/wide',
      { config: { rateLimit: { policy: fixedWindow({ limit: 3, window: '1m' }), store: memoryStore() } } },
      () => 'wide',
    );
    const statuses = async (url: string) => {
      const result: number[] = [];
      for (let i = 0; i < 4; i++) result.push((await app.inject({ url })).statusCode);
      return result;
    };
    assert.deepEqual(await statuses('/wide'), [200, 200, 200, 429]);
    assert.deepEqual(await statuses('/'), [200, 429, 429, 429]);
    await app.close();
  });
});
