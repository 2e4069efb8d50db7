import { parseDuration, type Duration } from '../core/duration.js';
import { InvalidOptionError } from '../core/errors.js';
import type { Policy } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import { defineAlgorithm, undecided, type Decided } from '../engine/algorithm.js';
import { deleteCell, setCell } from '../engine/script.js';
import { WINDOW_PEER_NAMES } from '../core/peer-names.js';
import { windowPolicy } from './policy.js';

export interface SlidingWindowOptions {
  /** Requests admitted per window, estimated over a window that slides. */
  limit: number;
  /** The window: ms or a duration string ('1s', '1m'). */
  window: Duration;
  /** The policy's name in RateLimit headers (default: the quota, e.g. '5-per-1s'). */
  name?: string;
  /** What it counts (default 'requests'): the unit of a call's per-unit cost, e.g. { cost: { tokens: 1200 } } with counts: 'tokens'. */
  counts?: string;
}

interface Counters {
  /** Start of the window `current` counts (ms, aligned to the window). */
  start: number;
  previous: number;
  current: number;
}

const MIN_WINDOW_MS = 10;

const LUA = `
-- slidingWindow (ALG.sw): the sliding window counter (Cloudflare, 2017), an estimate in O(1).
--   KEY  a hash: s (start of the current window, ms), p (previous window's count), c (current count)
--   p    limit, window ms
-- The count over the last window is estimated as previous * (window - elapsed) / window + current.
-- Comparisons are made multiplied by the window, so they stay in integers and exact. A denied
-- request learns when the estimate will have dropped enough for its cost, in this window or the
-- next.
ALG.sw = {}
-- The counters, and whether they are this window's. A start that is missing or names another
-- window is a fresh window. Counters of a window it names that sluice did not write (junk, see
-- whole()), or a key of another type, read as a fresh window too: admit writes s, p and c over a
-- hash (HSET), and a key of another type, which HSET refuses, is deleted unless peeking.
local function sw_counters(key, now, window, peek)
  local start = now - now % window
  local s = redis.pcall('HMGET', key, 's', 'p', 'c') if type(s) == 'table' and refused(s) then error(s) end
  local stored = tonumber(s[1])
  if stored == start then
    local previous, current = whole(s[2]), whole(s[3])
    if previous and current then return start, previous, current, true end
  elseif stored == start - window then
    local previous = whole(s[3])
    if previous then return start, previous, 0, false end
  elseif not s.err then
    return start, 0, 0, false
  end
  if s.err and not peek then redis.call('DEL', key) end
  return start, 0, 0, false
end
-- How long the counters still matter: the current window's count until the next window ends, the
-- previous window's until this one ends.
local function sw_resetAfter(now, window, current, previous)
  if current > 0 then return 2 * window - now % window end
  if previous > 0 then return window - now % window end
  return 0
end
function ALG.sw.decide(key, cost, now, p, peek, state)
  local limit, window = p[1], p[2]
  local start, previous, current, same = sw_counters(key, now, window, peek)
  local elapsed = now - start
  local weighted = previous * (window - elapsed) + current * window
  local allowed = weighted + cost * window <= limit * window
  local reset, retry = sw_resetAfter(now, window, current, previous), 0
  if not allowed then
    if current + cost > limit then
      retry = start + window - now + math.max(0, ceil(window * (current - limit + cost) / current))
    else
      retry = ceil(window * (previous - limit + cost + current) / previous) - elapsed
    end
  end
  state.previous, state.current, state.same, state.weighted, state.reset = previous, current, same, weighted, reset
  return allowed, floor((limit * window - weighted) / window), reset, retry
end
function ALG.sw.admit(key, cost, now, p, state)
  local limit, window, previous = p[1], p[2], state.previous
  if state.same then
    redis.call('HINCRBY', key, 'c', state.costText)
  else
    redis.call('HSET', key, 's', digits(now - now % window), 'p', digits(previous), 'c', state.costText)
  end
  local reset = sw_resetAfter(now, window, state.current + cost, previous)
  redis.call('PEXPIRE', key, digits(reset + 1))
  return floor((limit * window - state.weighted - cost * window) / window), reset, 0
end
function ALG.sw.keep(key, cost, now, p, state)
  if state.reset > 0 then redis.call('PEXPIRE', key, digits(state.reset + 1)) else redis.call('DEL', key) end
end
-- Gives back to the count of the window the units were charged in: this one's, or the previous
-- one's, which still weighs; a window before that weighs nothing, and its units are not this one's.
function ALG.sw.refund(key, cost, now, p, at)
  local window = p[2]
  local start, previous, current, same = sw_counters(key, now, window, false)
  local charged = at > 0 and at - at % window or start
  if charged == start then
    if not same or current == 0 then return false end
    current = current > cost and current - cost or 0
    redis.call('HSET', key, 'c', digits(current))
  elseif charged == start - window and previous > 0 then
    previous = previous > cost and previous - cost or 0
    -- Stored as this window's counters (s is start), the previous count is p; as the last window's, c.
    redis.call('HSET', key, same and 'p' or 'c', digits(previous))
  else
    return false
  end
  -- Counters that lost their TTL (PERSIST) get it back: for as long as they matter.
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, digits(sw_resetAfter(now, window, current, previous) + 1)) end
  return true
end
`;

/** What decide read: the counters as of this window, and whether the stored ones are this window's. */
interface SlidingWindowState extends Decided, Counters {
  same: boolean;
  weighted: number;
}

/** Reads the stored counters as of the window of `now` into `into`. */
function readCounters(now: number, stored: Counters | undefined, window: number, into: Counters & { same: boolean }) {
  const start = now - (now % window);
  into.start = start;
  into.same = stored?.start === start;
  into.previous = into.same ? (stored as Counters).previous : stored?.start === start - window ? stored.current : 0;
  into.current = into.same ? (stored as Counters).current : 0;
}

/** How long the counters still matter, with `current` counted in this window. */
function resetAfter(now: number, window: number, { start, previous }: Counters, current: number): number {
  return current > 0 ? start + 2 * window - now : previous > 0 ? start + window - now : 0;
}

const algorithm = defineAlgorithm<Counters, SlidingWindowState>({
  id: 'sw',
  stableDenials: true,
  lua: LUA,
  newState: () => ({ ...undecided(), start: 0, previous: 0, current: 0, same: false, weighted: 0 }),
  decide(now, cell, cost, p, _peek, state) {
    const limit = p[0] ?? 0;
    const window = p[1] ?? 1;
    readCounters(now, cell.value, window, state);
    const { start, previous, current } = state;
    const elapsed = now - start;
    const weighted = previous * (window - elapsed) + current * window;
    state.weighted = weighted;
    state.allowed = weighted + cost * window <= limit * window;
    state.retryAfter = 0;
    if (!state.allowed) {
      state.retryAfter =
        current + cost > limit
          ? start + window - now + Math.max(0, Math.ceil((window * (current - limit + cost)) / current))
          : Math.ceil((window * (previous - limit + cost + current)) / previous) - elapsed;
    }
    state.remaining = Math.floor((limit * window - weighted) / window);
    state.resetAfter = resetAfter(now, window, state, current);
  },
  admit(now, cell, cost, p, state) {
    const limit = p[0] ?? 0;
    const window = p[1] ?? 1;
    const after = resetAfter(now, window, state, state.current + cost);
    // The stored counters are changed in place: a new object per request was the twin's hot spot.
    const value = cell.value ?? { start: 0, previous: 0, current: 0 };
    value.start = state.start;
    value.previous = state.previous;
    value.current = state.current + cost;
    setCell(cell, value, after + 1);
    state.remaining = Math.floor((limit * window - state.weighted - cost * window) / window);
    state.resetAfter = after;
    state.extra = 0;
  },
  keep(_now, cell, _cost, _p, state) {
    if (!cell.held) return;
    // keep follows decide alone: resetAfter is still decide's.
    if (state.resetAfter > 0) setCell(cell, cell.value, state.resetAfter + 1);
    else deleteCell(cell);
  },
  refund(now, cell, cost, p, chargedAt) {
    const window = p[1] ?? 1;
    const c = { start: 0, previous: 0, current: 0, same: false };
    readCounters(now, cell.value, window, c);
    const charged = chargedAt > 0 ? chargedAt - (chargedAt % window) : c.start;
    const stored = cell.value as Counters;
    if (!cell.held) return false;
    // As in Lua: the count of the window the units were charged in, this one's or the previous one's.
    if (charged === c.start && c.same && c.current > 0) stored.current = Math.max(0, c.current - cost);
    else if (charged === c.start - window && c.previous > 0) {
      if (c.same) stored.previous = Math.max(0, c.previous - cost);
      else stored.current = Math.max(0, c.previous - cost);
    } else return false;
    setCell(cell, stored, cell.ttlMs);
    return true;
  },
});

/**
 * The sliding window counter: two counters per key, the previous window weighted by how much of
 * it still overlaps the sliding window. O(1) memory, no 2x burst at the edge; an estimate (see
 * docs/algorithms.md for its measured error against the exact sliding log).
 */
export function slidingWindow(options: SlidingWindowOptions): Policy {
  const o = optionsObject('slidingWindow', options, ['limit', 'window', 'name', 'counts'], WINDOW_PEER_NAMES);
  const windowMs = parseDuration('window', o.window, MIN_WINDOW_MS);
  const limit = positiveInteger('limit', o.limit);
  // The weighted count is kept in request-ms, up to three times limit * window (previous, current
  // and the cost, each at most the limit): exact only below 2^53.
  const mostExact = Math.floor(Number.MAX_SAFE_INTEGER / (3 * windowMs));
  if (limit > mostExact) {
    throw new InvalidOptionError(
      'limit',
      limit,
      `at most ${mostExact} for a window of ${windowMs} ms, so that the weighted count (three times limit * window, in request-ms) stays exact below 2^53`,
    );
  }
  return windowPolicy('sliding-window', algorithm, o, limit, windowMs);
}
