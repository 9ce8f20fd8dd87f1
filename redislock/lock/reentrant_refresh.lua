-- Extends a reentrant lock's lease if, and only if, the owner holds it.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] new lease in milliseconds.
-- Returns 1 when extended, 0 when the lock is not the owner's.
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
