-- Atomic.Stock: the level in KEYS[1] once the holds due back (KEYS[2], see
-- orders_lib.lua) are given back, up to 1024 of them per call.
-- ARGV[1] "1" means: leave due remote holds out (see orders_decrement.lua).
-- Returns {level, more, id...}: more is 1 when due local holds may remain
-- (call again), the ids are due remote holds to resolve first; or {-1} no
-- such key, {-3} the key holds no stock level.
local have, why = level(KEYS[1])
if not have then
  return {why}
end
local remote = ARGV[1] ~= '1' and {} or nil
local more
have, more = reclaim(KEYS[1], KEYS[2], now_us(), have, 0, 1024, remote)
local out = {have, more and 1 or 0}
for _, id in ipairs(remote or {}) do
  out[#out + 1] = id
end
return out
