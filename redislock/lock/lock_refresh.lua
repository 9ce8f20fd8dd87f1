-- Extends a lock's lease if, and only if, the owner still holds it; never
-- re-creates a lock that is gone.
-- KEYS[1] lock key; ARGV[1] owner token, ARGV[2] new lease in milliseconds.
-- Returns 1 when extended, 0 when the lock was not the owner's.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
