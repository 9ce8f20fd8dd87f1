-- Takes a batch of requests from the stock level in KEYS[1]: ARGV[1] says
-- how to treat due remote holds (see decide_arg in orders_lib.lua,
-- prepended with level.lua), ARGV[1+i] is the i-th request's quantity (a
-- validated 1..2^53-1 in decimal), in arrival order. Each request is
-- granted if it fits in what the requests before it left, else refused; a
-- refused request takes nothing, and the later ones may still fit. The
-- granted total is taken with one DECRBY. Holds due back (KEYS[2], see
-- orders_lib.lua) are only looked at when a request would be refused, and
-- then given back first, as orders_decrement.lua does for one request.
-- Returns
--   -1 the key does not exist (nothing is created),
--   -3 the key holds no stock level (see level.lua),
--   {-8, id...} due remote holds to resolve first, {-17, arg} call again
--      with arg as ARGV[1] (see orders_decrement.lua): nothing taken,
-- or {level before the batch, flags}: flags has one character per request,
-- '1' granted, '0' refused. Sums stay exact doubles: granted never exceeds
-- the level, itself at most 2^53-1. Every check comes before the one write.
local have, why = level(KEYS[1])
if not have then
  return why
end

local function grant()
  local granted, flags, short = 0, {}, false
  for i = 2, #ARGV do
    local qty = tonumber(ARGV[i])
    if qty <= have - granted then
      granted = granted + qty
      flags[i - 1] = '1'
    else
      flags[i - 1] = '0'
      short = true
    end
  end
  return granted, table.concat(flags), short
end

local granted, flags, short = grant()
if short then
  local need = 0
  for i = 2, #ARGV do
    need = need + tonumber(ARGV[i])
  end
  local remote, _, min, skip = decide_arg(ARGV[1])
  local cursor
  have, _, cursor = reclaim(KEYS[1], KEYS[2], now_us(), have, need, 0, remote, min, skip)
  granted, flags, short = grant()
  if short and cursor then
    return {-17, '1:1:' .. cursor}
  end
  if short and remote and #remote > 0 then
    return {-8, unpack(remote)}
  end
end
if granted > 0 then
  -- %d, not tostring: Lua prints large numbers as "1e+15", which DECRBY refuses.
  redis.call('DECRBY', KEYS[1], string.format('%d', granted))
end
return {have, flags}
