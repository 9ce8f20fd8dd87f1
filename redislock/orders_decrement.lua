-- Atomic.Decrement: takes ARGV[1] units from the stock level in KEYS[1],
-- all or nothing, and never refuses while holds due back (KEYS[2], see
-- orders_lib.lua) could cover it: those are given back first. Holds are
-- only looked at when the level alone is short, so a plain decrement costs
-- what atomic.lua does.
-- ARGV[2] says how to treat the due remote holds (see decide_arg in
-- orders_lib.lua): "0" report them, "1…" decide without them (the client
-- has asked their order records, which say they are still held).
-- Returns {units left} or {-1} no such key, {-2} too few units, {-3} the key
-- holds no stock level, {-8, id...} due remote holds to resolve first,
-- {-17, arg} call again with arg as ARGV[2] (see orders_place.lua).
local have, why = level(KEYS[1])
if not have then
  return {why}
end
local q = tonumber(ARGV[1])
if have < q then
  local remote, _, min, skip = decide_arg(ARGV[2])
  local cursor
  have, _, cursor = reclaim(KEYS[1], KEYS[2], now_us(), have, q, 0, remote, min, skip)
  if have < q then
    if cursor then
      return {-17, '1:1:' .. cursor}
    end
    if remote and #remote > 0 then
      return {-8, unpack(remote)}
    end
    return {-2}
  end
end
return {call('DECRBY', KEYS[1], ARGV[1])}
