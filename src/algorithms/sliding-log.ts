import { parseDuration, type Duration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { optionsObject, positiveInteger } from '../core/validate.js';
import { defineAlgorithm, undecided, type Decided } from '../engine/algorithm.js';
import { deleteCell, setCell, type Cell } from '../engine/script.js';
import { WINDOW_PEER_NAMES } from '../core/peer-names.js';
import { windowPolicy } from './policy.js';
import { sortedSetReaderLua } from './sorted-set-reader.js';

export interface SlidingLogOptions {
  /** Requests admitted in any window of this length. */
  limit: number;
  /** The window: ms or a duration string ('1s', '1m'). */
  window: Duration;
  /** The policy's name in RateLimit headers (default: the quota, e.g. '5-per-1s'). */
  name?: string;
  /** What it counts (default 'requests'): the unit of a call's per-unit cost, e.g. { cost: { tokens: 1200 } } with counts: 'tokens'. */
  counts?: string;
}

// One sorted-set member per admitted unit: past this, a single client's key would hold megabytes.
// Larger limits want a constant-memory algorithm instead.
export const SLIDING_LOG_MAX_LIMIT = 10_000;

/**
 * The twin's log: for each admitted unit, oldest first, when it was admitted (its score) and its id
 * (its member), unique within the key, one number after the other. Flat, so that a member costs
 * no object of its own (docs/performance.md, "In process").
 */
type Log = number[];

const LUA = `
-- slidingLog (ALG.sl): one sorted-set member per admitted unit, exact over any window.
--   KEY  a sorted set: one member per admitted unit, scored by its admission time in ms
--   p    limit, window ms
-- Member ids are integers, now * 1000 or one more than the newest id, whichever is larger: unique
-- even when thousands arrive in one ms, and of equal length, so their lexical order is their
-- numeric order and ZRANGE -1 -1 finds the newest. A member is never scored before the newest one,
-- so a server clock stepping back cannot reorder the log, and leaves the newest at most a window
-- ahead: a log further ahead is junk (see sl_live).
ALG.sl = {}
${sortedSetReaderLua('sl')}
function ALG.sl.decide(key, cost, now, p, peek, state)
  local limit, window = p[1], p[2]
  -- Only ever an argument: formatted once, not by each redis.call (see digits).
  local cutoff = digits(now - window)
  local count, newestAt, newestId = sl_live(key, cutoff, now + window, peek)
  local reset, retry = 0, 0
  if count > 0 then reset = newestAt + window - now end
  local allowed = count + cost <= limit
  if not allowed then
    local leaving = redis.call('ZRANGEBYSCORE', key, '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', digits(count + cost - limit - 1), '1')
    retry = leaving[2] + window - now
  end
  state.count, state.newestId, state.newestAt, state.reset = count, newestId, newestAt, reset
  return allowed, limit - count, reset, retry
end
function ALG.sl.admit(key, cost, now, p, state)
  local newestAt = state.newestAt
  local id, at = now * 1000, now
  if newestAt then
    local after = state.newestId + 1
    if after > id then id = after end
    if newestAt > at then at = newestAt end
  end
  local score = digits(at)
  for i = 0, cost - 1 do redis.call('ZADD', key, score, digits(id + i)) end
  local reset = at + p[2] - now
  redis.call('PEXPIRE', key, digits(reset + 1))
  return p[1] - state.count - cost, reset, 0
end
function ALG.sl.keep(key, cost, now, p, state)
  if state.count > 0 then redis.call('PEXPIRE', key, digits(state.reset + 1)) end
end
function ALG.sl.refund(key, cost, now, p, at)
  local cutoff, latest = digits(now - p[2]), now + p[2]
  -- Pruned first: an entry that has left the window counts no more, and giving it back would give nothing.
  if sl_live(key, cutoff, latest, false) == 0 then return false end
  if at == 0 then
    redis.call('ZPOPMAX', key, digits(cost))
  else
    -- By member: the newest of those scored at, the charge's own ms (members rank as their ids).
    local upTo = redis.call('ZCOUNT', key, '-inf', digits(at))
    local from = math.max(upTo - redis.call('ZCOUNT', key, digits(at), digits(at)), upTo - cost)
    if from == upTo then return false end
    local members = redis.call('ZRANGE', key, digits(from), digits(upTo - 1))
    -- In parts: Lua unpacks at most 8,000 values into one call.
    for i = 1, #members, 1000 do redis.call('ZREM', key, unpack(members, i, math.min(i + 999, #members))) end
  end
  -- A log that lost its TTL (PERSIST) gets it back: until its newest entry leaves the window.
  if redis.call('PTTL', key) == -1 then
    local _, newestAt = sl_live(key, cutoff, latest, false)
    if newestAt then redis.call('PEXPIRE', key, digits(newestAt + p[2] - now + 1)) end
  end
  return true
end
`;

/**
 * The index (counted in members) of the first member scored after `cutoff`: scores never decrease
 * along a log. Members leave the window from the front, a few at a time, so the search gallops
 * from the front (members 0, 2, 6, 14, ...) before it bisects: it reads O(log) members of those
 * that left, not of the whole log, whose reads at random places were most of a decision's time.
 */
function firstAfter(log: Log, cutoff: number): number {
  const members = log.length / 2;
  // Every member before `low` has left; the one at `low + step - 1`, if any, is the next to look at.
  let low = 0;
  let step = 1;
  while (low + step - 1 < members && (log[2 * (low + step - 1)] as number) <= cutoff) {
    low += step;
    step *= 2;
  }
  let high = Math.min(low + step - 1, members);
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((log[2 * middle] as number) > cutoff) high = middle;
    else low = middle + 1;
  }
  return low;
}

/** What decide read: where the window's members start, how many there are, and the newest one. */
interface SlidingLogState extends Decided {
  /** The first member in the window, counted in members: those before it have left the window. */
  start: number;
  count: number;
  newestAt: number;
  newestId: number;
}

/**
 * Whether the log's newest member lies further ahead than a window, which only a clock stepping
 * back makes: junk to sl_live, read as empty and deleted.
 */
const aheadOfTime = (log: Log, now: number, window: number): boolean => (log[log.length - 2] as number) > now + window;

// A missing key's log, only ever read: admit starts a new one.
const NO_LOG: Log = [];

/**
 * The stored log without the members that have left the window: admit and keep write the stored
 * log itself, pruned and extended in place (decide and peek only read it), since a copy per call
 * would cost time in proportion to the limit.
 */
function pruned(cell: Cell<Log>, state: SlidingLogState): Log {
  const log = cell.value ?? [];
  if (state.start > 0) log.splice(0, 2 * state.start);
  return log;
}

const algorithm = defineAlgorithm<Log, SlidingLogState>({
  id: 'sl',
  stableDenials: true,
  lua: LUA,
  newState: () => ({ ...undecided(), start: 0, count: 0, newestAt: 0, newestId: 0 }),
  decide(now, cell, cost, p, _peek, state) {
    const limit = p[0] ?? 0;
    const window = p[1] ?? 1;
    const log = cell.value ?? NO_LOG;
    // The members still in the window are the log's tail, from `start`; none in a junk log.
    const start = aheadOfTime(log, now, window) ? log.length / 2 : firstAfter(log, now - window);
    const count = log.length / 2 - start;
    // As in Lua: after pruning, the newest member is the newest of the window.
    state.start = start;
    state.count = count;
    state.newestAt = count > 0 ? (log[log.length - 2] as number) : now;
    state.newestId = count > 0 ? (log[log.length - 1] as number) : 0;
    state.allowed = count + cost <= limit;
    state.remaining = limit - count;
    state.resetAfter = count > 0 ? state.newestAt + window - now : 0;
    state.retryAfter = state.allowed ? 0 : (log[2 * (start + count + cost - limit - 1)] as number) + window - now;
  },
  admit(now, cell, cost, p, state) {
    const at = Math.max(now, state.newestAt);
    const firstId = Math.max(now * 1000, state.count > 0 ? state.newestId + 1 : 0);
    const log = pruned(cell, state);
    for (let i = 0; i < cost; i++) log.push(at, firstId + i);
    const reset = at + (p[1] ?? 1) - now;
    setCell(cell, log, reset + 1);
    state.remaining = (p[0] ?? 0) - state.count - cost;
    state.resetAfter = reset;
    state.extra = 0;
  },
  keep(_now, cell, _cost, _p, state) {
    // keep follows decide alone: resetAfter is still decide's.
    if (state.count > 0) setCell(cell, pruned(cell, state), state.resetAfter + 1);
    else deleteCell(cell);
  },
  refund(now, cell, cost, p, chargedAt) {
    if (!cell.held) return false;
    const log = cell.value as Log;
    // As in Lua: pruned first, so an entry that has left the window is not given back; a junk log
    // is deleted.
    const window = p[1] ?? 1;
    const start = 2 * firstAfter(log, now - window);
    if (start === log.length || aheadOfTime(log, now, window)) {
      deleteCell(cell);
      return false;
    }
    if (chargedAt > 0) {
      // As in Lua: by member, the newest of those scored at the charge's ms, in the pruned log.
      const live = log.slice(start);
      const upTo = 2 * firstAfter(live, chargedAt);
      const from = Math.max(2 * firstAfter(live, chargedAt - 1), upTo - 2 * cost);
      if (from < upTo) live.splice(from, upTo - from);
      if (live.length > 0) setCell(cell, live, cell.ttlMs);
      else deleteCell(cell);
      return from < upTo;
    }
    const kept = log.slice(start, Math.max(start, log.length - 2 * cost));
    if (kept.length > 0) setCell(cell, kept, cell.ttlMs);
    else deleteCell(cell);
    return true;
  },
});

/** One entry per admitted request: exact over any window; memory grows with the limit. */
export function slidingLog(options: SlidingLogOptions): Policy {
  const o = optionsObject('slidingLog', options, ['limit', 'window', 'name', 'counts'], WINDOW_PEER_NAMES);
  const limit = positiveInteger('limit', o.limit, SLIDING_LOG_MAX_LIMIT);
  const windowMs = parseDuration('window', o.window);
  return windowPolicy('sliding-log', algorithm, o, limit, windowMs);
}
