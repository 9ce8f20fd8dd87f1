-- Releases a lock if, and only if, the owner still holds it, and announces
-- the release to waiters.
-- KEYS[1] lock key; ARGV[1] owner token, ARGV[2] release channel.
-- Returns 1 when released, 0 when the lock was not the owner's.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return 1
end
return 0
