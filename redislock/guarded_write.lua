-- Writes a stock level on behalf of a lock holder, fenced: only while the
-- writer's fencing token is the newest issued for the SKU, i.e. nobody has
-- obtained the SKU's lock since. A holder whose lease ran out and was taken
-- over is refused, however late it wakes up.
-- KEYS[1] stock key, KEYS[2] fencing counter (same hash tag);
-- ARGV[1] new stock level, ARGV[2] writer's fencing token.
-- Returns 1 when written, 0 when fenced off, -1 when the stock key is gone.
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
