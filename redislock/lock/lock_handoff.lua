-- Hands a lock from its owner straight to a waiter of the same Client, in
-- place of the owner's release and the waiter's obtain: the lock is never
-- free in between, nothing is announced, and it takes one round trip.
-- KEYS[1] lock key; KEYS[2], when ARGV[4] is '1', the waiter's fencing
-- counter (same hash tag).
-- ARGV[1] owner token, ARGV[2] the waiter's owner token, ARGV[3] the
-- waiter's lease in milliseconds, ARGV[5] the release channel.
-- Returns the waiter's fencing token (>= 1; 1 without a counter) when handed
-- over; minus it when the lock was the waiter's already (a resend after a
-- lost reply, or the owner's lease ran out and the waiter took the lock
-- itself): the owner did not release it then; 0 when the lock was neither
-- (nothing done). (pcall: the key may hold a reentrant lock, a hash.)
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  if ARGV[4] ~= '1' then
    return 1
  end
  local token = redis.pcall('INCR', KEYS[2])
  if type(token) == 'table' then
    -- As in obtain: a lock without a fencing token would be unsafe. Free
    -- it, and tell the waiters.
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', ARGV[5], KEYS[1])
  end
  return token
end
if v == ARGV[2] then
  if ARGV[4] ~= '1' then
    return -1
  end
  return -tonumber(redis.call('GET', KEYS[2]))
end
return 0
