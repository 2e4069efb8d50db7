import { MAX_DURATION_MS, parseDuration, type Duration } from '../core/duration.js';
import type { Policy } from '../core/types.js';
import { optionsObject, policyName, positiveInteger, REQUESTS } from '../core/validate.js';
import { defineAlgorithm, definePolicy, undecided, type Decided } from '../engine/algorithm.js';
import { deleteCell, setCell, type Cell } from '../engine/script.js';
import { sortedSetReaderLua } from './sorted-set-reader.js';

export interface ConcurrencyOptions {
  /** Requests in progress at once, per key. */
  limit: number;
  /** How long a lease holds its slot unless released or extended: a crashed holder frees it then. */
  leaseMs: Duration;
  /** The policy's name in RateLimit headers (default: the limit, e.g. '5-concurrent'). */
  name?: string;
}

/** Held leases: slot id -> when it expires (ms). */
type Leases = ReadonlyMap<number, number>;

const LUA = `
-- concurrency (ALG.cc): at most limit requests in progress per key, each holding a lease.
--   KEY  a sorted set: one member per held slot (an integer id), scored by when its lease expires
--   p    limit, lease ms
-- Expired leases are dropped before counting, so a holder that crashed never leaks its slot for
-- longer than its lease. A lease of cost n holds the n consecutive ids from its first one; the
-- first id is returned (the reply's extra field) to release or extend it. Ids start at now * 1000
-- and skip any in use, so they are unique within the key. No lease expires further ahead than the
-- longest lease or extension (366 days): a set whose last one does is junk (see cc_live).
ALG.cc = {}
${sortedSetReaderLua('cc')}
-- The live leases (pruned unless peeking), and when the last one expires.
local function cc_leases(key, now, peek)
  -- Only ever an argument: formatted once, not by each redis.call (see digits).
  local expired = digits(now)
  return expired, cc_live(key, expired, now + ${MAX_DURATION_MS}, peek)
end
function ALG.cc.decide(key, cost, now, p, peek, state)
  local limit = p[1]
  local expired, count, lastAt = cc_leases(key, now, peek)
  local reset, retry = 0, 0
  if count > 0 then reset = lastAt - now end
  local allowed = count + cost <= limit
  if not allowed then
    local freed = redis.call('ZRANGEBYSCORE', key, '(' .. expired, '+inf', 'WITHSCORES', 'LIMIT', digits(count + cost - limit - 1), '1')
    retry = freed[2] - now
  end
  state.count, state.reset = count, reset
  return allowed, limit - count, reset, retry
end
function ALG.cc.admit(key, cost, now, p, state)
  local leaseMs = p[2]
  local id = now * 1000
  local free = 0
  while free < cost do
    if redis.call('ZSCORE', key, digits(id + free)) then
      id, free = id + free + 1, 0
    else
      free = free + 1
    end
  end
  local expires = digits(now + leaseMs)
  for i = 0, cost - 1 do redis.call('ZADD', key, expires, digits(id + i)) end
  local reset = state.reset > leaseMs and state.reset or leaseMs
  redis.call('PEXPIRE', key, digits(reset + 1))
  return p[1] - state.count - cost, reset, id
end
function ALG.cc.keep(key, cost, now, p, state)
  if state.count > 0 then redis.call('PEXPIRE', key, digits(state.reset + 1)) end
end
function ALG.cc.refund(key, cost, now, p, at)
  return false
end
-- The key's TTL, from its last lease: for a release or an extend, which may find the key without
-- one (PERSIST).
local function cc_expire(key, now)
  local _, count, lastAt = cc_leases(key, now, false)
  if count > 0 then redis.call('PEXPIRE', key, digits(lastAt - now + 1)) end
end
function ALG.cc.release(key, cost, now, p, id)
  local released = false
  for i = 0, cost - 1 do
    -- Only a lease still running is held: one that expired (not pruned yet) is not released, nor is
    -- one in a key of another type (its error reply is no time).
    local member = digits(id + i)
    local expires = redis.pcall('ZSCORE', key, member) if type(expires) == 'table' and refused(expires) then error(expires) end
    if tonumber(expires) and expires + 0 > now then
      redis.call('ZREM', key, member)
      released = true
    end
  end
  -- A release only frees slots, so a TTL the key has still covers its leases.
  if released and redis.call('PTTL', key) == -1 then cc_expire(key, now) end
  return released
end
function ALG.cc.extend(key, cost, now, p, id, ms)
  local held = false
  for i = 0, cost - 1 do
    local member = digits(id + i)
    local expires = redis.pcall('ZSCORE', key, member) if type(expires) == 'table' and refused(expires) then error(expires) end
    expires = tonumber(expires)
    if expires and expires > now then
      redis.call('ZADD', key, 'XX', digits(now + ms), member)
      held = true
    end
  end
  if held then cc_expire(key, now) end
  return held
end
`;

/** The live leases in expiry order, as ZRANGE would list them (by score, then id). */
function live(leases: Leases | undefined, now: number): [number, number][] {
  return [...(leases ?? new Map<number, number>())]
    .filter(([, expires]) => expires > now)
    .sort((a, b) => a[1] - b[1] || a[0] - b[0]);
}

/** Writes the leases `held` with the TTL of the last one to expire, or deletes the key if none is held. */
function writeLeases(cell: Cell<Leases>, held: [number, number][], now: number): void {
  const last = held.at(-1);
  if (last) setCell(cell, new Map(held), last[1] - now + 1);
  else deleteCell(cell);
}

/** What decide read: the live leases in expiry order. */
interface ConcurrencyState extends Decided {
  held: [number, number][];
}

const algorithm = defineAlgorithm<Leases, ConcurrencyState>({
  id: 'cc',
  leases: true,
  lua: LUA,
  newState: () => ({ ...undecided(), held: [] }),
  decide(now, cell, cost, p, _peek, state) {
    const limit = p[0] ?? 0;
    const held = live(cell.value, now);
    const count = held.length;
    const freed = held[count + cost - limit - 1];
    state.held = held;
    state.allowed = count + cost <= limit;
    state.remaining = limit - count;
    state.resetAfter = count > 0 ? (held.at(-1)?.[1] ?? now) - now : 0;
    state.retryAfter = !state.allowed && freed ? freed[1] - now : 0;
  },
  admit(now, cell, cost, p, state) {
    const leaseMs = p[1] ?? 1;
    const { held } = state;
    const inUse = new Set(held.map(([id]) => id));
    let id = now * 1000;
    for (let free = 0; free < cost;) {
      if (inUse.has(id + free)) {
        id += free + 1;
        free = 0;
      } else free++;
    }
    const taken: [number, number][] = Array.from({ length: cost }, (_, i) => [id + i, now + leaseMs]);
    const reset = Math.max(state.resetAfter, leaseMs);
    setCell(cell, new Map([...held, ...taken]), reset + 1);
    state.remaining = (p[0] ?? 0) - held.length - cost;
    state.resetAfter = reset;
    state.extra = id;
  },
  keep(now, cell, _cost, _p, state) {
    if (cell.held) writeLeases(cell, state.held, now);
  },
  refund: () => false,
  release(now, cell, cost, _p, id) {
    if (!cell.held) return false;
    const leases = cell.value as Leases;
    const held = [...leases].filter(([member, expires]) => member < id || member >= id + cost || expires <= now);
    if (held.length === leases.size) return false;
    if (held.length > 0) setCell(cell, new Map(held), cell.ttlMs);
    else deleteCell(cell);
    return true;
  },
  extend(now, cell, cost, _p, id, ms) {
    if (!cell.held) return false;
    let extended = false;
    const held = [...(cell.value as Leases)].map(([member, expires]): [number, number] => {
      if (member < id || member >= id + cost || expires <= now) return [member, expires];
      extended = true;
      return [member, now + ms];
    });
    if (!extended) return false;
    const last = live(new Map(held), now).at(-1);
    setCell(cell, new Map(held), (last?.[1] ?? now) - now + 1);
    return true;
  },
});

/** At most `limit` requests in progress per key; take a slot with `acquire()`, give it back with `release()`. */
export function concurrency(options: ConcurrencyOptions): Policy {
  const o = optionsObject('concurrency', options, ['limit', 'leaseMs', 'name'], {
    max: 'use "limit"',
    timeout: 'use "leaseMs": how long a slot is held unless released',
  });
  const limit = positiveInteger('limit', o.limit);
  const leaseMs = parseDuration('leaseMs', o.leaseMs);
  return definePolicy(
    {
      algorithm: 'concurrency',
      name: policyName(o.name, `${limit}-concurrent`),
      counts: REQUESTS,
      limit,
      windowMs: leaseMs,
      maxCost: limit,
    },
    algorithm,
    [limit, leaseMs],
  );
}
