-- Restock whose order record KEYS[1] shares the slot of the stock level
-- KEYS[2] and holds KEYS[3]: ARGV[3] units added to a stocked SKU ARGV[2]
-- once, recorded under the id in the same script. ARGV[1] retention (ms),
-- [4] and [5] the attempt's fence point and expiry, [6] the tombstone ttl
-- of a refusal (see late and refuse in orders_lib.lua).
-- Returns {0} (also for a retry), or {-1} no such key, {-3} the key holds no
-- stock level, {-10} the level plus the units out on open orders would pass
-- 2^53-1 (nothing changed but the ID's tombstone); {-5} the id was applied
-- otherwise, {-15, R} or {-16} see orders_place.lua (nothing changed).
local now = now_us()
local found = call('HMGET', KEYS[1], 'k', X)
local stop = late(now, found[2], ARGV[4], ARGV[5])
if stop then
  return stop
end
if found[1] then
  if same_lines(KEYS[1], 'R', argv_lines(2, 1)) then
    return {0}
  end
  return {-5}
end
local have, why = level(KEYS[2])
if not have then
  refuse(KEYS[1], now, ARGV[6])
  return {why}
end
if have + units_out(KEYS[3]) + tonumber(ARGV[3]) > MAX then
  refuse(KEYS[1], now, ARGV[6])
  return {-10}
end
if found[2] then
  call('DEL', KEYS[1]) -- the tombstone of a refusal this attempt was sent after
end
call('INCRBY', KEYS[2], ARGV[3])
call('HSET', KEYS[1], unpack(record_fields('t', 'R', argv_lines(2, 1))))
call('PEXPIRE', KEYS[1], ARGV[1])
return {0}
