-- sluice: cc, assembled from src/engine/driver-lua.ts and src/algorithms/ (explained there)

local ALG = {}
local floor, ceil, format, type = math.floor, math.ceil, string.format, type
local function digits(n)
  return format('%d', n)
end
local function whole(value)
  local n = tonumber(value)
  if n and n >= 0 and n < 2^53 and n % 1 == 0 then return n end
end
local function refused(reply)
  local err = reply.err
  return err and not (err:find('^WRONGTYPE') or err:find('^ERR value is not') or err:find('^ERR increment or decrement'))
end

local parsedArgv, parsedCall
local function callOf(ARGV)
  if parsedArgv ~= ARGV then
    local each = ARGV[2] == 'each'
    local policies, pos, count = {}, 8, ARGV[7] + 0
    for i = 1, count do
      local count = ARGV[pos + 1] + 0
      local p = { unpack(ARGV, pos + 2, pos + 1 + count) }
      for j = 1, count do p[j] = p[j] + 0 end
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
      before = strikes > 0 and 1 or 0,
    }
  end
  return parsedCall
end

local unblocked = false
local function blockedReply(out, at, n, blocked)
  out[at + 1], out[at + 2] = 0, blocked
  for i = 1, n do
    local p = at + 2 + (i - 1) * 5
    out[p + 1], out[p + 2], out[p + 3], out[p + 4], out[p + 5] = 0, 0, blocked, blocked, 0
  end
  return 2 + n * 5
end
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
  local blockedUntil = not unblocked and redis.pcall('GET', block) if type(blockedUntil) == 'table' and refused(blockedUntil) then error(blockedUntil) end
  blockedUntil = blockedUntil and (whole(blockedUntil) or -1) or 0
  if blockedUntil > now and blockedUntil <= now + 31622400000 then
    local blocked = blockedUntil - now
    if not peek and redis.call('PTTL', block) == -1 then redis.call('PEXPIREAT', block, digits(blockedUntil)) end
    return blockedReply(out, at, #policies, blocked)
  end
  if blockedUntil ~= 0 and not peek then redis.call('DEL', block) end
  if op == 'take' then return takeUpTo(KEYS[first + 1], policies[1], now, c.target, out, at) end
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
        return blockedReply(out, at, #policies, c.blockMs)
      else
        redis.call('SET', KEYS[k + 1], digits(strikes) .. ':' .. digits(now + c.blockMs), 'PX', digits(c.blockMs + 1))
      end
    end
  end
  return 2 + #policies * 5
end

ALG.cc = {}

local function cc_live(key, cutoff, latest, peek)
  local count
  if peek then
    count = redis.pcall('ZCOUNT', key, '(' .. cutoff, '+inf') if type(count) == 'table' and refused(count) then error(count) end
  else
    count = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', cutoff) if type(count) == 'table' and refused(count) then error(count) end
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

local function cc_leases(key, now, peek)
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
local function cc_expire(key, now)
  local _, count, lastAt = cc_leases(key, now, false)
  if count > 0 then redis.call('PEXPIRE', key, digits(lastAt - now + 1)) end
end
function ALG.cc.release(key, cost, now, p, id)
  local released = false
  for i = 0, cost - 1 do
    local member = digits(id + i)
    local expires = redis.pcall('ZSCORE', key, member) if type(expires) == 'table' and refused(expires) then error(expires) end
    if tonumber(expires) and expires + 0 > now then
      redis.call('ZREM', key, member)
      released = true
    end
  end
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

local time = redis.call('TIME')
local now = time[1] * 1000 + floor(time[2] / 1000)
local deadline = ARGV[#ARGV] + 0
if deadline > 0 and now >= deadline then
  return redis.error_reply('LATE ' .. digits(now) .. ' (server time in ms) reached after the deadline ' .. digits(deadline))
end
local out = {now, nil, nil, nil, nil, nil, nil, nil}
decideCall(KEYS[1], KEYS, 1, ARGV, now, out, 1)
return out
