-- Helpers of the Orders scripts, prepended to each of them after level.lua.

-- The globals a script reads most, as locals: a global costs a table lookup
-- at each use, a local or upvalue none.
local call, KEYS, ARGV, tonumber = redis.call, KEYS, ARGV, tonumber

-- Times are microseconds of the server's own clock (TIME), never the
-- client's: a deadline is compared with the clock of the Redis that keeps
-- it. 1.7e15 us is well inside the 2^53 a Lua number holds exactly, and a
-- sorted set score is a double too.
--
-- A SKU's held units are listed in the sorted set KEYS "holds:{sku}", scored
-- by the time they are due back:
--   "<qty> <order id>"  a hold whose order record shares the SKU's slot: the
--                       SKU side gives its units back alone when due;
--   "~<order id>"       a line of an order recorded in another slot (the
--                       two-phase protocol): its line record "line:{sku}<id>"
--                       has the units, and only the order record may say
--                       whether they go back, so the SKU side reports it to
--                       the client instead.
-- A SKU's units out on open orders — held or taken, one-slot or two-phase —
-- are counted in its holds as well, as the member OUT scored minus their
-- number (no member: none), so that Restock and SetStock can refuse a
-- level that would leave them no room to come back within 2^53-1: a
-- Return is never refused. Due holds are scored by time, from 0 up, so the
-- reclaim never meets it. (A taken order whose record retention dropped
-- stays counted: its units can no longer come back, but nothing tells the
-- SKU side. The count errs on the side that refuses.)
local OUT = '#out'
local MAX = 9007199254740991

local function units_out(holds)
  return -(tonumber(call('ZSCORE', holds, OUT)) or 0)
end

-- move_out counts q more units of holds' SKU out, q the decimal of a
-- qty. A take's numbers cross into Redis as strings and its float reply
-- stays unread: Lua formats a number argument (%.17g) and parses a float
-- reply (strtod) at about the cost of a redis.call each.
local function move_out(holds, q)
  call('ZINCRBY', holds, '-' .. q, OUT)
end

-- held_units sums the units of the one-slot holds in holds, due ones
-- included (remote ones, "~id", and OUT's negative score are not).
local function held_units(holds)
  local held = 0
  for _, m in ipairs(call('ZRANGEBYSCORE', holds, 0, '+inf')) do
    local q = string.match(m, '^%d+')
    if q then
      held = held + tonumber(q)
    end
  end
  return held
end

-- move_back counts q units of holds' SKU back (q as move_out's).
local function move_back(holds, q)
  if tonumber(call('ZINCRBY', holds, q, OUT)) >= 0 then
    call('ZREM', holds, OUT)
  end
end

local function now_us()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function int(n)
  return string.format('%d', n)
end

-- num[s] is tonumber(s), converted once per script for each distinct s:
-- for the decimals a batch repeats (quantities, a hold's ttl, indexes),
-- each of which strtod would parse again at every use.
local num = setmetatable({}, {__index = function(t, s)
  local n = tonumber(s)
  t[s] = n
  return n
end})

-- COUNTS spells the small counts a record keeps (its lines): a number
-- argument would be formatted by %.17g.
local COUNTS = {'1', '2', '3', '4', '5', '6', '7', '8', '9'}

-- decide_arg parses a SKU-side script's decide argument: "0" collect the
-- due remote holds; "1" decide without them; "1:<i>:<score>:<skip>" decide
-- without them, line i's holds walked on from the cursor (see reclaim) a
-- call before returned. It returns the table to collect remote ids in (nil
-- when deciding without), and the cursor's line, score and skip.
local function decide_arg(a)
  if a == '0' then
    return {}, 0
  end
  local i, min, skip = string.match(a, '^1:(%d+):([^:]+):(%d+)$')
  if i then
    return nil, tonumber(i), min, tonumber(skip)
  end
  return nil, 0
end

local last_now, last_upto -- now as reclaim last spelled it: once per script

-- reclaim gives back to stock, whose level is have, the units of the local
-- holds in holds due by now, oldest first, 64 at a time, and, unless
-- remote is nil (the caller decides without them), appends the ids of due
-- remote ones to remote (at most 64). It examines at least budget due
-- holds (when there are that many) and goes on while have < need, so a
-- refusal is only ever decided once every due local hold is back; but
-- while have < need it stops at 64 remote ids (the caller has them
-- resolved first and calls again), and, deciding without them, after 16
-- pages: then it returns the cursor to walk on from in another call, so
-- one call reads a bounded number of pages whatever the number of due
-- remote holds. It walks by that cursor (the score last passed, and how
-- many remote holds of that score it passed; from min and skip, when
-- given), not by a growing offset, so each page costs its own size. It
-- returns the new level, whether due holds may remain after it gave some
-- back (a caller that must see every one calls again), and the cursor
-- "<score>:<skip>" when it stopped short of need to go on in another call.
local function reclaim(stock, holds, now, have, need, budget, remote, min, skip)
  local examined, pages, gave = 0, 0, false
  if now ~= last_now then
    last_now, last_upto = now, int(now)
  end
  local upto = last_upto
  min, skip = min or '0', skip or 0
  -- Mostly nothing is due: a count, four arguments and an integer reply,
  -- says so for less than the page read below.
  if call('ZCOUNT', holds, '0', upto) == 0 then
    return have, false
  end
  while true do
    local due = call('ZRANGEBYSCORE', holds, min, upto, 'WITHSCORES', 'LIMIT', skip == 0 and '0' or int(skip), '64')
    local n = #due / 2
    examined, pages = examined + n, pages + 1
    for i = 1, #due, 2 do
      local m, score = due[i], due[i + 1]
      if string.byte(m, 1) == 126 then -- "~": remote, passed over
        if remote and #remote < 64 then
          remote[#remote + 1] = string.sub(m, 2)
        end
        if score == min then
          skip = skip + 1
        else
          min, skip = score, 1
        end
      else
        local q = string.match(m, '^%d+')
        call('ZREM', holds, m)
        call('INCRBY', stock, q)
        move_back(holds, q)
        have = have + tonumber(q)
        gave = true
      end
    end
    if n < 64 then
      return have, false
    end
    if have >= need and examined >= budget or have < need and remote and #remote >= 64 then
      return have, gave
    end
    if have < need and not remote and pages >= 16 then
      return have, gave, min .. ':' .. int(skip)
    end
  end
end

-- A refusal is final against a late attempt (orders_fence.go): an attempt
-- that may record an order carries its fence point and its expiry (us, its
-- client's clock), and a refusal leaves its time in the field X of the
-- order's record key, a hash with no other field then, kept for ttl ms.
local X = 'x'

-- late returns the reply of an attempt with fence point fence and expiry
-- expiry that must do nothing — {-16} past its expiry, {-15, R} fenced by
-- the refusal at R, tomb the record's X field — or nil.
local function late(now, tomb, fence, expiry)
  if now > tonumber(expiry) then
    return {-16}
  end
  if tomb and tonumber(fence) <= tonumber(tomb) then
    return {-15, tonumber(tomb)}
  end
  return nil
end

-- refuse leaves the tombstone of a refusal at now under the record rec,
-- which holds no other field, for ttl ms.
local function refuse(rec, now, ttl)
  call('HSET', rec, X, int(now))
  call('PEXPIRE', rec, ttl)
end

-- An order's lines are a list of {sku, qty} pairs, qty as the decimal
-- string the client sent (a record keeps it verbatim); argv_lines reads n
-- of them from ARGV index first on.
local function argv_lines(first, n)
  local ls = {}
  for i = 0, n - 1 do
    ls[i + 1] = {ARGV[first + 2 * i], ARGV[first + 2 * i + 1]}
  end
  return ls
end

-- read_lines reads the fields f of the order record rec and its lines in
-- one HMGET: it returns the values of f, and whether the record was
-- applied with the lines ls.
local function read_lines(rec, ls, f)
  local n = #f
  local q = {unpack(f)}
  q[n + 1] = 'c'
  for j = 1, #ls do
    local l = ls[j]
    q[#q + 1] = '=' .. l[1]
  end
  local v = call('HMGET', rec, unpack(q))
  if tonumber(v[n + 1]) ~= #ls then
    return v, false
  end
  for i = 1, #ls do
    local l = ls[i]
    if v[n + 1 + i] ~= l[2] then
      return v, false
    end
  end
  return v, true
end

-- same_lines reports whether the order record rec was applied as kind with
-- the lines ls.
local function same_lines(rec, kind, ls)
  local v, same = read_lines(rec, ls, {'k'})
  return same and v[1] == kind
end

-- record_fields returns the HSET arguments of a new order record: state s,
-- kind, the lines ls, and the extra field/value pairs after them.
local function record_fields(s, kind, ls, ...)
  local f = {'s', s, 'k', kind, 'c', COUNTS[#ls] or #ls, ...}
  for j = 1, #ls do
    local l = ls[j]
    f[#f + 1] = '=' .. l[1]
    f[#f + 1] = l[2]
  end
  return f
end

-- The scripts that apply an order's effects (orders_place.lua,
-- orders_act.lua) take the stream of WithOrderStream, when there is one, as
-- their last key, after the record and the lines' (stock, holds) pairs: so
-- an even number of keys means a stream.
local function order_keys()
  local n = math.floor((#KEYS - 1) / 2)
  if #KEYS % 2 == 0 then
    return n, KEYS[#KEYS]
  end
  return n, nil
end

-- stream_effect appends to stream, when there is one, the final effect op
-- ("T": taken for good, "R": returned after it was) of the order id with
-- the lines ls ("=<sku>": qty), and with left, when given, each line's
-- stock level right after the effect ("^<sku>": units; a consumer orders
-- a take behind the returns before it only when it may need their units).
local function stream_effect(stream, op, id, ls, left)
  if not stream then
    return
  end
  local f = {'o', op, 'i', id}
  for i = 1, #ls do
    local l = ls[i]
    f[#f + 1] = '=' .. l[1]
    f[#f + 1] = l[2]
    if left and left[i] then
      f[#f + 1] = '^' .. l[1]
      f[#f + 1] = int(left[i])
    end
  end
  call('XADD', stream, '*', unpack(f))
end
