-- Takes a batch of requests from the stock level in KEYS[1]: ARGV[i] is
-- the i-th request's quantity (a validated 1..2^53-1 in decimal), in
-- arrival order. Each request is granted if it fits in what the requests
-- before it left, else refused; a refused request takes nothing, and the
-- later ones may still fit. The granted total is taken with one DECRBY.
-- Returns
--   -1 the key does not exist (nothing is created),
--   -3 the key holds no stock level (see level.lua, prepended),
-- or {level before the batch, flags}: flags has one character per request,
-- '1' granted, '0' refused. Sums stay exact doubles: granted never exceeds
-- the level, itself at most 2^53-1. Every check comes before the one write.
local have, why = level(KEYS[1])
if not have then
  return why
end
local granted = 0
local flags = {}
for i = 1, #ARGV do
  local qty = tonumber(ARGV[i])
  if qty <= have - granted then
    granted = granted + qty
    flags[i] = '1'
  else
    flags[i] = '0'
  end
end
if granted > 0 then
  -- %d, not tostring: Lua prints large numbers as "1e+15", which DECRBY refuses.
  redis.call('DECRBY', KEYS[1], string.format('%d', granted))
end
return {have, table.concat(flags)}
