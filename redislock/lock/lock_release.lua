-- Releases a lock if, and only if, the owner still holds it, and announces
-- the release to waiters.
-- KEYS[1] lock key; ARGV[1] owner token, ARGV[2] release channel, '' for
-- none (a Redlock's: nobody waits for it with Notify).
-- Returns 1 when released, 0 when the lock was not the owner's.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], KEYS[1])
  end
  return 1
end
return 0
