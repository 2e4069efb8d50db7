import { MAX_DURATION_MS } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, positiveFinite, positiveInteger } from '../core/validate.js';
import { defineScript, reply } from './script.js';

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
 * KEYS[1]  a string "<tokens> <ts>": the tokens left (a float, written with %.17g so it reads back
 *          exactly) at ts (ms). One string, not a hash: about half the memory per client.
 * ARGV     cost, peek, capacity, refill per second
 * reply    allowed, remaining, resetAfterMs, retryAfterMs, now
 *
 * A missing key is a full bucket, so the key may expire once the bucket would be full again.
 * A denied call writes no tokens (the stored state already implies the refill) but refreshes the
 * TTL, so a key that lost its TTL gets it back.
 */
const LUA = `
local capacity = tonumber(ARGV[3])
local rate = tonumber(ARGV[4]) / 1000
local state = redis.call('GET', KEYS[1])
local tokens = capacity
if state then
  local stored, at = string.match(state, '(%S+) (%S+)')
  tokens = math.min(capacity, tonumber(stored) + math.max(0, now - tonumber(at)) * rate)
end
local allowed = tokens >= cost
if allowed and not peek then tokens = tokens - cost end
local resetAfter = math.ceil((capacity - tokens) / rate)
local retryAfter = 0
if not allowed then retryAfter = math.ceil((cost - tokens) / rate) end
if allowed and not peek then
  redis.call('SET', KEYS[1], string.format('%.17g %d', tokens, now), 'PX', resetAfter + 1)
elseif state and not peek then
  redis.call('PEXPIRE', KEYS[1], resetAfter + 1)
end
return {allowed and 1 or 0, math.floor(tokens), resetAfter, retryAfter, now}
`;

const script = defineScript<Bucket>('token-bucket', LUA, (now, [entry], [cost = 1, peek = 0, capacity = 0, perSecond = 0]) => {
  const rate = perSecond / 1000;
  let tokens = capacity;
  if (entry) tokens = Math.min(capacity, entry.value.tokens + Math.max(0, now - entry.value.at) * rate);
  const allowed = tokens >= cost;
  let write;
  if (allowed && !peek) {
    tokens -= cost;
    write = { tokens, at: now };
  }
  const resetAfter = Math.ceil((capacity - tokens) / rate);
  const retryAfter = allowed ? 0 : Math.ceil((cost - tokens) / rate);
  const kept = write ?? entry?.value;
  return {
    reply: reply(allowed, Math.floor(tokens), resetAfter, retryAfter, now),
    writes: [!peek && kept ? { value: kept, ttlMs: resetAfter + 1 } : undefined],
  };
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
  return {
    algorithm: 'token-bucket',
    name: policyName(o.name, 'token-bucket'),
    limit: capacity,
    windowMs,
    script,
    keySuffix: 'tb',
    args: (cost, mode) => [cost, mode === 'peek' ? 1 : 0, capacity, refillPerSecond],
  };
}
