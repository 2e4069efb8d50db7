import { defineAlgorithm, undecided, type Algorithm, type Decided } from '../engine/algorithm.js';
import { deleteCell, setCell, type Cell } from '../engine/script.js';

// The header of both forms' Lua, after the algorithm's own.
const HEADER = `-- The state shared by gcra and tokenBucket (src/algorithms/gcra-and-token-bucket.ts): the instant at which
-- the key's state equals a fresh key's (GCRA's theoretical arrival time; the instant a bucket is
-- full again). Both are one algorithm in two parametrisations: each admitted unit pushes that
-- instant step further, and a request fits while the instant stays within size steps of now.
--   KEY  the instant, split in two: the key's absolute expiry (PXAT), that instant rounded up to
--        the ms, and its value, how far before the expiry the instant lies, in units
--        (0 <= value < perMs, so below 10,000 and stored by Redis as a shared integer, which costs
--        no memory)
--   p    step (units per admitted unit), size (units admitted at once from a fresh key),
--        perMs (units per ms)
-- ahead is how long until the key is fresh, in units: 0 for a missing key, and for a key whose
-- expiry has passed by TIME while Redis's expiry clock (which can lag TIME by a ms, and stands
-- still during a script) still keeps it, so both decide as a missing key does. Every sum is of
-- integers below 2^53, so decisions are exact, and retryAfter is the first ms at which the very
-- sum the next call computes fits. A key without a TTL (PERSIST by hand) has lost its instant: it
-- reads as a key that admits nothing until size steps from now, and gets its expiry back on the
-- next write (a denial's keep() included). A value that is not a remainder (a hand-written one, or
-- one an older sluice stored) reads as 0 when the key has an expiry: the expiry alone, rounded up,
-- never admits too much. Junk reads as a missing key, and a denial's keep() deletes it: a value
-- that is not a remainder on a key without an expiry (nothing of it is sluice's), a key of another
-- type, or an expiry further ahead than any policy's schedule reaches (2^53 units: gcra() and
-- tokenBucket() keep three bursts below it: a held one, one of debt, an asked one).`;

/**
 * How the Lua finds the key's expiry (`at`: ms, -1 for none; a missing or expired key returns 0),
 * its value and its remainder (`rem`, not one when >= perMs), and how it writes the instant
 * (`write`: the Lua defining `<id>_write`, see writes); `about` says, in Lua comments, which form
 * it is.
 */
interface ExpiryForm {
  readonly about: string;
  readonly read: string;
  readonly write: (id: string) => string;
}

/** What both forms' `<id>_write` do, in Lua comments. */
function writes(id: string): string {
  return `-- ${id}_write(key, now, ahead, perMs, before) writes the instant ahead and returns it rounded
-- up, in ms from now (the reply's reset); before (read by the form with PEXPIRETIME): how far ahead
-- the key was if it is there and holds nothing wrong (else nil or false).`;
}

const READ_VALUE = `  local value = redis.pcall('GET', key) if type(value) == 'table' and refused(value) then error(value) end
  local rem = whole(value)`;

const WITH_PEXPIRETIME: ExpiryForm = {
  about: `-- This form reads the expiry with PEXPIRETIME (Redis 7.0); a server without it runs the other.`,
  read: `  local at = redis.call('PEXPIRETIME', key)
  if at ~= -1 and at <= now then return 0 end
${READ_VALUE}`,
  write: (id) => `${writes(id)}
-- Moved by whole ms, the key keeps its remainder, so only its expiry is written, with PEXPIREAT
-- (bench/NOTES.md). Else the remainder is written too, formatted once per batch for a run of
-- equal ones (the last one written, and its text, kept).
local ${id}_rem, ${id}_remText
local function ${id}_write(key, now, ahead, perMs, before)
  local reset = ceil(ahead / perMs)
  if before and (ahead - before) % perMs == 0 then
    redis.call('PEXPIREAT', key, digits(now + reset))
  else
    local rem = reset * perMs - ahead
    if rem ~= ${id}_rem then ${id}_rem, ${id}_remText = rem, digits(rem) end
    redis.call('SET', key, ${id}_remText, 'PXAT', digits(now + reset))
  end
  return reset
end`,
};

const CYCLE_MS = 1e9;

const WITHOUT_PEXPIRETIME: ExpiryForm = {
  about: `-- This form is for a server without PEXPIRETIME (Redis 6.2), which reads the expiry as now + PTTL:
-- off by the ms that Redis's expiry clock and TIME disagree by. So the value also holds the
-- expiry's last nine digits: (10^9 + expiry mod 10^9) * perMs + the remainder, read back as the
-- expiry within half a cycle (about six days) of now + PTTL, so that it is exact again. It is not a
-- remainder for a server with PEXPIRETIME, which reads it as the expiry alone (after an upgrade:
-- never too much); a value that is not in this form is read as on such a server, from now + PTTL.
-- As the value holds the expiry, every write writes both.`,
  read: `  local at = redis.call('PTTL', key)
  if at == -2 then return 0 end
${READ_VALUE}
  if at ~= -1 then at = now + at end
  if rem and rem >= ${CYCLE_MS} * p[3] and rem < ${2 * CYCLE_MS} * p[3] then
    local cycled = floor(rem / p[3])
    rem = rem - cycled * p[3]
    if at ~= -1 then
      local off = (cycled - at) % ${CYCLE_MS}
      at = at + (off < ${CYCLE_MS / 2} and off or off - ${CYCLE_MS})
    end
  end
  if at ~= -1 and at <= now then return 0 end`,
  write: (id) => `${writes(id)}
local function ${id}_write(key, now, ahead, perMs)
  local reset = ceil(ahead / perMs)
  redis.call('SET', key, digits((${CYCLE_MS} + (now + reset) % ${CYCLE_MS}) * perMs + reset * perMs - ahead), 'PXAT', digits(now + reset))
  return reset
end`,
};

function lua(id: string, header: string, expiry: ExpiryForm): string {
  return `
${header.trim()}
--
${HEADER}
${expiry.about}
ALG.${id} = {}
-- How far ahead the key is, and what is wrong with it: nil, 'value' (not a remainder, read as 0),
-- 'lost' (its expiry) or 'junk'. A key that is there and holds nothing wrong is ahead by over 0.
local function ${id}_ahead(key, now, p)
${expiry.read}
  local damage
  if not rem or rem >= p[3] then
    if at == -1 or type(value) == 'table' then return 0, 'junk' end
    rem, damage = 0, 'value'
  elseif at == -1 then
    return p[1] * p[2], 'lost'
  end
  local ahead = (at - now) * p[3] - rem
  if ahead >= 2^53 then return 0, 'junk' end
  return ahead, damage
end
${expiry.write(id)}
function ALG.${id}.decide(key, cost, now, p, peek, state)
  local step, most, perMs = p[1], p[1] * p[2], p[3]
  local ahead, damage = ${id}_ahead(key, now, p)
  state.ahead, state.damage = ahead, damage
  local over = ahead + cost * step - most
  return over <= 0, floor((most - ahead) / step), ceil(ahead / perMs), over > 0 and ceil(over / perMs) or 0
end
function ALG.${id}.admit(key, cost, now, p, state)
  local ahead = state.ahead
  local after = ahead + cost * p[1]
  return floor((p[1] * p[2] - after) / p[1]), ${id}_write(key, now, after, p[3], not state.damage and ahead > 0 and ahead), 0
end
function ALG.${id}.keep(key, cost, now, p, state)
  if state.damage == 'lost' then
    ${id}_write(key, now, state.ahead, p[3])
  elseif state.damage == 'junk' then
    redis.call('DEL', key)
  end
end
function ALG.${id}.refund(key, cost, now, p, at)
  local ahead, damage = ${id}_ahead(key, now, p)
  -- Less what time has refilled since the charge: a full bucket may have lost as much.
  local back = cost * p[1]
  if at > 0 and now > at then back = back - (now - at) * p[3] end
  if ahead == 0 or back <= 0 then return false end
  local after = math.max(0, ahead - back)
  if after == 0 then redis.call('DEL', key) else ${id}_write(key, now, after, p[3], not damage and ahead) end
  return true
end
`;
}

/** Writes `ahead` into the cell: the remainder as the value, the rounded-up instant as the expiry (relative to now). */
function writeAhead(cell: Cell<number>, ahead: number, perMs: number): number {
  const reset = Math.ceil(ahead / perMs);
  setCell(cell, reset * perMs - ahead, reset);
  return reset;
}

/** How far ahead the key is, in units: 0 for a missing key. */
function aheadOf(cell: Cell<number>, perMs: number): number {
  return cell.held ? cell.ttlMs * perMs - (cell.value as number) : 0;
}

interface FreshAtState extends Decided {
  ahead: number;
}

/**
 * The algorithm under the Lua table and key suffix `id`, its Lua after `header` (Lua comments on
 * what the parametrisation is). The memory store only holds keys that have not expired by `now`,
 * each with a TTL, so its cells are the live keys of the Lua.
 */
export function gcraOrTokenBucket(id: string, header: string): Algorithm {
  return defineAlgorithm<number, FreshAtState>({
    id,
    stableDenials: true,
    lua: lua(id, header, WITH_PEXPIRETIME),
    luaWithoutPexpiretime: lua(id, header, WITHOUT_PEXPIRETIME),
    newState: () => ({ ...undecided(), ahead: 0 }),
    decide(_now, cell, cost, p, _peek, state) {
      const step = p[0] ?? 1;
      const most = step * (p[1] ?? 0);
      const perMs = p[2] ?? 1;
      const ahead = aheadOf(cell, perMs);
      const over = ahead + cost * step - most;
      state.ahead = ahead;
      state.allowed = over <= 0;
      state.remaining = Math.floor((most - ahead) / step);
      state.resetAfter = Math.ceil(ahead / perMs);
      state.retryAfter = over > 0 ? Math.ceil(over / perMs) : 0;
    },
    admit(_now, cell, cost, p, state) {
      const step = p[0] ?? 1;
      const after = state.ahead + cost * step;
      state.resetAfter = writeAhead(cell, after, p[2] ?? 1);
      state.remaining = Math.floor((step * (p[1] ?? 0) - after) / step);
      state.extra = 0;
    },
    keep() {},
    refund(now, cell, cost, p, chargedAt) {
      const perMs = p[2] ?? 1;
      const back = cost * (p[0] ?? 1) - (chargedAt > 0 && now > chargedAt ? (now - chargedAt) * perMs : 0);
      if (!cell.held || back <= 0) return false;
      const after = Math.max(0, aheadOf(cell, perMs) - back);
      if (after === 0) deleteCell(cell);
      else writeAhead(cell, after, perMs);
      return true;
    },
  });
}
