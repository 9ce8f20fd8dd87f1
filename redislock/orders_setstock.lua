-- Atomic.SetStock: sets the stock level KEYS[1] to ARGV[1] units, whatever
-- the key held, unless the units out on open orders of the SKU (counted in
-- its holds KEYS[2], see orders_lib.lua) would then have no room to come
-- back within 2^53-1.
-- Returns {0}, or {-10, units out}: nothing changed.
local out = units_out(KEYS[2])
if out > MAX - tonumber(ARGV[1]) then
  return {-10, out}
end
redis.call('SET', KEYS[1], ARGV[1])
return {0}
