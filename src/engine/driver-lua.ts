import { sha1Hex } from '../core/digest.js';
import { MAX_DURATION_MS } from '../core/duration.js';
import type { Script } from './script.js';

// The Lua every script shares, assembled by driverScript(), which leaves out the comments: they
// explain the Lua here; lua/ holds the scripts as Redis runs them (`npm run scripts`).
const HELPERS = `
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
`;

const PARSE_CALL = `
-- callOf(ARGV): a call's arguments, parsed. ARGV:
--   [1] op: limit, peek, take, refund, settle, release, extend, block or reset
--   [2] cost: the same in every policy (limit, peek, refund: from 0 up; settle: what to take, or
--       to give back when negative), or 'each' when each policy has its own (they follow the
--       policies)
--   [3] target: block: its duration in ms; release and extend: the lease id; refund and settle:
--       when the units given back were charged (server time in ms; 0: unknown); take: the fewest
--       units to take
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
`;

const DRIVER = `
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
-- take: a quota lease's (src/limiter/quota-leasing.ts), of one policy: its cost in units or, when
-- they do not fit, as many as fit down to least (the request's own cost), in this one step. A denial
-- is the answer at least. The policy's extra is the units taken (0 when denied).
local function takeUpTo(key, policy, now, least, out, at)
  local alg, p, state, most = policy.alg, policy.p, policy.state, policy.cost
  local take = most
  local allowed, remaining, reset, retry = alg.decide(key, most, now, p, false, state)
  if not allowed then
    take = least
    allowed, remaining, reset, retry = alg.decide(key, least, now, p, false, state)
    local fit = remaining < most and remaining or most - 1
    if allowed and fit > least then
      local fits, r, s, t = alg.decide(key, fit, now, p, false, state)
      if fits then take, remaining, reset, retry = fit, r, s, t else alg.decide(key, least, now, p, false, state) end
    end
  end
  local extra = 0
  if allowed then
    -- admit writes the cost as its text (every take sets it: a take's ARGV is shared only by takes).
    state.costText = digits(take)
    remaining, reset = alg.admit(key, take, now, p, state)
    extra = take
  else
    alg.keep(key, least, now, p, state)
  end
  local flag = allowed and 1 or 0
  out[at + 1], out[at + 2] = flag, 0
  out[at + 3], out[at + 4], out[at + 5], out[at + 6], out[at + 7] = flag, remaining > 0 and remaining or 0, reset, retry, extra
  return 7
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
  if blockedUntil > now and blockedUntil <= now + ${MAX_DURATION_MS} then
    local blocked = blockedUntil - now
    -- A block that lost its TTL (PERSIST) gets it back from the end it holds; only a blocked call pays.
    if not peek and redis.call('PTTL', block) == -1 then redis.call('PEXPIREAT', block, digits(blockedUntil)) end
    return blockedReply(out, at, #policies, blocked)
  end
  if blockedUntil ~= 0 and not peek then redis.call('DEL', block) end
  if op == 'take' then return takeUpTo(KEYS[first + 1], policies[1], now, c.target, out, at) end
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
`;

/** The first word of a late call's error reply. */
export const LATE = 'LATE';

/**
 * The Lua that sets `now` and refuses a late call, where `deadline` is a Lua expression for the
 * call's deadline. It follows a script's setup, which defines `floor` and `digits`.
 */
export function readServerTime(deadline: string): string {
  return `-- now: every decision's time, the Redis server's, in ms (TIME replies with strings, read by
-- arithmetic as ARGV is). The call is refused whole when now is past its deadline (server time in
-- ms; 0: none), after which its caller stopped waiting and answered from its failure policy: a
-- command that reaches Redis late (held in a paused server, a stalled connection, a client's
-- resend queue) then counts nothing. The refusal is an error reply naming the server's time, from
-- which the store learns its clock.
local time = redis.call('TIME')
local now = time[1] * 1000 + floor(time[2] / 1000)
local deadline = ${deadline}
if deadline > 0 and now >= deadline then
  return redis.error_reply('${LATE} ' .. digits(now) .. ' (server time in ms) reached after the deadline ' .. digits(deadline))
end`;
}

const BODY = `-- A call sent alone: KEYS its block key, then its other keys as decideCall reads them; ARGV as
-- callOf reads it and then the call's deadline. The reply is now, then decideCall's.
${readServerTime('ARGV[#ARGV] + 0')}
-- The reply's table is sized once, for a one-policy reply (bench/NOTES.md). Redis's reply
-- ends at the first nil.
local out = {now, nil, nil, nil, nil, nil, nil, nil}
decideCall(KEYS[1], KEYS, 1, ARGV, now, out, 1)
return out
`;

/**
 * `lua` without its lines of comment: they explain the Lua here, in src, and are not sent to Redis
 * (nor copied into every file of lua/).
 */
export function withoutComments(lua: string): string {
  return lua
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
}

/** A script: the driver, then the algorithms' Lua, then the body of a call sent alone. */
export function driverScript(name: string, algorithmsLua: readonly string[], twin: Script['twin']): Script {
  // The driver before the algorithms, so its lines are the same in every script.
  const setup = withoutComments(
    `${[HELPERS, PARSE_CALL, DRIVER, ...algorithmsLua].map((lua) => lua.trim()).join('\n\n')}\n\n`,
  );
  const body = withoutComments(BODY);
  const lua = `-- sluice: ${name}, assembled from src/engine/driver-lua.ts and src/algorithms/ (explained there)\n${setup}${body}`;
  return { name, lua, setup, body, sha: sha1Hex(lua), twin };
}
