-- Reports the remaining lease of a lock the owner holds.
-- KEYS[1] lock key; ARGV[1] owner token.
-- Returns the lease in milliseconds, or -3 when the lock is not the owner's.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3
