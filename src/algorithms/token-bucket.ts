import { MAX_DURATION_MS } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Entry, Policy } from '../core/types.js';
import { optionsObject, policyName, positiveFinite, positiveInteger } from '../core/validate.js';
import { defineAlgorithm, definePolicy, unchanged } from './algorithm.js';

export interface TokenBucketOptions {
  /** The most tokens the bucket holds: the largest burst. A new bucket starts full. */
  capacity: number;
  /** Tokens added per second, continuously (fractions allowed: 0.5 is one token every 2 s). */
  refillPerSecond: number;
  /** The policy's name in RateLimit headers (default 'token-bucket'). */
  name?: string;
}

interface Bucket {
  readonly tokens: number;
  readonly at: number;
}

/*
 * KEY  a string "<tokens> <ts>": the tokens left (a float, written with %.17g so it reads back
 *      exactly) at ts (ms). One string rather than a hash: about 40 bytes less per client.
 * p    capacity, refill per second
 *
 * A missing key is a full bucket, so the key may expire once the bucket would be full again.
 * retryAfter is checked against the very sum the next call computes: (cost - tokens) / rate can
 * round down by a hair, and a client retrying on time must not be refused.
 * A call that is not counted writes no tokens (the stored state already implies the refill) but
 * refreshes the TTL, so a key that lost its TTL gets it back.
 */
const LUA = `
ALG.tb = {}
local function tb_read(key)
  local state = redis.call('GET', key)
  if not state then return nil, nil end
  local tokens, at = string.match(state, '(%S+) (%S+)')
  return tonumber(tokens), tonumber(at)
end
local function tb_refilled(stored, at, t, capacity, rate)
  if not stored then return capacity end
  return math.min(capacity, stored + math.max(0, t - at) * rate)
end
local function tb_state(tokens, now)
  return string.format('%.17g %d', tokens, now)
end
function ALG.tb.decide(key, cost, now, p)
  local capacity, rate = p[1], p[2] / 1000
  local stored, at = tb_read(key)
  local tokens = tb_refilled(stored, at, now, capacity, rate)
  local d = { allowed = tokens >= cost, remaining = math.floor(tokens), reset = math.ceil((capacity - tokens) / rate), retry = 0 }
  if not d.allowed then
    d.retry = math.ceil((cost - tokens) / rate)
    if tb_refilled(stored, at, now + d.retry, capacity, rate) < cost then d.retry = d.retry + 1 end
  end
  function d.admit()
    local left = tokens - cost
    local reset = math.ceil((capacity - left) / rate)
    redis.call('SET', key, tb_state(left, now), 'PX', reset + 1)
    return math.floor(left), reset, 0
  end
  function d.keep()
    if stored then redis.call('PEXPIRE', key, d.reset + 1) end
  end
  return d
end
function ALG.tb.refund(key, cost, now, p)
  local capacity = p[1]
  local stored, at = tb_read(key)
  local tokens = tb_refilled(stored, at, now, capacity, p[2] / 1000)
  if not stored or tokens >= capacity then return false end
  redis.call('SET', key, tb_state(math.min(capacity, tokens + cost), now), 'KEEPTTL')
  return true
end
`;

function tokensAt(now: number, entry: Entry<Bucket> | undefined, capacity: number, rate: number): number {
  if (!entry) return capacity;
  return Math.min(capacity, entry.value.tokens + Math.max(0, now - entry.value.at) * rate);
}

const algorithm = defineAlgorithm<Bucket>({
  id: 'tb',
  lua: LUA,
  decide(now, entry, cost, [capacity = 0, perSecond = 0]) {
    const rate = perSecond / 1000;
    const tokens = tokensAt(now, entry, capacity, rate);
    const resetAfter = Math.ceil((capacity - tokens) / rate);
    let retryAfter = tokens >= cost ? 0 : Math.ceil((cost - tokens) / rate);
    if (retryAfter > 0 && tokensAt(now + retryAfter, entry, capacity, rate) < cost) retryAfter++;
    return {
      allowed: tokens >= cost,
      remaining: Math.floor(tokens),
      resetAfter,
      retryAfter,
      admit() {
        const left = tokens - cost;
        const reset = Math.ceil((capacity - left) / rate);
        return { write: { value: { tokens: left, at: now }, ttlMs: reset + 1 }, remaining: Math.floor(left), resetAfter: reset, extra: 0 };
      },
      keep: () => (entry ? { value: entry.value, ttlMs: resetAfter + 1 } : undefined),
    };
  },
  refund(now, entry, cost, [capacity = 0, perSecond = 0]) {
    const tokens = tokensAt(now, entry, capacity, perSecond / 1000);
    if (!entry || tokens >= capacity) return unchanged;
    return { write: { value: { tokens: Math.min(capacity, tokens + cost), at: now }, ttlMs: entry.ttlMs }, done: true };
  },
});

/** Bursts up to `capacity`, then `refillPerSecond` on average; O(1) memory per key. */
export function tokenBucket(options: TokenBucketOptions): Policy {
  const o = optionsObject('tokenBucket', options);
  const capacity = positiveInteger('capacity', o.capacity);
  const refillPerSecond = positiveFinite('refillPerSecond', o.refillPerSecond);
  const windowMs = Math.ceil((capacity * 1000) / refillPerSecond);
  if (windowMs > MAX_DURATION_MS) {
    throw new InvalidOptionError('refillPerSecond', refillPerSecond, `fast enough to refill ${capacity} tokens within 366 days`);
  }
  return definePolicy({
    algorithm: 'token-bucket',
    name: policyName(o.name, 'token-bucket'),
    limit: capacity,
    windowMs,
    maxCost: capacity }, algorithm, [capacity, refillPerSecond]);
}
