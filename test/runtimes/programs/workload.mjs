/**
 * The work every runtime does with the built package, the same in each, as plain JavaScript that
 * each runs as it is. It returns what it saw, for test/runtimes/runtimes.test.ts to compare exactly.
 */

// A key past 256 bytes: stored under its SHA-256 (sluice's own, which every runtime must compute alike).
// Counting is tested here, not the failure policy: on a loaded machine a slow reply is still a reply.
export const COUNTING = '1m';

export const LONG_KEY = 'k'.repeat(300);

/**
 * Every rate algorithm over `store`: five calls against a limit of three an hour (no quota comes
 * back during the test) and the draft-8 policy field of the last denial; a batch of four calls to
 * one key (limitMany: one script in Redis); a concurrency lease taken, refused, given back; and a
 * waitFor that sleeps for its token.
 */
export async function work(sluice, store, prefix) {
  const { createLimiter, fixedWindow, slidingWindow, slidingLog, tokenBucket, gcra, concurrency, rateLimitHeaders } =
    sluice;
  const policies = [
    fixedWindow({ limit: 3, window: '1h', name: 'fixed-window' }),
    slidingWindow({ limit: 3, window: '1h', name: 'sliding-window' }),
    slidingLog({ limit: 3, window: '1h', name: 'sliding-log' }),
    tokenBucket({ capacity: 3, refillPerSecond: 1 / 3600, name: 'token-bucket' }),
    gcra({ limit: 3, period: '1h', name: 'gcra' }),
  ];
  const seen = { algorithms: {} };
  for (const policy of policies) {
    const limiter = createLimiter({ store, policy, prefix, timeout: COUNTING });
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
  const leases = createLimiter({ store, policy: concurrency({ limit: 1, leaseMs: '1m' }), prefix, timeout: COUNTING });
  const held = await leases.acquire('lease');
  const refused = await leases.acquire('lease');
  seen.concurrency = {
    held: held.allowed,
    refused: refused.allowed,
    released: await held.release(),
    again: (await leases.acquire('lease')).allowed,
  };
  // A token every 100 ms: waitFor sleeps for it (unless this runtime took that long already).
  const waiting = createLimiter({
    store,
    policy: tokenBucket({ capacity: 1, refillPerSecond: 10 }),
    prefix,
    timeout: COUNTING,
  });
  seen.waitFor = { first: (await waiting.limit('wait')).allowed, waited: (await waiting.waitFor('wait')).allowed };
  return seen;
}

/**
 * A Hono app whose /limited (sluice/hono) allows each client three requests an hour, by its address
 * as Cloudflare's CF-Connecting-IP header gives it (hono/cloudflare-workers' getConnInfo, which
 * reads nothing else, so the same app serves in every runtime), with draft-8 fields.
 */
export function limitedApp({ sluice, rateLimit, Hono, getConnInfo }, store, prefix) {
  const app = new Hono();
  const limiter = sluice.createLimiter({
    store,
    prefix,
    timeout: COUNTING,
    policy: sluice.fixedWindow({ limit: 3, window: '1h', name: '3-per-1h' }),
  });
  app.use('/limited', rateLimit({ limiter, getConnInfo, headers: 'draft-8' }));
  app.get('/limited', (c) => c.text('hello'));
  return app;
}

/**
 * Requests to a limitedApp, each by `request(address)` as a client at that address: an IPv6 client
 * in four spellings and addresses of one /56, then one of the next /56; an IPv4 client, then as
 * IPv4-mapped IPv6 in three spellings. The statuses, the fields of the next /56's first answer,
 * and the last denial.
 */
export async function clientsWork(request) {
  const statuses = [];
  let neighbour;
  let denial;
  const addresses = [
    '2001:db8:ab:cd01::1',
    '2001:DB8:AB:CD01::1',
    '2001:db8:ab:cdff::2',
    '2001:db8:ab:cd00::9',
    '2001:db8:ab:ce00::1',
  ];
  for (const address of [
    ...addresses,
    '203.0.113.7',
    '::ffff:203.0.113.7',
    '0:0:0:0:0:ffff:cb00:7107',
    '::FFFF:203.0.113.7',
  ]) {
    const response = await request(address);
    statuses.push(response.status);
    if (address === '2001:db8:ab:ce00::1')
      neighbour = {
        policy: response.headers.get('ratelimit-policy'),
        remaining: /;r=(\d+);/.exec(response.headers.get('ratelimit'))?.[1],
      };
    if (response.status === 429) {
      denial = {
        contentType: response.headers.get('content-type'),
        retryAfter: /^\d+$/.test(response.headers.get('retry-after') ?? ''),
        body: await response.json(),
      };
    } else {
      await response.text();
    }
  }
  return { statuses, neighbour, denial };
}

/** A program's main: the workload and a Hono app on the memory store, then, given a port, on a Redis store over ioredis. */
export async function main(modules, [label, port]) {
  const prefix = `rt-${label}`;
  const both = async (store) => {
    const app = limitedApp(modules, store, prefix);
    return {
      work: await work(modules.sluice, store, prefix),
      hono: await clientsWork((address) => app.request('/limited', { headers: { 'cf-connecting-ip': address } })),
    };
  };
  const result = { memory: await both(modules.sluice.memoryStore()) };
  if (port !== undefined) {
    const client = new modules.Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 0 });
    try {
      result.redis = await both(modules.sluice.redisStore(client));
    } finally {
      client.disconnect();
    }
  }
  console.log(JSON.stringify(result));
}
