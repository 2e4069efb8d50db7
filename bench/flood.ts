import type { Redis } from 'ioredis';
import { createLimiter, fixedWindow, redisStore, type Decision, type Store } from '../dist/esm/index.js';

export interface FloodResult {
  readonly calls: number;
  readonly inFlight: number;
  /** Decisions sent to Redis during the flood, without and with the denied-key cache. */
  readonly callsWithout: number;
  readonly callsWith: number;
  /** The EVALSHA commands that carried them (several decisions share one when batched). */
  readonly commandsWithout: number;
  readonly commandsWith: number;
  /** Whether both floods decided alike, call by call (allowed, limit, remaining). */
  readonly identical: boolean;
  /** When they did not: the first call that differs, both ways. */
  readonly firstDifference?: string;
}

const IN_FLIGHT = 64;

async function scriptCalls(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats');
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

/** `calls` requests on one key allowed 10 per hour, IN_FLIGHT at a time: what Redis sees. */
async function flood(redis: Redis, calls: number, cached: boolean, prefix: string) {
  const store = redisStore(redis);
  let sent = 0;
  const counting: Store = {
    run: (...args) => {
      sent++;
      return store.run(...args);
    },
  };
  const limiter = createLimiter({
    store: counting,
    policy: fixedWindow({ limit: 10, window: '1h' }),
    prefix,
    // The flood compares what Redis decides: on a loaded machine the default 1 s timeout would swap
    // some of those for the failure policy's answers.
    timeout: '1m',
    ...(cached ? { deniedCache: { maxKeys: 1000 } } : {}),
  });
  const decisions: Decision[] = new Array<Decision>(calls);
  let next = 0;
  const before = await scriptCalls(redis);
  async function worker(): Promise<void> {
    while (next < calls) {
      const index = next++;
      decisions[index] = await limiter.limit('flooder');
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  // INFO itself is no EVALSHA, so the difference is the flood's alone (on a server only the bench uses).
  return { decisions, sent, commands: (await scriptCalls(redis)) - before };
}

/** The same flood from one client, once without and once with `deniedCache`, each on a fresh key. */
export async function deniedFlood(redis: Redis, calls: number): Promise<FloodResult> {
  const stamp = Date.now().toString(36);
  const without = await flood(redis, calls, false, `bench-flood-${stamp}-a`);
  const withCache = await flood(redis, calls, true, `bench-flood-${stamp}-b`);
  const summary = (d: Decision | undefined) =>
    d === undefined ? 'none' : `${d.allowed ? 'allowed' : 'denied'} ${d.remaining}/${d.limit} ${d.reason ?? ''}`;
  const differs = without.decisions.findIndex((a, i) => summary(a) !== summary(withCache.decisions[i]));
  return {
    calls,
    inFlight: IN_FLIGHT,
    callsWithout: without.sent,
    callsWith: withCache.sent,
    commandsWithout: without.commands,
    commandsWith: withCache.commands,
    identical: differs === -1,
    ...(differs === -1
      ? {}
      : {
          firstDifference: `call ${differs}: ${summary(without.decisions[differs])} without the cache, ${summary(withCache.decisions[differs])} with it`,
        }),
  };
}
