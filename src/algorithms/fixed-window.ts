import { parseDuration, type Duration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import { defineAlgorithm, undecided, type Decided } from '../engine/algorithm.js';
import { setCell, type Cell } from '../engine/script.js';
import { WINDOW_PEER_NAMES } from '../core/peer-names.js';
import { windowPolicy } from './policy.js';

export interface FixedWindowOptions {
  /** Requests admitted per window. */
  limit: number;
  /** The window: ms or a duration string ('1s', '1m'). Windows are aligned to the Redis server's clock. */
  window: Duration;
  /** The policy's name in RateLimit headers (default: the quota, e.g. '5-per-1s'). */
  name?: string;
  /** What it counts (default 'requests'): the unit of a call's per-unit cost, e.g. { cost: { tokens: 1200 } } with counts: 'tokens'. */
  counts?: string;
}

// Below this, Redis's millisecond expiry cannot tell one window's counter from the next one's.
const MIN_WINDOW_MS = 10;

const LUA = `
-- fixedWindow (ALG.fw): a counter per window, windows aligned to the server's clock.
--   KEY  the counter of the current window (a string holding an integer)
--   p    limit, window ms
-- The counter expires one ms after its window ends (PEXPIRE is relative to a clock that may lag
-- TIME by a ms, so expiring exactly at the end could drop it early). A counter whose TTL is not
-- about the time left in this window belongs to another window (it outlived its end by that ms,
-- or the window length changed): it counts as 0 and is overwritten. A counter with no TTL at
-- all (PERSIST, or the crash bug of a hand-written limiter) keeps its count, which never admits
-- too much, and gets its TTL back in the same script: every call reads the TTL, and any call that
-- finds none sets it. So no counter stays without a TTL once sluice touches it. An admitted
-- request writes one command: INCRBY on a counter that has its TTL (which INCRBY keeps), SET ... PX
-- on a new window's counter or one found without a TTL (count and TTL in one command).
ALG.fw = {}
-- The counter's PTTL, and its count if it belongs to this window (nil for a fresh window). A count
-- sluice did not write (junk, see whole(); a key of another type) reads as none too: the request is
-- counted from 0 by SET, which writes over it, TTL and all.
local function fw_current(key, now, window)
  local pttl = redis.call('PTTL', key)
  if pttl == -2 then return pttl, nil end
  if pttl >= 0 then
    local off = pttl - (window - now % window)
    if off > window / 2 or -off > window / 2 then return pttl, nil end
  end
  local count = redis.pcall('GET', key) if type(count) == 'table' and refused(count) then error(count) end
  return pttl, whole(count)
end
function ALG.fw.decide(key, cost, now, p, peek, state)
  local limit, window = p[1], p[2]
  local resetAfter = window - now % window
  local pttl, current = fw_current(key, now, window)
  local count = current or 0
  state.pttl, state.current = pttl, current
  local allowed = count + cost <= limit
  return allowed, limit - count, count > 0 and resetAfter or 0, allowed and 0 or resetAfter
end
-- A healthy counter is counted by INCRBY with the cost as ARGV gave it: SET with the new count
-- costs a formatted number more. INCRBY refuses a count that tonumber read but Redis does not
-- take for an integer (' 3', '3.0', written by hand): SET writes it over, as it would have anyway.
-- Otherwise one SET writes count and TTL together.
function ALG.fw.admit(key, cost, now, p, state)
  local limit, window, current = p[1], p[2], state.current
  local count, resetAfter = current or 0, window - now % window
  if current and state.pttl >= 0 then
    if type(redis.pcall('INCRBY', key, state.costText)) == 'table' then
      redis.call('SET', key, digits(count + cost), 'KEEPTTL')
    end
  else
    redis.call('SET', key, digits(count + cost), 'PX', digits(resetAfter + 1))
  end
  return limit - count - cost, resetAfter, 0
end
function ALG.fw.keep(key, cost, now, p, state)
  if state.pttl == -1 then redis.call('PEXPIRE', key, digits(p[2] - now % p[2] + 1)) end
end
function ALG.fw.refund(key, cost, now, p, at)
  -- Units charged in another window went with it: given to this one, they would admit past its limit.
  if at > 0 and at - at % p[2] ~= now - now % p[2] then return false end
  local pttl, count = fw_current(key, now, p[2])
  if not count or count == 0 then return false end
  if pttl >= 0 then
    redis.call('SET', key, digits(count > cost and count - cost or 0), 'KEEPTTL')
  else
    redis.call('SET', key, digits(count > cost and count - cost or 0), 'PX', digits(p[2] - now % p[2] + 1))
  end
  return true
end
`;

/** Whether the cell holds this window's counter (and not a fresh window's), `windowLeft` ms before its end. */
function current(cell: Cell<number>, window: number, windowLeft: number): boolean {
  return cell.held && Math.abs(cell.ttlMs - windowLeft) <= window / 2;
}

/** What decide read: this window's count (0 for a fresh window), whether the cell holds it, and the ms left in the window. */
interface FixedWindowState extends Decided {
  count: number;
  current: boolean;
  windowLeft: number;
}

const algorithm = defineAlgorithm<number, FixedWindowState>({
  id: 'fw',
  stableDenials: true,
  lua: LUA,
  newState: () => ({ ...undecided(), count: 0, current: false, windowLeft: 0 }),
  decide(now, cell, cost, p, _peek, state) {
    const limit = p[0] ?? 0;
    const window = p[1] ?? 1;
    const resetAfter = window - (now % window);
    const counted = current(cell, window, resetAfter);
    const count = counted ? (cell.value as number) : 0;
    state.count = count;
    state.current = counted;
    state.windowLeft = resetAfter;
    state.allowed = count + cost <= limit;
    state.remaining = limit - count;
    state.resetAfter = count > 0 ? resetAfter : 0;
    state.retryAfter = state.allowed ? 0 : resetAfter;
  },
  admit(_now, cell, cost, p, state) {
    setCell(cell, state.count + cost, state.current ? cell.ttlMs : state.windowLeft + 1);
    state.remaining = (p[0] ?? 0) - state.count - cost;
    state.resetAfter = state.windowLeft;
    state.extra = 0;
  },
  keep() {},
  refund(now, cell, cost, p, chargedAt) {
    const window = p[1] ?? 1;
    if (chargedAt > 0 && chargedAt - (chargedAt % window) !== now - (now % window)) return false;
    if (!current(cell, window, window - (now % window)) || cell.value === 0) return false;
    setCell(cell, Math.max(0, (cell.value as number) - cost), cell.ttlMs);
    return true;
  },
});

/** A counter per window. Cheap and exact within a window; up to 2x the limit across a window's edge. */
export function fixedWindow(options: FixedWindowOptions): Policy {
  const o = optionsObject('fixedWindow', options, ['limit', 'window', 'name', 'counts'], WINDOW_PEER_NAMES);
  const limit = positiveInteger('limit', o.limit);
  const windowMs = parseDuration('window', o.window, MIN_WINDOW_MS);
  return windowPolicy('fixed-window', algorithm, o, limit, windowMs);
}
