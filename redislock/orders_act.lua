-- Confirm, Return or Order of an order whose keys share one slot, read
-- before by orders_read.lua so that its lines' keys are declared here.
-- KEYS[1] the order record; KEYS[2i], KEYS[2i+1] line i's stock level and
-- holds; the order stream last, if any (a hold confirmed now appends a take,
-- a taken order returned now a return: see stream_effect). ARGV[1]
-- "confirm", "return" or "order", [2] retention (ms), [3] the order id,
-- then (sku, qty) of each line from [4] on.
--
-- A held line's units are out while its member is in the SKU's holds; the
-- one ZREM that removes it decides, once, whether they come back (reclaim,
-- expiry, Return: INCRBY) or stay (Confirm). So a hold is expired when its
-- deadline has passed or the SKU side has reclaimed a line.
-- Returns {0, state, deadline}, or {-3, i} line i's stock key holds no
-- level (nothing changed), {-5} a restock's id, {-6, state, deadline}
-- Confirm of a closed order, {-7} no record, {-9} the record is not the one
-- read (read it again).
local rec, op, id = KEYS[1], ARGV[1], ARGV[3]
local n, stream = order_keys()
local v = redis.call('HMGET', rec, 's', 'k', 'd')
local s, k, d = v[1], v[2], v[3]
if not s then
  return {-7}
end
if k == 'R' then
  return {-5}
end
local ls = argv_lines(4, n)
if not same_lines(rec, k, ls) then
  return {-9}
end

local function member(i)
  return ARGV[3 + 2 * i] .. ' ' .. id
end

-- give_back returns the units of every line still held, once.
local function give_back()
  for i = 1, n do
    if redis.call('ZREM', KEYS[2 * i + 1], member(i)) == 1 then
      redis.call('INCRBY', KEYS[2 * i], ARGV[3 + 2 * i])
      move_back(KEYS[2 * i + 1], ARGV[3 + 2 * i])
    end
  end
end

local function set(state)
  s = state
  redis.call('HSET', rec, 's', s)
  redis.call('PEXPIRE', rec, ARGV[2])
end

-- Units go back only onto stock levels (a missing key is created anew).
if s == 'h' or (s == 't' and op == 'return') then
  for i = 1, n do
    local _, why = level(KEYS[2 * i])
    if why == -3 then
      return {-3, i}
    end
  end
end

if s == 'h' then
  local live = now_us() < tonumber(d)
  for i = 1, n do
    if live and not redis.call('ZSCORE', KEYS[2 * i + 1], member(i)) then
      live = false
    end
  end
  if not live then
    give_back()
    set('e')
  end
end

if op == 'confirm' then
  if s == 'h' then
    for i = 1, n do
      redis.call('ZREM', KEYS[2 * i + 1], member(i))
    end
    set('t')
    stream_effect(stream, 'T', id, ls)
  elseif s ~= 't' then
    return {-6, s, d}
  end
elseif op == 'return' then
  if s == 'h' then
    give_back()
    set('r')
  elseif s == 't' then
    for i = 1, n do
      redis.call('INCRBY', KEYS[2 * i], ARGV[3 + 2 * i])
      move_back(KEYS[2 * i + 1], ARGV[3 + 2 * i])
    end
    set('r')
    stream_effect(stream, 'R', id, ls)
  end
end
return {0, s, d}
