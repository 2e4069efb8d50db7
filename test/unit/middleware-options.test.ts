import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { createRateLimit, type RateLimitOptions } from '../../src/adapters/core.js';
import { rateLimit as fastifyRateLimit } from '../../src/adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../../src/adapters/hono.js';
import { createLimiter, fixedWindow, InvalidOptionError, memoryStore } from '../../src/index.js';

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
      ['headers', { limiter, headers: 'draft-8' }],
      ['status', { limiter, status: 418 }],
      ['onStoreError', { limiter, onStoreError: 'ignore' }],
      ['trustedProxies', { limiter, trustedProxies: true }],
      ['rateLimit', null],
    ];
    for (const [option, options] of bad) assert.throws(() => createRateLimit(options as RateLimitOptions<unknown>), isOption(option), option);
  });

  it('build a limiter from a policy and a store', async () => {
    const decide = createRateLimit({ policy: fixedWindow({ limit: 1, window: '1m' }), store: memoryStore(), key: () => 'k' });
    const facts = { header: () => undefined, remoteAddress: undefined };
    assert.equal((await decide(undefined, facts)).pass, true);
    assert.equal((await decide(undefined, facts)).pass, false);
  });

  it('on Hono, need the runtime getConnInfo unless a key is given', () => {
    assert.throws(() => honoRateLimit({ limiter }), isOption('getConnInfo'));
    assert.doesNotThrow(() => honoRateLimit({ limiter, key: () => 'everyone' }));
  });

  it('on Fastify, fail at start for a route with bad options', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, { limiter });
    assert.throws(() => app.get('/', { config: { rateLimit: { limiter, status: 500 as 429 } } }, async () => 'home'), isOption('status'));
    await app.close();
  });

  it('on Fastify, let a route with its own policy use it, not the plugin\'s limiter', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, { limiter, key: () => 'k' });
    app.get('/', async () => 'home');
    app.get('/wide', { config: { rateLimit: { policy: fixedWindow({ limit: 3, window: '1m' }), store: memoryStore() } } }, async () => 'wide');
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
