import { parseDuration, type Duration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, positiveInteger } from '../core/validate.js';
import { defineScript, reply } from './script.js';

export interface SlidingLogOptions {
  /** Requests admitted in any window of this length. */
  limit: number;
  /** The window: ms or a duration string ('1s', '1m'). */
  window: Duration;
  /** The policy's name in RateLimit headers (default 'sliding-log'). */
  name?: string;
}

// One sorted-set member per admitted unit: past this, a single client's key would hold megabytes.
// Larger limits want a constant-memory algorithm instead.
export const SLIDING_LOG_MAX_LIMIT = 10_000;

/** A log entry: when it was admitted (score) and its id (member), unique within the key. */
type Member = readonly [score: number, id: number];

/*
 * KEYS[1]  a sorted set: one member per admitted unit, scored by its admission time in ms
 * ARGV     cost, peek, limit, window ms
 * reply    allowed, remaining, resetAfterMs, retryAfterMs, now
 *
 * Member ids are integers, now * 1000 or one more than the newest id, whichever is larger: unique
 * even when thousands arrive in one ms, and of equal length, so their lexical order is their
 * numeric order and ZRANGE -1 -1 finds the newest. A member is never scored before the newest one,
 * so a server clock stepping back cannot reorder the log.
 */
const LUA = `
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local cutoff = now - window
if not peek then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cutoff) end
local count = redis.call('ZCOUNT', KEYS[1], '(' .. cutoff, '+inf')
local allowed = count + cost <= limit
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local newestAt = nil
if count > 0 then newestAt = tonumber(newest[2]) end
if allowed and not peek then
  local id = now * 1000
  newestAt = now
  if newest[1] then
    id = math.max(id, tonumber(newest[1]) + 1)
    newestAt = math.max(now, tonumber(newest[2]))
  end
  for i = 0, cost - 1 do
    redis.call('ZADD', KEYS[1], newestAt, string.format('%d', id + i))
  end
  count = count + cost
end
local resetAfter = 0
if newestAt then resetAfter = newestAt + window - now end
local retryAfter = 0
if not allowed then
  local leaving = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
  retryAfter = tonumber(leaving[2]) + window - now
end
if not peek and count > 0 then redis.call('PEXPIRE', KEYS[1], resetAfter + 1) end
return {allowed and 1 or 0, math.max(0, limit - count), resetAfter, retryAfter, now}
`;

const script = defineScript<Member[]>('sliding-log', LUA, (now, [entry], [cost = 1, peek = 0, limit = 0, window = 1]) => {
  const cutoff = now - window;
  const all = entry?.value ?? [];
  const inWindow = all.filter(([score]) => score > cutoff);
  let count = inWindow.length;
  const allowed = count + cost <= limit;
  const newest = all.at(-1);
  let newestAt = count > 0 ? newest?.[0] : undefined;
  let log = peek ? all : inWindow;
  if (allowed && !peek) {
    newestAt = Math.max(now, newest?.[0] ?? now);
    const firstId = Math.max(now * 1000, newest ? newest[1] + 1 : 0);
    log = [...inWindow];
    for (let i = 0; i < cost; i++) log.push([newestAt, firstId + i]);
    count += cost;
  }
  const resetAfter = newestAt === undefined ? 0 : newestAt + window - now;
  const leaving = allowed ? undefined : inWindow[count + cost - limit - 1];
  const retryAfter = leaving ? leaving[0] + window - now : 0;
  let write;
  if (!peek) write = count > 0 ? { value: log, ttlMs: resetAfter + 1 } : null;
  return { reply: reply(allowed, limit - count, resetAfter, retryAfter, now), writes: [write] };
});

/** One entry per admitted request: exact over any window; memory grows with the limit. */
export function slidingLog(options: SlidingLogOptions): Policy {
  const o = optionsObject('slidingLog', options);
  const limit = positiveInteger('limit', o.limit, SLIDING_LOG_MAX_LIMIT);
  const windowMs = parseDuration('window', o.window);
  return {
    algorithm: 'sliding-log',
    name: policyName(o.name, 'sliding-log'),
    limit,
    windowMs,
    script,
    keySuffix: 'sl',
    args: (cost, mode) => [cost, mode === 'peek' ? 1 : 0, limit, windowMs],
  };
}
