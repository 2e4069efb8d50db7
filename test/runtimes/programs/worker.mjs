/**
 * A Cloudflare module worker: the shared workload at /work, at /limited the Hono app limited by
 * sluice/hono, and an observed limiter whose hook throws at /observed, all on the memory store; the
 * same workload and app under /upstash on a Redis store over @upstash/redis (fetch() to the REST
 * endpoint its env names, as a Worker reaches Upstash). The test bundles it for the neutral platform
 * (where no Node built-in resolves) and workerd runs it without nodejs_compat: Web-standard APIs alone.
 */
import { Redis } from '@upstash/redis/cloudflare';
import { Hono } from 'hono';
import { getConnInfo } from 'hono/cloudflare-workers';
import * as sluice from 'sluice';
import { rateLimit } from 'sluice/hono';
import { COUNTING, limitedApp, work } from './workload.mjs';

const PREFIX = 'rt-workerd';

/** The worker's app, made once per isolate: a module worker sees its env only with a request. */
function workerApp(env) {
  const app = limitedApp({ sluice, rateLimit, Hono, getConnInfo }, sluice.memoryStore(), PREFIX);
  app.get('/work', async (c) => c.json(await work(sluice, sluice.memoryStore(), PREFIX)));
  // A hook that throws: with no process to warn through, sluice warns on the console.
  const observed = sluice.observe(
    sluice.createLimiter({ store: sluice.memoryStore(), policy: sluice.fixedWindow({ limit: 1, window: '1h' }) }),
    {
      onDecision() {
        throw new Error('hook down');
      },
    },
  );
  app.get('/observed', async (c) => c.json((await observed.limit('k')).allowed));
  // What sluice's host shims find here: no process (so no nextTick, no emitWarning), timers as numbers.
  app.get('/host', (c) =>
    c.json({ process: typeof globalThis.process, timer: typeof globalThis.setTimeout(() => undefined, 0) }),
  );

  const upstash = sluice.redisStore(
    new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN, enableTelemetry: false }),
  );
  app.route('/upstash', limitedApp({ sluice, rateLimit, Hono, getConnInfo }, upstash, `${PREFIX}-hono`));
  app.get('/upstash/work', async (c) => c.json(await work(sluice, upstash, PREFIX)));
  // Four calls made in one turn, to one key with a limit of three: the store sends them together.
  const together = sluice.createLimiter({
    store: upstash,
    prefix: PREFIX,
    timeout: COUNTING,
    policy: sluice.fixedWindow({ limit: 3, window: '1h' }),
  });
  app.get('/upstash/together/:key', async (c) => {
    const decisions = await Promise.all([1, 2, 3, 4].map(() => together.limit(c.req.param('key'))));
    return c.json(decisions.map((d) => d.allowed));
  });
  // A limiter's timeout, where a Worker's timer dies with the request that armed it: a limiter made
  // once for the isolate, and one over a client with a deadline of its own (docs/runtimes.md).
  const failing = {
    policy: sluice.fixedWindow({ limit: 3, window: '1h' }),
    prefix: PREFIX,
    timeout: 2_000,
    onStoreError: 'deny',
  };
  const deadlined = new Redis({
    url: env.UPSTASH_REDIS_REST_URL,
    token: env.UPSTASH_REDIS_REST_TOKEN,
    enableTelemetry: false,
    signal: () => globalThis.AbortSignal.timeout(2_000),
  });
  // Its own timeout longer than the client's deadline, which fails the call first.
  const shared = sluice.createLimiter({ ...failing, timeout: 10_000, store: sluice.redisStore(deadlined) });
  const once = sluice.createLimiter({ ...failing, store: upstash });
  const answer = async (c, limiter) => {
    const decision = await limiter.limit('deadline');
    return c.json({ allowed: decision.allowed, reason: decision.reason ?? null });
  };
  app.get('/upstash/deadline/module', (c) => answer(c, once));
  app.get('/upstash/deadline/client-signal', (c) => answer(c, shared));
  return app;
}

let app;
export default {
  fetch(request, env, context) {
    app ??= workerApp(env);
    return app.fetch(request, env, context);
  },
};
