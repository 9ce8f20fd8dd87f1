-- Restock whose order record KEYS[1] shares the slot of the stock level
-- KEYS[2] and holds KEYS[3]: ARGV[3] units added to a stocked SKU ARGV[2]
-- once, recorded under the id in the same script. ARGV[1] retention (ms).
-- Returns {0} (also for a retry), or {-1} no such key, {-3} the key holds no
-- stock level, {-5} the id was applied otherwise, {-10} the level plus the
-- units out on open orders would pass 2^53-1; nothing changed.
if redis.call('EXISTS', KEYS[1]) == 1 then
  if same_lines(KEYS[1], 'R', 2, 1) then
    return {0}
  end
  return {-5}
end
local have, why = level(KEYS[2])
if not have then
  return {why}
end
if have + units_out(KEYS[3]) + tonumber(ARGV[3]) > MAX then
  return {-10}
end
redis.call('INCRBY', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[1], unpack(record_fields('t', 'R', 2, 1, {})))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {0}
