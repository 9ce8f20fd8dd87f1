-- Atomic.SetStock: sets the stock level KEYS[1] to ARGV[1] units, whatever
-- the key held, unless the units out on open orders of the SKU (counted in
-- its holds KEYS[2], see orders_lib.lua) would then have no room to come
-- back within 2^53-1.
--
-- A hold due by now is back already: the level set replaces its units, so
-- none may come back on top of it later. So the level is set only by a
-- call that has first walked every due hold: the local ones are given back
-- (onto the level about to be replaced), and the ids of due remote ones
-- are returned for the client to resolve first, as Stock does. The walk
-- reads at most 16 pages of 64 a call and then returns its cursor, and the
-- client calls again from it: holds before the cursor stay settled, since
-- every hold added or moved later is due no earlier than then.
-- ARGV[2] "0" collect due remote holds, "1" pass over them (the client
-- has had their records asked, which say they are still held); either
-- followed by ":<score>:<skip>", the cursor a call before returned (see
-- reclaim in orders_lib.lua).
-- Returns {0, held}: the level set, and the units of the one-slot holds
-- left open then (held_units, as Atomic.Held reads them); or {-10, units
-- out}: the level not set; {-8, id...} due remote holds to resolve first;
-- {-17, arg} call again with arg as ARGV[2]. Only {0, held} set the level.
local stock, holds = KEYS[1], KEYS[2]
local mode, min, skip = string.match(ARGV[2], '^([01]):([^:]+):(%d+)$')
if not mode then
  mode, min, skip = ARGV[2], '0', '0'
end
skip = tonumber(skip)
local remote = {}
-- A key that holds no level has nowhere to give units back to: the due
-- holds leave it anyway, their units replaced with the rest of it.
-- (A missing key is created anew, as every give-back does.)
local have, why = level(stock)
local onto = have ~= nil or why == -1
local upto = int(now_us())
for page = 1, 16 do
  local due = call('ZRANGEBYSCORE', holds, min, upto, 'WITHSCORES', 'LIMIT', int(skip), '64')
  for i = 1, #due, 2 do
    local m, score = due[i], due[i + 1]
    if string.byte(m, 1) == 126 then -- "~": remote, passed over
      if mode == '0' and #remote < 64 then
        remote[#remote + 1] = string.sub(m, 2)
      end
      if score == min then
        skip = skip + 1
      else
        min, skip = score, 1
      end
    else
      local q = string.match(m, '^%d+')
      call('ZREM', holds, m)
      if onto then
        call('INCRBY', stock, q)
      end
      move_back(holds, q)
    end
  end
  if #remote >= 64 then
    break
  end
  if #due < 128 then
    if #remote > 0 then
      return {-8, unpack(remote)}
    end
    local out = units_out(holds)
    if out > MAX - tonumber(ARGV[1]) then
      return {-10, out}
    end
    call('SET', stock, ARGV[1])
    return {0, held_units(holds)}
  end
end
if #remote > 0 then
  return {-8, unpack(remote)}
end
return {-17, mode .. ':' .. min .. ':' .. int(skip)}
