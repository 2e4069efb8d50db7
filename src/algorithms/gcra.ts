import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, positiveInteger } from '../core/validate.js';
import { defineAlgorithm, definePolicy, unchanged } from './algorithm.js';

export interface GcraOptions {
  /** Requests per period, evenly spaced: the sustained rate. */
  limit: number;
  /** The period: ms or a duration string ('1s', '1h'). */
  period: Duration;
  /** How many requests may arrive at once (default `limit`). */
  burst?: number;
  /** The policy's name in RateLimit headers (default 'gcra'). */
  name?: string;
}

const MIN_INTERVAL_US = 500;

/*
 * KEY  a string: the theoretical arrival time (TAT) in µs, an integer
 * p    emission interval in µs (period / limit, rounded to the µs), burst
 *
 * With T the interval, a request of cost n is admitted if max(TAT, now) + n*T <= now + burst*T,
 * and then TAT becomes max(TAT, now) + n*T. A fresh key admits `burst` at once; after that one
 * request every T. Everything is integer µs, so nothing is lost to rounding; the key expires when
 * TAT is reached, when the state equals a fresh key's. Cost n is all or nothing.
 */
const LUA = `
ALG.gcra = {}
local function gcra_tat(key, nowus)
  return math.max(tonumber(redis.call('GET', key) or 0), nowus)
end
function ALG.gcra.decide(key, cost, now, p)
  local interval, burst = p[1], p[2]
  local nowus = now * 1000
  local tat = gcra_tat(key, nowus)
  local ceiling = nowus + burst * interval
  local d = { allowed = tat + cost * interval <= ceiling, remaining = math.floor((ceiling - tat) / interval), reset = math.ceil((tat - nowus) / 1000), retry = 0 }
  if not d.allowed then d.retry = math.ceil((tat + cost * interval - ceiling) / 1000) end
  function d.admit()
    local newTat = tat + cost * interval
    local reset = math.ceil((newTat - nowus) / 1000)
    redis.call('SET', key, string.format('%d', newTat), 'PX', reset + 1)
    return math.floor((ceiling - newTat) / interval), reset, 0
  end
  function d.keep()
    if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, d.reset + 1) end
  end
  return d
end
function ALG.gcra.refund(key, cost, now, p)
  local nowus = now * 1000
  local tat = gcra_tat(key, nowus)
  if tat <= nowus then return false end
  redis.call('SET', key, string.format('%d', math.max(nowus, tat - cost * p[1])), 'KEEPTTL')
  return true
end
`;

const algorithm = defineAlgorithm<number>({
  id: 'gcra',
  lua: LUA,
  decide(now, entry, cost, [interval = 1, burst = 0]) {
    const nowUs = now * 1000;
    const tat = Math.max(entry?.value ?? 0, nowUs);
    const ceiling = nowUs + burst * interval;
    const resetAfter = Math.ceil((tat - nowUs) / 1000);
    return {
      allowed: tat + cost * interval <= ceiling,
      remaining: Math.floor((ceiling - tat) / interval),
      resetAfter,
      retryAfter: tat + cost * interval <= ceiling ? 0 : Math.ceil((tat + cost * interval - ceiling) / 1000),
      admit() {
        const newTat = tat + cost * interval;
        const reset = Math.ceil((newTat - nowUs) / 1000);
        return { write: { value: newTat, ttlMs: reset + 1 }, remaining: Math.floor((ceiling - newTat) / interval), resetAfter: reset, extra: 0 };
      },
      keep: () => (entry ? { value: entry.value, ttlMs: resetAfter + 1 } : undefined),
    };
  },
  refund(now, entry, cost, [interval = 1]) {
    const nowUs = now * 1000;
    if (!entry || entry.value <= nowUs) return unchanged;
    return { write: { value: Math.max(nowUs, entry.value - cost * interval), ttlMs: entry.ttlMs }, done: true };
  },
});

/**
 * The generic cell rate algorithm: `limit` per `period`, evenly spaced, with up to `burst` at once.
 * Exact, and one integer per key.
 */
export function gcra(options: GcraOptions): Policy {
  const o = optionsObject('gcra', options);
  const limit = positiveInteger('limit', o.limit);
  const periodMs = parseDuration('period', o.period);
  const burst = o.burst === undefined ? limit : positiveInteger('burst', o.burst);
  // The interval is kept in whole µs; below 500 µs that rounding could move the rate by over 0.1%.
  const exactInterval = (periodMs * 1000) / limit;
  if (exactInterval < MIN_INTERVAL_US) {
    throw new InvalidOptionError('limit', limit, `at most ${Math.floor((periodMs * 1000) / MIN_INTERVAL_US)} per period here (one request per 500 µs), so the µs-rounded interval stays within 0.1% of the rate`);
  }
  const interval = Math.round(exactInterval);
  return definePolicy({ algorithm: 'gcra', name: policyName(o.name, 'gcra'), limit, windowMs: periodMs, maxCost: burst }, algorithm, [interval, burst]);
}
