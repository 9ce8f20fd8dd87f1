-- Take or Hold of an order whose keys share one slot: every line checked,
-- then every line taken and the order recorded, in this one script.
-- KEYS[1] the order record; KEYS[2i], KEYS[2i+1] line i's stock level and
-- holds (see orders_lib.lua); the order stream last, if any (a Take recorded
-- now appends its effect there: see stream_effect).
-- ARGV[1] kind "T" (take) or "H" (hold), [2] hold ttl (us), [3] retention
-- (ms), [4] how to treat due remote holds (see decide_arg), [5] the order id, then
-- (sku, qty) of each line from [6] on, then the attempt's fence point and
-- expiry (us, the client's clock) and the tombstone ttl (ms) of a refusal
-- (see late and refuse in orders_lib.lua).
-- Returns {0, state, deadline} for an order recorded now or before with the
-- same lines (state "t", "h", or "r"/"e": closed), or
--   {-1|-2|-3, i} line i's SKU is unknown / short / corrupt, nothing
--        changed but the ID's tombstone;
--   {-15, R} fenced by the refusal at R, {-16} past its expiry: nothing
--        changed;
--   {-5} the id was applied with other lines or as another call;
--   {-8, i, id...} line i is short unless due remote holds go back first;
--   {-17, arg} line i is short unless due local holds further on go back:
--        call again with arg as ARGV[4].
local rec = KEYS[1]
local kind, id = ARGV[1], ARGV[5]
local n, stream = order_keys()
local now = now_us()
local tail = 6 + 2 * n -- the fence point, then the expiry and the tombstone ttl

local function member(i)
  return ARGV[5 + 2 * i] .. ' ' .. id
end

local found = redis.call('HMGET', rec, 'k', X)
local stop = late(now, found[2], ARGV[tail], ARGV[tail + 1])
if stop then
  return stop
end
if found[1] then
  if not same_lines(rec, kind, 6, n) then
    return {-5}
  end
  local v = redis.call('HMGET', rec, 's', 'd')
  local s, d = v[1], v[2]
  if s == 'h' and now >= tonumber(d) then
    s = 'e' -- its units go back by the SKU side's reclaim or Order's
  end
  return {0, s, d}
end

local remote, from, min, skip = decide_arg(ARGV[4])
for i = 1, n do
  local stock, q = KEYS[2 * i], tonumber(ARGV[5 + 2 * i])
  local have, why = level(stock)
  if not have then
    refuse(rec, now, ARGV[tail + 2])
    return {why, i}
  end
  local _, cursor
  if from == i then
    have, _, cursor = reclaim(stock, KEYS[2 * i + 1], now, have, q, 16, remote, min, skip)
  else
    have, _, cursor = reclaim(stock, KEYS[2 * i + 1], now, have, q, 16, remote)
  end
  if have < q then
    if cursor then
      return {-17, '1:' .. i .. ':' .. cursor}
    end
    if remote and #remote > 0 then
      return {-8, i, unpack(remote)}
    end
    refuse(rec, now, ARGV[tail + 2])
    return {-2, i}
  end
end
if found[2] then
  redis.call('DEL', rec) -- the tombstone of a refusal this attempt was sent after
end

local s, d, ttl = 't', '0', tonumber(ARGV[3])
if kind == 'H' then
  s, d = 'h', int(now + tonumber(ARGV[2]))
  ttl = ttl + math.ceil(tonumber(ARGV[2]) / 1000)
end
for i = 1, n do
  redis.call('DECRBY', KEYS[2 * i], ARGV[5 + 2 * i])
  move_out(KEYS[2 * i + 1], ARGV[5 + 2 * i])
  if kind == 'H' then
    redis.call('ZADD', KEYS[2 * i + 1], d, member(i))
  end
end
redis.call('HSET', rec, unpack(record_fields(s, kind, 6, n, {'d', d})))
redis.call('PEXPIRE', rec, int(ttl))
if kind == 'T' then
  stream_effect(stream, 'T', id, 6, n)
end
return {0, s, d}
