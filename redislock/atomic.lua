-- Takes ARGV[1] units from the stock level in KEYS[1], all or nothing.
-- ARGV[1] is a validated quantity 1..2^53-1 in decimal; it is passed on to
-- DECRBY as the string it is, because Lua would print a large number as
-- "1e+15", which DECRBY refuses.
-- Returns the units left (>= 0) on success, or
--   -1 the key does not exist (nothing is created: DECRBY would make it -qty),
--   -2 fewer than ARGV[1] units are left,
--   -3 the key holds no stock level (not a string, or not the canonical
--      decimal of 0..2^53-1, the only values stockguard writes).
-- Every check comes before the one write, so an error reply means nothing
-- was changed.
local v = redis.pcall('GET', KEYS[1])
if v == false then
  return -1
end
if type(v) ~= 'string' or #v > 16 then
  return -3
end
local have = tonumber(v)
-- %d of a non-integer or a differently spelled number ("007", "1e3", " 7",
-- "0x10") does not give back v.
if have == nil or have < 0 or have > 9007199254740991 or string.format('%d', have) ~= v then
  return -3
end
if have < tonumber(ARGV[1]) then
  return -2
end
return redis.call('DECRBY', KEYS[1], ARGV[1])
