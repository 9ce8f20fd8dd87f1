-- Obtains or re-enters a reentrant lock: a hash of owner -> hold count.
-- KEYS[1] lock key, KEYS[2] fencing counter (same hash tag);
-- ARGV[1] owner, ARGV[2] lease in milliseconds.
-- Returns the fencing token (>= 1) when obtained or re-entered, else minus
-- the holder's remaining lease in milliseconds (0 when unknown).
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local token = redis.pcall('INCR', KEYS[2])
  if type(token) == 'table' then
    redis.call('DEL', KEYS[1])
  end
  return token
end
if kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  -- A nested acquisition may lengthen the lease, never shorten the outer one's.
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  -- The counter moves only when a lock goes from free to held, so it still
  -- holds the token of this owner's outermost acquisition.
  return tonumber(redis.call('GET', KEYS[2]))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return 0
end
return -pttl
