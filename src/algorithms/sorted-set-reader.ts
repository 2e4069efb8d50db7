/** The Lua of `<id>_live`, for an algorithm whose state is a timed set: slidingLog and concurrency. */
export function sortedSetReaderLua(id: string): string {
  return `
-- The state shared by slidingLog and concurrency (src/algorithms/sorted-set-reader.ts): a sorted set of
-- integer ids scored by a time in ms (an entry's admission, a lease's expiry), pruned of what
-- cutoff leaves behind.
-- ${id}_live(key, cutoff, latest, peek): prunes members scored at or before cutoff (a string; a
-- peek only counts past it) and returns how many are left, then the newest member's score and id.
-- A set whose newest member sluice did not write is junk, read as empty and deleted unless
-- peeking: a key of another type, an id that is not a whole number (see whole()), a score that is
-- not a whole ms or lies after latest, which no clock or lease of sluice's reaches. Scores, which
-- Redis replies as strings, always read by arithmetic ('inf' included); ids do not.
local function ${id}_live(key, cutoff, latest, peek)
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
`;
}
