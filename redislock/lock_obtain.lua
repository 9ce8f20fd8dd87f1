-- Obtains a lock for one owner and issues its fencing token.
-- KEYS[1] lock key, KEYS[2] fencing counter (same hash tag) — optional: a
-- lock obtained without it issues no token and leaves no other key behind;
-- ARGV[1] owner token, ARGV[2] lease in milliseconds.
-- Returns the fencing token (>= 1; 1 without a counter) when obtained, else
-- minus the holder's remaining lease in milliseconds (0 when unknown).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if not KEYS[2] then
    return 1
  end
  local token = redis.pcall('INCR', KEYS[2])
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
  if not KEYS[2] then
    return 1
  end
  return tonumber(redis.call('GET', KEYS[2]))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return 0
end
return -pttl
