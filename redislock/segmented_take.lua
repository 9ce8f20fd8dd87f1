-- Takes up to ARGV[1] units from segment KEYS[1] for one gather and records
-- them in the gather's hold key KEYS[2] (same hash tag), which lives for
-- ARGV[2] milliseconds unless the gather gives the units back (the hold goes
-- with them) or commits (the hold is dropped, the units stay taken).
-- Returns the units taken (0 when the segment is empty), or -1 / -3 as
-- level() (level.lua, prepended) says. A resend of the same take — go-redis
-- resends a command whose reply was lost — finds the hold and returns it,
-- so nothing is taken twice.
local held = redis.call('GET', KEYS[2])
if held then
  return tonumber(held)
end
local have, why = level(KEYS[1])
if not have then
  return why
end
local take = math.min(have, tonumber(ARGV[1]))
if take > 0 then
  local units = string.format('%d', take)
  redis.call('DECRBY', KEYS[1], units)
  redis.call('SET', KEYS[2], units, 'PX', ARGV[2])
end
return take
