-- Releases one hold of a reentrant lock; the key goes when the count
-- reaches zero, and only then are waiters told.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] release channel.
-- Returns the owner's remaining hold count (0: the lock is free), or -1 when
-- the owner does not hold the lock. (pcall: the key may hold a plain lock.)
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n > 0 then
  return n
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 0
