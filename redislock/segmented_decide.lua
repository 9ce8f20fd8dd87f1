-- Decides a gather recorded in the SKU's meta hash KEYS[1], field ARGV[1]:
-- a pending gather ('p') is committed (ARGV[2] 'c': the record goes, the
-- units it holds stay taken) or aborted ('a': the record stays, marked
-- 'a', until its holds have been given back). The gather commits itself;
-- a gather that finds another's record under the SKU's gather lock aborts
-- it — whichever comes first wins, so held units are never both sold and
-- given back.
-- Returns 1 when this call decided, 0 when the gather was aborted already,
-- -1 when there is no record (committed, or aborted and cleaned up).
local state = redis.call('HGET', KEYS[1], ARGV[1])
if state == 'p' then
  if ARGV[2] == 'c' then
    redis.call('HDEL', KEYS[1], ARGV[1])
  else
    redis.call('HSET', KEYS[1], ARGV[1], 'a')
  end
  return 1
end
if state == 'a' then
  return 0
end
return -1
