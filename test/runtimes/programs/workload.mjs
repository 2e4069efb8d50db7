/**
 * The work every runtime does with the built package, the same in each, as plain JavaScript that
 * each runs as it is. It returns what it saw, for test/runtimes/runtimes.test.ts to compare exactly.
 */

// A key past 256 bytes: stored under its SHA-256 (sluice's own, which every runtime must compute alike).
export const LONG_KEY = 'k'.repeat(300);

/**
 * Every rate algorithm over `store`: five calls against a limit of three an hour (no quota comes
 * back during the test) and the draft-8 policy field of the last denial; a batch of four calls to
 * one key (limitMany: one script in Redis); a concurrency lease taken, refused, given back; and a
 * waitFor that sleeps for its token.
 */
export async function work(sluice, store, prefix) {
  const { createLimiter, fixedWindow, slidingWindow, slidingLog, tokenBucket, gcra, concurrency, rateLimitHeaders } = sluice;
  const policies = [
    fixedWindow({ limit: 3, window: '1h', name: 'fixed-window' }),
    slidingWindow({ limit: 3, window: '1h', name: 'sliding-window' }),
    slidingLog({ limit: 3, window: '1h', name: 'sliding-log' }),
    tokenBucket({ capacity: 3, refillPerSecond: 1 / 3600, name: 'token-bucket' }),
    gcra({ limit: 3, period: '1h', name: 'gcra' }),
  ];
  const seen = { algorithms: {} };
  for (const policy of policies) {
    const limiter = createLimiter({ store, policy, prefix });
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await limiter.limit(LONG_KEY));
    const batch = await limiter.limitMany(['batch', 'batch', 'batch', 'batch']);
    seen.algorithms[policy.algorithm] = {
      allowed: decisions.map((d) => d.allowed),
      remaining: decisions.map((d) => d.remaining),
      batchAllowed: batch.map((d) => d.allowed),
      policyField: rateLimitHeaders(decisions[4], 'draft-8', Date.now(), LONG_KEY)['RateLimit-Policy'],
    };
  }
  const leases = createLimiter({ store, policy: concurrency({ limit: 1, leaseMs: '1m' }), prefix });
  const held = await leases.acquire('lease');
  const refused = await leases.acquire('lease');
  seen.concurrency = { held: held.allowed, refused: refused.allowed, released: await held.release(), again: (await leases.acquire('lease')).allowed };
  // A token every 100 ms: waitFor sleeps for it (unless this runtime took that long already).
  const waiting = createLimiter({ store, policy: tokenBucket({ capacity: 1, refillPerSecond: 10 }), prefix });
  seen.waitFor = { first: (await waiting.limit('wait')).allowed, waited: (await waiting.waitFor('wait')).allowed };
  return seen;
}

/** A program's main: the memory store, then, given a port, a Redis store over ioredis on it. */
export async function main(sluice, Redis, [label, port]) {
  const result = { memory: await work(sluice, sluice.memoryStore(), `rt-${label}`) };
  if (port !== undefined) {
    const client = new Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 0 });
    try {
      result.redis = await work(sluice, sluice.redisStore(client), `rt-${label}`);
    } finally {
      client.disconnect();
    }
  }
  console.log(JSON.stringify(result));
}
