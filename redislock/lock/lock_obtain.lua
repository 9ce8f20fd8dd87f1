-- Obtains a lock for one owner and issues its fencing token.
-- KEYS[1] lock key; then, in the same hash tag, KEYS[2] its fencing counter
-- when ARGV[3] is '1' (without one the lock issues no token and leaves no
-- other key behind), and last, when ARGV[4] is '1', a key that must exist
-- for the lock to be taken (IfExists).
-- ARGV[1] owner token, ARGV[2] lease in milliseconds.
-- Returns the fencing token (>= 1; 1 without a counter) when obtained; nil
-- when the key that must exist does not, having created nothing; else minus
-- the holder's remaining lease in milliseconds (0 when unknown).
local fence = ARGV[3] == '1' and KEYS[2]
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[#KEYS]) == 0 then
  return false
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if not fence then
    return 1
  end
  local token = redis.pcall('INCR', fence)
  if type(token) == 'table' then
    -- A lock without a fencing token would be unsafe to use: give it back.
    redis.call('DEL', KEYS[1])
  end
  return token
end
-- go-redis resends a command whose reply was lost; the owner token lets the
-- resend recognise its own lock instead of reporting a stranger's. (pcall:
-- the key may hold a reentrant lock, a hash.)
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  if not fence then
    return 1
  end
  return tonumber(redis.call('GET', fence))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return 0
end
return -pttl
