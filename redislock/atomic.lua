-- Takes ARGV[1] units from the stock level in KEYS[1], all or nothing.
-- ARGV[1] is a validated quantity 1..2^53-1 in decimal; it is passed on to
-- DECRBY as the string it is, because Lua would print a large number as
-- "1e+15", which DECRBY refuses.
-- With a second key the take is a lock holder's (the segment locks of
-- NewSegmented's WithSegmentLocks): it happens only while KEYS[2] (same
-- hash tag) holds the owner token ARGV[2], so a holder whose lease ran out
-- cannot write.
-- Returns the units left (>= 0) on success, or
--   -1 the key does not exist (nothing is created: DECRBY would make it -qty),
--   -2 fewer than ARGV[1] units are left,
--   -3 the key holds no stock level (see level.lua, prepended),
--   -4 KEYS[2] is given and does not hold ARGV[2].
-- Every check comes before the one write, so an error reply means nothing
-- was changed.
if KEYS[2] and redis.pcall('GET', KEYS[2]) ~= ARGV[2] then
  return -4
end
local have, why = level(KEYS[1])
if not have then
  return why
end
if have < tonumber(ARGV[1]) then
  return -2
end
return redis.call('DECRBY', KEYS[1], ARGV[1])
