-- sluice: cc+fw+gcra+sl+sw+tb
-- What a limiter runs in Redis, assembled by src/engine/driver.ts (scriptFor); sluice's repository
-- holds such scripts under lua/, where npm run scripts prints any of them. Its definitions come
-- first, in this order: these helpers; callOf, which parses a call's ARGV; decideCall, the driver,
-- which decides a call under all of a limiter's policies; then ALG.<id>, one table per algorithm
-- of the limiter's policies. What runs comes last: a call sent alone (below the algorithms), or a
-- batch's loop over many calls (src/engine/batch.ts). So the helpers and the driver are at the
-- same lines in every script, lone or batch. What the choices the comments name save, measured in
-- Redis's instructions, is in docs/performance.md ("What a decision's Lua costs").

-- One table per algorithm, each with these functions (key: the policy's key; p: the policy's
-- numeric parameters; now: the Redis server's time in ms):
--   decide(key, cost, now, p, peek, state) -> allowed, remaining, reset, retry
--       asks, writing nothing but the pruning of expired entries (none when peek), and leaves in
--       state what admit or keep needs of what it read
--   admit(key, cost, now, p, state) -> remaining, reset, extra
--       counts the request (extra: a lease id, or 0)
--   keep(key, cost, now, p, state)
--       the request is not counted here (denied by this policy or another): only keeps the TTL
--       healthy
--   refund(key, cost, now, p, at) -> true if it gave anything back
--       of cost units charged at at (server time in ms; 0: unknown, taken as now), no more than
--       that charge still holds where it was taken: a window's count gives back only in the window
--       it was charged in, a sliding log the members scored at, a bucket what time has not refilled
--   release(key, cost, now, p, id) -> true if the lease was held (concurrency only)
--   extend(key, cost, now, p, id, ms) -> true if the lease was extended (concurrency only)
-- state is one table per policy, reused by the requests of a batch, so a decision allocates no
-- table or closure. Each algorithm's TypeScript twin (the memory store's) has the same functions.
-- State in Redis may hold anything (a hand or another program can write it): a number is read
-- through whole(), and the first command that reads a value through redis.pcall (a key of another
-- type replies an error instead of failing the script). Junk reads as empty state, and admit or
-- keep writes over it with a TTL (docs/algorithms.md).
local ALG = {}
-- Locals: a global's field is looked up on every use, a local is not.
local floor, ceil, format, type = math.floor, math.ceil, string.format, type
-- An integer as redis.call's argument. Redis 7.0 formats a number argument with %.17g, which costs
-- more than '%d' (docs/performance.md): constants go as strings ('-1', not -1), the cost as ARGV's
-- text (state.costText), and a computed integer through digits(n), once however many arguments it
-- is. Concatenating a number ('(' .. n) costs as much as formatting it (Lua's own %.14g). Only
-- whole numbers below 2^53 reach it ('%d' would cut a fraction off): sluice's arithmetic on ARGV,
-- TIME and state read through whole().
local function digits(n)
  return format('%d', n)
end
-- A number as sluice writes one (a count, a time in ms, an id): a whole number from 0 to 2^53; nil
-- for anything else, which only a hand or another program writes: text, a fraction, a negative or
-- absurd number, a missing value, or a key of another type (redis.pcall's error reply). State that
-- does not read is junk, and reads as empty.
local function whole(value)
  local n = tonumber(value)
  if n and n >= 0 and n < 2^53 and n % 1 == 0 then return n end
end
-- Whether a reply of redis.pcall on state is an error the key's value did not cause: a command the
-- ACL refuses, OOM. The caller raises it (error(reply)) on the line of its redis.pcall, so the
-- error names that line, as redis.call's would; errors the value causes (a key of another type,
-- INCR on a value that is not a count) are junk, which the caller reads as empty state.
local function refused(reply)
  local err = reply.err
  return err and not (err:find('^WRONGTYPE') or err:find('^ERR value is not') or err:find('^ERR increment or decrement'))
end

-- callOf(ARGV): a call's arguments, parsed. ARGV:
--   [1] op: limit, peek, refund, settle, release, extend, block or reset
--   [2] cost: the same in every policy (limit, peek, refund: from 0 up; settle: what to take, or
--       to give back when negative), or 'each' when each policy has its own (they follow the
--       policies)
--   [3] target: block: its duration in ms; release and extend: the lease id; refund and settle:
--       when the units given back were charged (server time in ms; 0: unknown)
--   [4] ms: extend: the new lease length in ms
--   [5] strikes: the consecutive denials that block the key (0: the limiter has no penalty box)
--   [6] blockMs: how long the penalty box blocks the key, in ms
--   [7] the number of policies, then per policy: its algorithm's id (ALG.<id>), the number of its
--       parameters, the parameters
--   then, when the cost is 'each', per policy: its cost, and for settle the most it may owe (the
--   policy's largest cost) after it
-- It remembers the last table it parsed: a batch's requests that share their args (every request
-- of one limiter at one cost) share one ARGV table, parsed once rather than once per request.
local parsedArgv, parsedCall
local function callOf(ARGV)
  if parsedArgv ~= ARGV then
    -- ARGV's numbers are read by arithmetic (s + 0), which converts a string once, where tonumber
    -- converts it twice (Lua 5.1 checks it is a number, then converts it; docs/performance.md).
    local each = ARGV[2] == 'each'
    local policies, pos, count = {}, 8, ARGV[7] + 0
    for i = 1, count do
      local count = ARGV[pos + 1] + 0
      -- Built whole, then converted in place: a table grown entry by entry is resized as it grows.
      local p = { unpack(ARGV, pos + 2, pos + 1 + count) }
      for j = 1, count do p[j] = p[j] + 0 end
      -- state: what the policy's decide leaves for its admit or keep, a table reused by every
      -- request of the batch that shares this ARGV (they run one after the other)
      -- (it starts with costText, the cost as ARGV's text: redis.call takes it without formatting)
      policies[i] = { alg = ALG[ARGV[pos]], p = p, state = { costText = ARGV[2] }, cost = not each and ARGV[2] + 0 }
      pos = pos + 2 + count
    end
    if each then
      local width = ARGV[1] == 'settle' and 2 or 1
      for i = 1, count do
        local policy, text = policies[i], ARGV[pos + (i - 1) * width]
        policy.cost, policy.state.costText = text + 0, text
        if width == 2 then policy.most = ARGV[pos + i * 2 - 1] + 0 end
      end
    end
    local strikes = ARGV[5] + 0
    parsedArgv, parsedCall = ARGV, {
      op = ARGV[1], target = ARGV[3] + 0, ms = ARGV[4] + 0,
      strikes = strikes, blockMs = ARGV[6] + 0, policies = policies,
      -- the strikes key's place before the policies' keys: policy i's is KEYS[k + before + i]
      before = strikes > 0 and 1 or 0,
    }
  end
  return parsedCall
end

-- decideCall(block, KEYS, k, ARGV, now, out, at): the driver, shared by every limiter. It decides
-- one call under all of a limiter's policies at once: it asks each policy first (nothing written
-- but pruning), then admits the request in all of them or counts it in none, so several limits
-- never spend units on a denied request. now is the server's time in ms. It writes its reply into
-- out after index at and returns the reply's length, so that a batch collects every reply in one
-- table, and it reads its keys where they are in KEYS, so that a batch copies none.
--   block  the block key
--   KEYS   the call's other keys, from KEYS[k + 1]: the strikes key (consecutive denials), only
--          when the limiter has a penalty box (ARGV's strikes > 0) or the op is reset, then one key
--          per policy, policy i's at KEYS[first + i]
--   ARGV   see callOf
--   reply  allowed (1 or 0), blocked for ms (0 when not blocked), then five numbers per policy:
--          allowed (1 or 0), remaining, resetAfterMs, retryAfterMs, extra (a lease id, or 0); for
--          the other ops two numbers: done (1 or 0), and the block's ms (block) or 0. Its caller
--          puts now before it (a batch once, for all of its requests).
-- settle takes a policy's cost whether or not it fits, so the key may go into debt (remaining below
-- 0, denied until time pays it off), but never by more than the policy's largest cost: what is past
-- that is not taken. That keeps every state within two limits' worth (a sliding log within two
-- limits of members, gcra's and the token bucket's instant below 2^53 units).
-- unblocked: true while no block key of the requests being decided exists, which a batch learns with
-- one EXISTS of them all: a request then does not GET its own (see the batch). Writing a block key
-- sets it back to false.
local unblocked = false
-- A blocked call's reply, for n policies: denied by every one of them for the block's ms.
local function blockedReply(out, at, n, blocked)
  out[at + 1], out[at + 2] = 0, blocked
  for i = 1, n do
    local p = at + 2 + (i - 1) * 5
    out[p + 1], out[p + 2], out[p + 3], out[p + 4], out[p + 5] = 0, 0, blocked, blocked, 0
  end
  return 2 + n * 5
end
local function decideCall(block, KEYS, k, ARGV, now, out, at)
  local c = callOf(ARGV)
  local op, policies, first = c.op, c.policies, k + c.before
  if op == 'block' then
    redis.call('SET', block, digits(now + c.target), 'PX', digits(c.target))
    unblocked = false
    out[at + 1], out[at + 2] = 1, c.target
    return 2
  end
  if op == 'reset' then
    redis.call('DEL', block, unpack(KEYS, k + 1, k + 1 + #policies))
    out[at + 1], out[at + 2] = 1, 0
    return 2
  end
  if op == 'refund' or op == 'release' or op == 'extend' then
    local done = 0
    for i, policy in ipairs(policies) do
      local f = policy.alg[op]
      if f and policy.cost > 0 and f(KEYS[first + i], policy.cost, now, policy.p, c.target, c.ms) then done = 1 end
    end
    out[at + 1], out[at + 2] = done, 0
    return 2
  end
  if op == 'settle' then
    local done = 0
    for i, policy in ipairs(policies) do
      local key, cost, state = KEYS[first + i], policy.cost, policy.state
      if cost < 0 then
        if policy.alg.refund(key, -cost, now, policy.p, c.target) then done = 1 end
      elseif cost > 0 then
        -- Asked at cost 0, whose answer (remaining) does not depend on the cost, and which never
        -- looks for a unit past the log's end (sliding log) as a cost above the limit would.
        local _, remaining = policy.alg.decide(key, 0, now, policy.p, false, state)
        local take = remaining + policy.most
        if take > cost then take = cost end
        if take > 0 then
          state.costText = digits(take)
          policy.alg.admit(key, take, now, policy.p, state)
          done = 1
        else
          policy.alg.keep(key, 0, now, policy.p, state)
        end
      end
    end
    out[at + 1], out[at + 2] = done, 0
    return 2
  end
  local peek = op == 'peek'
  -- The block key holds when the block ends (server time), so its TTL only collects garbage and a
  -- block that lost its TTL still ends on time. Junk (not a time sluice wrote, a key of another
  -- type, an end further off than a block lasts) reads as -1: no block, deleted as an ended one.
  -- A key known to be missing (unblocked) reads as one.
  local blockedUntil = not unblocked and redis.pcall('GET', block) if type(blockedUntil) == 'table' and refused(blockedUntil) then error(blockedUntil) end
  blockedUntil = blockedUntil and (whole(blockedUntil) or -1) or 0
  if blockedUntil > now and blockedUntil <= now + 31622400000 then
    local blocked = blockedUntil - now
    -- A block that lost its TTL (PERSIST) gets it back from the end it holds; only a blocked call pays.
    if not peek and redis.call('PTTL', block) == -1 then redis.call('PEXPIREAT', block, digits(blockedUntil)) end
    return blockedReply(out, at, #policies, blocked)
  end
  if blockedUntil ~= 0 and not peek then redis.call('DEL', block) end
  -- Each policy's reply is written as it decides; admitting the request then overwrites its
  -- remaining, reset and extra. A reply's remaining is never negative (clamped by a comparison,
  -- cheaper than math.max, a global's field and a C call).
  local all = true
  for i = 1, #policies do
    local policy, p = policies[i], at + 2 + (i - 1) * 5
    local allowed, remaining, reset, retry = policy.alg.decide(KEYS[first + i], policy.cost, now, policy.p, peek, policy.state)
    out[p + 1], out[p + 2], out[p + 3], out[p + 4], out[p + 5] = allowed and 1 or 0, remaining > 0 and remaining or 0, reset, retry, 0
    all = all and allowed
  end
  out[at + 1], out[at + 2] = all and 1 or 0, 0
  if not peek then
    for i = 1, #policies do
      local policy, p = policies[i], at + 2 + (i - 1) * 5
      -- A policy the request costs nothing is only asked (it may be in debt): nothing to count.
      if all and policy.cost > 0 then
        local remaining, reset, extra = policy.alg.admit(KEYS[first + i], policy.cost, now, policy.p, policy.state)
        out[p + 2], out[p + 3], out[p + 5] = remaining > 0 and remaining or 0, reset, extra
      else
        policy.alg.keep(KEYS[first + i], policy.cost, now, policy.p, policy.state)
      end
    end
  end
  if not peek and c.strikes > 0 then
    if all then
      redis.call('DEL', KEYS[k + 1])
    else
      -- The strikes key holds '<denials in a row>:<when they are forgotten>' (server time), read by
      -- TIME as the block key is: a TTL alone would end them a ms early or late, by how far Redis's
      -- expiry clock lags TIME; it only collects garbage, a ms after that end. Junk (not that form,
      -- an end further off than blockMs, a key of another type) counts again from 1.
      local held = redis.pcall('GET', KEYS[k + 1]) if type(held) == 'table' and refused(held) then error(held) end
      local strikes = 1
      if type(held) == 'string' then
        local count, ends = held:match('^(%d+):(%d+)$')
        count, ends = whole(count), whole(ends)
        if count and ends and ends > now and ends <= now + c.blockMs then strikes = count + 1 end
      end
      if strikes >= c.strikes then
        redis.call('SET', block, digits(now + c.blockMs), 'PX', digits(c.blockMs))
        unblocked = false
        redis.call('DEL', KEYS[k + 1])
        -- The denial that starts the block answers as the block does: its retry is the block's end,
        -- not its policies' (a client back after them would find itself blocked).
        return blockedReply(out, at, #policies, c.blockMs)
      else
        redis.call('SET', KEYS[k + 1], digits(strikes) .. ':' .. digits(now + c.blockMs), 'PX', digits(c.blockMs + 1))
      end
    end
  end
  return 2 + #policies * 5
end

-- concurrency (ALG.cc): at most limit requests in progress per key, each holding a lease.
--   KEY  a sorted set: one member per held slot (an integer id), scored by when its lease expires
--   p    limit, lease ms
-- Expired leases are dropped before counting, so a holder that crashed never leaks its slot for
-- longer than its lease. A lease of cost n holds the n consecutive ids from its first one; the
-- first id is returned (the reply's extra field) to release or extend it. Ids start at now * 1000
-- and skip any in use, so they are unique within the key. No lease expires further ahead than the
-- longest lease or extension (366 days): a set whose last one does is junk (see cc_live).
ALG.cc = {}

-- The state shared by slidingLog and concurrency (src/algorithms/sorted-set-reader.ts): a sorted set of
-- integer ids scored by a time in ms (an entry's admission, a lease's expiry), pruned of what
-- cutoff leaves behind.
-- cc_live(key, cutoff, latest, peek): prunes members scored at or before cutoff (a string; a
-- peek only counts past it) and returns how many are left, then the newest member's score and id.
-- A set whose newest member sluice did not write is junk, read as empty and deleted unless
-- peeking: a key of another type, an id that is not a whole number (see whole()), a score that is
-- not a whole ms or lies after latest, which no clock or lease of sluice's reaches. Scores, which
-- Redis replies as strings, always read by arithmetic ('inf' included); ids do not.
local function cc_live(key, cutoff, latest, peek)
  local count
  if peek then
    count = redis.pcall('ZCOUNT', key, '(' .. cutoff, '+inf') if type(count) == 'table' and refused(count) then error(count) end
  else
    count = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', cutoff) if type(count) == 'table' and refused(count) then error(count) end
    -- Pruned: every member left is past the cutoff.
    if type(count) == 'number' then count = redis.call('ZCARD', key) end
  end
  if count == 0 then return 0 end
  if type(count) == 'number' then
    local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    local at, newestId = newest[2] + 0, whole(newest[1])
    if newestId and at <= latest and at % 1 == 0 then return count, at, newestId end
  end
  if not peek then redis.call('DEL', key) end
  return 0
end

-- The live leases (pruned unless peeking), and when the last one expires.
local function cc_leases(key, now, peek)
  -- Only ever an argument: formatted once, not by each redis.call (see digits).
  local expired = digits(now)
  return expired, cc_live(key, expired, now + 31622400000, peek)
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

-- gcra (ALG.gcra): the generic cell rate algorithm. With T the interval (us), a request of cost n
-- is admitted if max(TAT, now) + n*T <= now + burst*T, and then the theoretical arrival time TAT
-- becomes max(TAT, now) + n*T. A fresh key admits burst at once; after that one request every T.
-- Cost n is all or nothing. TAT is the instant the key is fresh again, so it is the key's expiry
-- (below): integer us, nothing lost to rounding.
--   p  T in us (step), burst (size), 1000 us per ms (perMs)
--
-- The state shared by gcra and tokenBucket (src/algorithms/gcra-and-token-bucket.ts): the instant at which
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
-- tokenBucket() keep three bursts below it: a held one, one of debt, an asked one).
-- This form reads the expiry with PEXPIRETIME (Redis 7.0); a server without it runs the other.
ALG.gcra = {}
-- How far ahead the key is, and what is wrong with it: nil, 'value' (not a remainder, read as 0),
-- 'lost' (its expiry) or 'junk'. A key that is there and holds nothing wrong is ahead by over 0.
local function gcra_ahead(key, now, p)
  local at = redis.call('PEXPIRETIME', key)
  if at ~= -1 and at <= now then return 0 end
  local value = redis.pcall('GET', key) if type(value) == 'table' and refused(value) then error(value) end
  local rem = whole(value)
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
-- gcra_write(key, now, ahead, perMs, before) writes the instant ahead and returns it rounded
-- up, in ms from now (the reply's reset); before (read by the form with PEXPIRETIME): how far ahead
-- the key was if it is there and holds nothing wrong (else nil or false).
-- Moved by whole ms, the key keeps its remainder (always, at a step of whole ms: most rates), so
-- only its expiry changes: PEXPIREAT instead of SET with PXAT and the remainder's formatting saved
-- about 7,800 of 49,600 instructions a decision with every key live (docs/performance.md). Else the
-- remainder is written too: at one cost, every fresh key (as many clients' are, their state
-- expired) gets the same one, which a batch formats once (the last one written, and its text, kept).
local gcra_rem, gcra_remText
local function gcra_write(key, now, ahead, perMs, before)
  local reset = ceil(ahead / perMs)
  if before and (ahead - before) % perMs == 0 then
    redis.call('PEXPIREAT', key, digits(now + reset))
  else
    local rem = reset * perMs - ahead
    if rem ~= gcra_rem then gcra_rem, gcra_remText = rem, digits(rem) end
    redis.call('SET', key, gcra_remText, 'PXAT', digits(now + reset))
  end
  return reset
end
function ALG.gcra.decide(key, cost, now, p, peek, state)
  local step, most, perMs = p[1], p[1] * p[2], p[3]
  local ahead, damage = gcra_ahead(key, now, p)
  state.ahead, state.damage = ahead, damage
  local over = ahead + cost * step - most
  return over <= 0, floor((most - ahead) / step), ceil(ahead / perMs), over > 0 and ceil(over / perMs) or 0
end
function ALG.gcra.admit(key, cost, now, p, state)
  local ahead = state.ahead
  local after = ahead + cost * p[1]
  return floor((p[1] * p[2] - after) / p[1]), gcra_write(key, now, after, p[3], not state.damage and ahead > 0 and ahead), 0
end
function ALG.gcra.keep(key, cost, now, p, state)
  if state.damage == 'lost' then
    gcra_write(key, now, state.ahead, p[3])
  elseif state.damage == 'junk' then
    redis.call('DEL', key)
  end
end
function ALG.gcra.refund(key, cost, now, p, at)
  local ahead, damage = gcra_ahead(key, now, p)
  -- Less what time has refilled since the charge: a full bucket may have lost as much.
  local back = cost * p[1]
  if at > 0 and now > at then back = back - (now - at) * p[3] end
  if ahead == 0 or back <= 0 then return false end
  local after = math.max(0, ahead - back)
  if after == 0 then redis.call('DEL', key) else gcra_write(key, now, after, p[3], not damage and ahead) end
  return true
end

-- slidingLog (ALG.sl): one sorted-set member per admitted unit, exact over any window.
--   KEY  a sorted set: one member per admitted unit, scored by its admission time in ms
--   p    limit, window ms
-- Member ids are integers, now * 1000 or one more than the newest id, whichever is larger: unique
-- even when thousands arrive in one ms, and of equal length, so their lexical order is their
-- numeric order and ZRANGE -1 -1 finds the newest. A member is never scored before the newest one,
-- so a server clock stepping back cannot reorder the log, and leaves the newest at most a window
-- ahead: a log further ahead is junk (see sl_live).
ALG.sl = {}

-- The state shared by slidingLog and concurrency (src/algorithms/sorted-set-reader.ts): a sorted set of
-- integer ids scored by a time in ms (an entry's admission, a lease's expiry), pruned of what
-- cutoff leaves behind.
-- sl_live(key, cutoff, latest, peek): prunes members scored at or before cutoff (a string; a
-- peek only counts past it) and returns how many are left, then the newest member's score and id.
-- A set whose newest member sluice did not write is junk, read as empty and deleted unless
-- peeking: a key of another type, an id that is not a whole number (see whole()), a score that is
-- not a whole ms or lies after latest, which no clock or lease of sluice's reaches. Scores, which
-- Redis replies as strings, always read by arithmetic ('inf' included); ids do not.
local function sl_live(key, cutoff, latest, peek)
  local count
  if peek then
    count = redis.pcall('ZCOUNT', key, '(' .. cutoff, '+inf') if type(count) == 'table' and refused(count) then error(count) end
  else
    count = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', cutoff) if type(count) == 'table' and refused(count) then error(count) end
    -- Pruned: every member left is past the cutoff.
    if type(count) == 'number' then count = redis.call('ZCARD', key) end
  end
  if count == 0 then return 0 end
  if type(count) == 'number' then
    local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    local at, newestId = newest[2] + 0, whole(newest[1])
    if newestId and at <= latest and at % 1 == 0 then return count, at, newestId end
  end
  if not peek then redis.call('DEL', key) end
  return 0
end

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

-- tokenBucket (ALG.tb): the bucket is held as the instant it is full again: tokens(now) =
-- capacity - (fullAt - now) * rate, at most capacity (fullAt <= now is a full bucket, as is a
-- missing key). Taking n tokens moves fullAt to max(fullAt, now) + n token refill times. Each
-- token's refill time is rounded up to the unit of 100 ns, so the bucket never refills faster
-- than refillPerSecond, and every sum is of integers: remaining, resetAfter and retryAfter are
-- exact for that rounded rate.
--   p  a token's refill time in units of 100 ns (step), capacity (size), 10000 units per ms (perMs)
--
-- The state shared by gcra and tokenBucket (src/algorithms/gcra-and-token-bucket.ts): the instant at which
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
-- tokenBucket() keep three bursts below it: a held one, one of debt, an asked one).
-- This form reads the expiry with PEXPIRETIME (Redis 7.0); a server without it runs the other.
ALG.tb = {}
-- How far ahead the key is, and what is wrong with it: nil, 'value' (not a remainder, read as 0),
-- 'lost' (its expiry) or 'junk'. A key that is there and holds nothing wrong is ahead by over 0.
local function tb_ahead(key, now, p)
  local at = redis.call('PEXPIRETIME', key)
  if at ~= -1 and at <= now then return 0 end
  local value = redis.pcall('GET', key) if type(value) == 'table' and refused(value) then error(value) end
  local rem = whole(value)
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
-- tb_write(key, now, ahead, perMs, before) writes the instant ahead and returns it rounded
-- up, in ms from now (the reply's reset); before (read by the form with PEXPIRETIME): how far ahead
-- the key was if it is there and holds nothing wrong (else nil or false).
-- Moved by whole ms, the key keeps its remainder (always, at a step of whole ms: most rates), so
-- only its expiry changes: PEXPIREAT instead of SET with PXAT and the remainder's formatting saved
-- about 7,800 of 49,600 instructions a decision with every key live (docs/performance.md). Else the
-- remainder is written too: at one cost, every fresh key (as many clients' are, their state
-- expired) gets the same one, which a batch formats once (the last one written, and its text, kept).
local tb_rem, tb_remText
local function tb_write(key, now, ahead, perMs, before)
  local reset = ceil(ahead / perMs)
  if before and (ahead - before) % perMs == 0 then
    redis.call('PEXPIREAT', key, digits(now + reset))
  else
    local rem = reset * perMs - ahead
    if rem ~= tb_rem then tb_rem, tb_remText = rem, digits(rem) end
    redis.call('SET', key, tb_remText, 'PXAT', digits(now + reset))
  end
  return reset
end
function ALG.tb.decide(key, cost, now, p, peek, state)
  local step, most, perMs = p[1], p[1] * p[2], p[3]
  local ahead, damage = tb_ahead(key, now, p)
  state.ahead, state.damage = ahead, damage
  local over = ahead + cost * step - most
  return over <= 0, floor((most - ahead) / step), ceil(ahead / perMs), over > 0 and ceil(over / perMs) or 0
end
function ALG.tb.admit(key, cost, now, p, state)
  local ahead = state.ahead
  local after = ahead + cost * p[1]
  return floor((p[1] * p[2] - after) / p[1]), tb_write(key, now, after, p[3], not state.damage and ahead > 0 and ahead), 0
end
function ALG.tb.keep(key, cost, now, p, state)
  if state.damage == 'lost' then
    tb_write(key, now, state.ahead, p[3])
  elseif state.damage == 'junk' then
    redis.call('DEL', key)
  end
end
function ALG.tb.refund(key, cost, now, p, at)
  local ahead, damage = tb_ahead(key, now, p)
  -- Less what time has refilled since the charge: a full bucket may have lost as much.
  local back = cost * p[1]
  if at > 0 and now > at then back = back - (now - at) * p[3] end
  if ahead == 0 or back <= 0 then return false end
  local after = math.max(0, ahead - back)
  if after == 0 then redis.call('DEL', key) else tb_write(key, now, after, p[3], not damage and ahead) end
  return true
end

-- A call sent alone: KEYS its block key, then its other keys as decideCall reads them; ARGV as
-- callOf reads it and then the call's deadline. The reply is now, then decideCall's.
-- now: every decision's time, the Redis server's, in ms (TIME replies with strings, read by
-- arithmetic as ARGV is). The call is refused whole when now is past its deadline (server time in
-- ms; 0: none), after which its caller stopped waiting and answered from its failure policy: a
-- command that reaches Redis late (held in a paused server, a stalled connection, a client's
-- resend queue) then counts nothing. The refusal is an error reply naming the server's time, from
-- which the store learns its clock.
local time = redis.call('TIME')
local now = time[1] * 1000 + floor(time[2] / 1000)
local deadline = ARGV[#ARGV] + 0
if deadline > 0 and now >= deadline then
  return redis.error_reply('LATE ' .. digits(now) .. ' (server time in ms) reached after the deadline ' .. digits(deadline))
end
-- The reply's table is made as long as a one-policy reply (8 numbers) at once: filled entry by
-- entry, a table is resized at each power of two, which cost a lone call about 4,000 instructions
-- (docs/performance.md). Redis's reply ends at the first nil.
local out = {now, nil, nil, nil, nil, nil, nil, nil}
decideCall(KEYS[1], KEYS, 1, ARGV, now, out, 1)
return out
