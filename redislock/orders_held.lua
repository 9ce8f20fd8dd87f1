-- Atomic.Held: the level in KEYS[1] and the units of the one-slot holds in
-- KEYS[2] (see orders_lib.lua), due ones included, read together without
-- giving any back, so that level + held does not move when a due hold is
-- reclaimed. Returns {level, held}, or {-1} no such key, {-3} the key holds
-- no stock level.
local have, why = level(KEYS[1])
if not have then
  return {why}
end
return {have, held_units(KEYS[2])}
