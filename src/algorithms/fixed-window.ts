import { parseDuration, type Duration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, positiveInteger } from '../core/validate.js';
import { defineScript, reply } from './script.js';

export interface FixedWindowOptions {
  /** Requests admitted per window. */
  limit: number;
  /** The window: ms or a duration string ('1s', '1m'). Windows are aligned to the Redis server's clock. */
  window: Duration;
  /** The policy's name in RateLimit headers (default 'fixed-window'). */
  name?: string;
}

// Below this, Redis's millisecond expiry cannot tell one window's counter from the next one's.
const MIN_WINDOW_MS = 10;

/*
 * KEYS[1]  the counter of the current window (a string holding an integer)
 * ARGV     cost, peek, limit, window ms
 * reply    allowed, remaining, resetAfterMs, retryAfterMs, now
 *
 * The counter expires one ms after its window ends (PEXPIRE is relative to a clock that may lag
 * TIME by a ms, so expiring exactly at the end could drop it early). A counter whose TTL is not
 * about the time left in this window belongs to another window (it outlived its end by that ms,
 * or the window length changed): it counts as 0 and is overwritten. A counter with no TTL at
 * all (PERSIST, or the crash bug of a hand-written limiter) keeps its count, which never admits
 * too much, and gets its TTL back on the next call that counts. A new counter is written with its
 * TTL in one SET, an existing one rewritten with SET KEEPTTL (not INCRBY, which leaves Redis
 * holding about 2.5 more bytes per key): as few Redis calls as the decision needs.
 */
const LUA = `
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local resetAfter = window - now % window
local pttl = redis.call('PTTL', KEYS[1])
local stale = pttl >= 0 and math.abs(pttl - resetAfter) > window / 2
local count = 0
if pttl ~= -2 and not stale then count = tonumber(redis.call('GET', KEYS[1])) end
local allowed = count + cost <= limit
if not peek then
  if allowed then
    if pttl == -2 or stale then
      redis.call('SET', KEYS[1], cost, 'PX', resetAfter + 1)
    else
      redis.call('SET', KEYS[1], string.format('%d', count + cost), 'KEEPTTL')
    end
    count = count + cost
  end
  if pttl == -1 then redis.call('PEXPIRE', KEYS[1], resetAfter + 1) end
end
local retryAfter = 0
if not allowed then retryAfter = resetAfter end
if count == 0 then resetAfter = 0 end
return {allowed and 1 or 0, math.max(0, limit - count), resetAfter, retryAfter, now}
`;

const script = defineScript<number>('fixed-window', LUA, (now, [entry], [cost = 1, peek = 0, limit = 0, window = 1]) => {
  const resetAfter = window - (now % window);
  const stale = entry !== undefined && Math.abs(entry.ttlMs - resetAfter) > window / 2;
  let count = entry && !stale ? entry.value : 0;
  const allowed = count + cost <= limit;
  let write;
  if (!peek && allowed) {
    count += cost;
    write = { value: count, ttlMs: entry && !stale ? entry.ttlMs : resetAfter + 1 };
  }
  return {
    reply: reply(allowed, limit - count, count === 0 ? 0 : resetAfter, allowed ? 0 : resetAfter, now),
    writes: [write],
  };
});

/** A counter per window. Cheap and exact within a window; up to 2x the limit across a window's edge. */
export function fixedWindow(options: FixedWindowOptions): Policy {
  const o = optionsObject('fixedWindow', options);
  const limit = positiveInteger('limit', o.limit);
  const windowMs = parseDuration('window', o.window, MIN_WINDOW_MS);
  return {
    algorithm: 'fixed-window',
    name: policyName(o.name, 'fixed-window'),
    limit,
    windowMs,
    script,
    keySuffix: 'fw',
    args: (cost, mode) => [cost, mode === 'peek' ? 1 : 0, limit, windowMs],
  };
}
