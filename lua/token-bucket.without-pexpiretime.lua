-- sluice: tb without PEXPIRETIME, assembled from src/engine/driver-lua.ts and src/algorithms/ (explained there)

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

ALG.tb = {}
local function tb_ahead(key, now, p)
  local at = redis.call('PTTL', key)
  if at == -2 then return 0 end
  local value = redis.pcall('GET', key) if type(value) == 'table' and refused(value) then error(value) end
  local rem = whole(value)
  if at ~= -1 then at = now + at end
  if rem and rem >= 1000000000 * p[3] and rem < 2000000000 * p[3] then
    local cycled = floor(rem / p[3])
    rem = rem - cycled * p[3]
    if at ~= -1 then
      local off = (cycled - at) % 1000000000
      at = at + (off < 500000000 and off or off - 1000000000)
    end
  end
  if at ~= -1 and at <= now then return 0 end
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
local function tb_write(key, now, ahead, perMs)
  local reset = ceil(ahead / perMs)
  redis.call('SET', key, digits((1000000000 + (now + reset) % 1000000000) * perMs + reset * perMs - ahead), 'PXAT', digits(now + reset))
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
  local back = cost * p[1]
  if at > 0 and now > at then back = back - (now - at) * p[3] end
  if ahead == 0 or back <= 0 then return false end
  local after = math.max(0, ahead - back)
  if after == 0 then redis.call('DEL', key) else tb_write(key, now, after, p[3], not damage and ahead) end
  return true
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
