-- Writes a stock level on behalf of a lock holder, guarded: only while
-- KEYS[2] holds ARGV[2]. Two guards use it:
--   - fenced (Store.WriteFenced): KEYS[2] is the SKU's fencing counter and
--     ARGV[2] the writer's fencing token, so the write lands only while that
--     token is the newest issued, i.e. nobody has obtained the SKU's lock
--     since;
--   - owner-guarded (NewRedlockGuarded): KEYS[2] is this master's copy of
--     the SKU's lock and ARGV[2] the writer's owner token.
-- Either way a holder whose lease ran out and was taken over is refused,
-- however late it wakes up.
-- KEYS[1] stock key, KEYS[2] the guard (same hash tag);
-- ARGV[1] new stock level, ARGV[2] the value the guard must hold.
-- Returns 1 when written, 0 when refused, -1 when the stock key is gone.
-- (pcall: a lock key may hold a reentrant lock, a hash, which is no match.)
if redis.pcall('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
