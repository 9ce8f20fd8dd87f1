-- place: a Take or Hold of an order whose keys share one slot, every line
-- checked, then every line taken and the order recorded. orders_place.lua
-- runs one order through it, orders_batch.lua each order of a batch, in
-- arrival order; it is prepended to both after orders_lib.lua.
--
-- o is the order: rec its record key, kind "T" (take) or "H" (hold), id,
-- ttl the hold's ttl (us, decimal), retention (ms, decimal), decide how to treat due
-- remote holds (see decide_arg), lines a list of {sku, qty, stock key,
-- holds key} (qty the decimal the client sent), fence and expiry the
-- attempt's (us, the client's clock), tomb the tombstone ttl (ms) of a
-- refusal (see late and refuse), stream the order stream or nil (a Take
-- recorded now appends its effect there: see stream_effect).
--
-- now is the server's time, read once per script. memo, nil for one order,
-- is what orders_batch.lua keeps across its orders, so that each SKU costs
-- the batch one read and one write however many of its orders take it:
--   level[stock]  the level as the batch has left it so far;
--   swept[holds]  the SKU's due holds were reclaimed by this batch (at now:
--                 a hold placed since is due later), so an order that fits
--                 needs no second look;
--   take[stock]   the units the batch took (less those it gave back), to
--                 DECRBY and count out once (orders_batch.lua's flush);
--   skus          the stock keys in the order the batch first took them,
--                 and holds[stock] each one's holds key.
-- Returns what orders_place.lua returns.

-- note has the batch of memo take q units of stock (whose holds are holds)
-- — give them back when q is negative — at its flush.
local function note(memo, stock, holds, q)
  if not memo.level[stock] then
    memo.level[stock] = level(stock) or 0 -- a missing key is created anew
  end
  memo.level[stock] = memo.level[stock] - q
  if not memo.take[stock] then
    memo.take[stock] = 0
    memo.holds[stock] = holds
    memo.skus[#memo.skus + 1] = stock
  end
  memo.take[stock] = memo.take[stock] + q
end

local function place(o, now, memo)
  local rec, ls = o.rec, o.lines
  local found = call('HMGET', rec, 'k', X)
  local stop = late(now, found[2], o.fence, o.expiry)
  if stop then
    return stop
  end
  if found[1] then
    if not same_lines(rec, o.kind, ls) then
      return {-5}
    end
    local v = call('HMGET', rec, 's', 'd')
    local s, d = v[1], v[2]
    if s == 'h' and now >= tonumber(d) then
      s = 'e' -- its units go back by the SKU side's reclaim or Order's
    end
    return {0, s, d}
  end

  local remote, from, min, skip = decide_arg(o.decide)
  local left = o.stream and {} -- each line's level once the order has taken it
  for i = 1, #ls do
    local l = ls[i]
    local stock, holds, q = l[3], l[4], num[l[2]]
    local have, why
    if memo then
      have = memo.level[stock]
    end
    if not have then
      have, why = level(stock)
    end
    if not have then
      refuse(rec, now, o.tomb)
      return {why, i}
    end
    local cursor
    -- The first look at a SKU's holds in a batch is also the read that
    -- fails on a holds key of another type, under this order's pcall and
    -- before any write: the flush's writes to it then cannot fail.
    if not (memo and memo.swept[holds]) or have < q then
      local _
      if from == i then
        have, _, cursor = reclaim(stock, holds, now, have, q, 16, remote, min, skip)
      else
        have, _, cursor = reclaim(stock, holds, now, have, q, 16, remote)
      end
      if memo then
        memo.swept[holds] = true
      end
    end
    if memo then
      memo.level[stock] = have
    end
    if have < q then
      if cursor then
        return {-17, '1:' .. i .. ':' .. cursor}
      end
      if remote and #remote > 0 then
        return {-8, i, unpack(remote)}
      end
      refuse(rec, now, o.tomb)
      return {-2, i}
    end
    if left then
      left[i] = have - q
    end
  end
  if found[2] then
    call('DEL', rec) -- the tombstone of a refusal this attempt was sent after
  end

  local s, d, ttl = 't', '0', o.retention
  if o.kind == 'H' then
    s, d = 'h', int(now + num[o.ttl])
    ttl = int(num[ttl] + math.ceil(num[o.ttl] / 1000))
  end
  for j = 1, #ls do
    local l = ls[j]
    local stock, holds = l[3], l[4]
    if memo then
      note(memo, stock, holds, num[l[2]])
    else
      call('DECRBY', stock, l[2])
      move_out(holds, l[2])
    end
    if o.kind == 'H' then
      call('ZADD', holds, d, l[2] .. ' ' .. o.id)
    end
  end
  call('HSET', rec, unpack(record_fields(s, o.kind, ls, 'd', d)))
  call('PEXPIRE', rec, ttl)
  if o.kind == 'T' then
    stream_effect(o.stream, 'T', o.id, ls, left)
  end
  return {0, s, d}
end
