-- Gives the units a gather holds in KEYS[2] back to segment KEYS[1] (same
-- hash tag), once: the hold goes with them, so a repeated give-back (a
-- resend, or a recovering gather racing the gather's own abort) returns
-- nothing more. A segment deleted meanwhile (SetStock with fewer segments)
-- is not re-created.
-- Returns the units given back, 0 when there was no hold.
local held = redis.call('GET', KEYS[2])
if not held then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCRBY', KEYS[1], held)
end
redis.call('DEL', KEYS[2])
return tonumber(held)
