-- One line of a two-phase order (see orders_record.lua), in its SKU's slot:
-- KEYS[1] the stock level, KEYS[2] the SKU's holds, KEYS[3] the line record
-- "line:{sku}/<id>" = "<state><qty>:<nonce>", states
--   p  units out, their fate is the order record's to say: listed in holds
--      as "~<id>", due when the record may have decided (the attempt's
--      pending deadline w, or a hold's deadline d once the record says h);
--   a  units out, a Return in progress: due at once, so that should its
--      client die, the SKU side asks the record (returned: back; taken or
--      held: as before);
--   t  units out for good;  r  units added by a restock;
--   x  a tombstone: units back or never taken, and a late copy of this
--      attempt's take may still arrive (it must not land).
-- Each op is idempotent per order, SKU and attempt (nonce), so a client may
-- repeat any of them after a lost reply. A line left by an older attempt is
-- over: a new attempt begins only once the older one's record is gone.
-- ARGV[1] op, [2] order id, [3] nonce, then per op:
--   take     [4] qty [5] due in (us, from now by this server's clock) [6]
--            how to treat due remote holds (see decide_arg in
--            orders_lib.lua) [7] the expiry of the
--            attempt that sends it (us, its client's clock: see late in
--            orders_lib.lua) [8] the latest due time (us, the client's
--            clock): [5] counts from when the take lands, so a take held
--            on its way would make the line due past the record's deadline
--   restock  [4] qty [5] how long the line is kept (ms): the pending
--            window and the retention, so it outlives the record's
--            pending state [6] the expiry, as take's
--   undo     [4] tombstone ttl (ms): gives this attempt's (or an older
--            one's) units back and leaves a tombstone
--   finalize [4] retention (ms): p -> t; {-13} for a line a Return armed
--   arm      p, t or a -> a, due now (an armed line's grace starts again);
--            {-14} for no line record (a taken line past its retention)
--   unarm    [4] retention (ms): a -> t, for a taken order a Return
--            found past its retention
--   resolve  [4] retention (ms) [5] the record's state ("" none) [6] the
--            time it was read (us) [7] its hold deadline (us) [8] how long
--            a Return may take (us) [9] how long ago, at most, the client
--            asked for the record (us) [10] "1": the record was read by its
--            disarm op [11] tombstone ttl (ms) of a line whose attempt is
--            over [12] the hold deadline (us, the client's clock, as take's
--            [8]): applies what the record says, for the SKU side
-- Returns {0}; for resolve {1} when the line is settled (changed, or given
-- back by another call since it was found due), {2} when a Return
-- is deciding it, {3} when it may take the line back from a Return only
-- once the record is disarmed (read it so and resolve again); or {-1|-2|-3}
-- unknown / short / corrupt SKU, {-8, id...} see orders_decrement.lua,
-- {-10} restock past 2^53-1 with the units out counted, {-11} this attempt's line is a tombstone,
-- {-12} a newer attempt owns the line, {-13} see finalize, {-14} see arm,
-- {-16} a take or restock past its expiry, {-17, arg} see orders_decrement.lua.
-- Nothing changed on a negative reply.
local stock, holds, line = KEYS[1], KEYS[2], KEYS[3]
local op, id, nonce = ARGV[1], ARGV[2], ARGV[3]
local member = '~' .. id
local st, qty, owner
local changed = 0
do
  local v = call('GET', line)
  if v then
    st, qty, owner = string.match(v, '^(%a)(%d+):(.*)$')
  end
end

-- begun is when the attempt of nonce n began, by the record's clock.
local function begun(n)
  return tonumber(string.match(n, '^%d+')) or 0
end

local function put(s, q, n, ttl)
  if ttl then
    call('SET', line, s .. q .. ':' .. n, 'PX', ttl)
  else
    call('SET', line, s .. q .. ':' .. n)
  end
end

-- back gives the units of an open line back, once, and deletes the line
-- record, or leaves tombstone n for ttl ms.
local function back(n, ttl)
  changed = 1
  if st == 'p' or st == 't' or st == 'a' then
    call('INCRBY', stock, qty)
    move_back(holds, qty)
  end
  call('ZREM', holds, member)
  if ttl then
    put('x', qty or '0', n, ttl)
  else
    call('DEL', line)
  end
end

-- Units go back only onto a stock level (a missing key is created anew).
local open = st == 'p' or st == 't' or st == 'a'
if open and op ~= 'finalize' and op ~= 'arm' then
  local _, why = level(stock)
  if why == -3 then
    return {-3}
  end
end

if op == 'take' or op == 'restock' then
  if now_us() > tonumber(op == 'take' and ARGV[7] or ARGV[6]) then
    return {-16}
  end
  if st then
    if owner == nonce then
      if st == 'x' then
        return {-11}
      end
      return {0}
    end
    if begun(owner) > begun(nonce) then
      return {-12}
    end
  end
  local have, why = level(stock)
  if not have then
    return {why}
  end
  local q = tonumber(ARGV[4])
  if op == 'restock' then
    if have + units_out(holds) + q > MAX then
      return {-10}
    end
    if st then
      back(owner)
    end
    call('INCRBY', stock, ARGV[4])
    put('r', ARGV[4], nonce, ARGV[5])
    return {0}
  end
  local remote, _, min, skip = decide_arg(ARGV[6])
  local cursor
  have, _, cursor = reclaim(stock, holds, now_us(), have, q, 16, remote, min, skip)
  if open then
    have = have + tonumber(qty) -- the older attempt's, given back below
  end
  if have < q then
    if cursor then
      return {-17, '1:1:' .. cursor}
    end
    if remote and #remote > 0 then
      return {-8, unpack(remote)}
    end
    return {-2}
  end
  if st then
    back(owner)
  end
  call('DECRBY', stock, ARGV[4])
  move_out(holds, ARGV[4])
  put('p', ARGV[4], nonce)
  call('ZADD', holds, math.min(now_us() + tonumber(ARGV[5]), tonumber(ARGV[8])), member)
  return {0}
end

if op == 'undo' then
  if st and (owner == nonce or begun(owner) < begun(nonce)) then
    back(nonce, ARGV[4])
  elseif not st then
    put('x', '0', nonce, ARGV[4])
  end
elseif op == 'finalize' then
  if st == 'p' and owner == nonce then
    call('ZREM', holds, member)
    put('t', qty, nonce, ARGV[4])
  elseif st == 'a' and owner == nonce then
    -- A Return is deciding: the record may not be sealed under it.
    return {-13}
  end
elseif op == 'arm' then
  if (st == 'p' or st == 't' or st == 'a') and owner == nonce then
    put('a', qty, nonce)
    call('ZADD', holds, now_us(), member)
  elseif not st then
    return {-14}
  end
elseif op == 'unarm' then
  if st == 'a' and owner == nonce then
    call('ZREM', holds, member)
    put('t', qty, nonce, ARGV[4])
  end
elseif op == 'resolve' then
  local s = ARGV[5]
  if not st or st == 'x' then
    -- No units out: given back, by this call or another since the caller
    -- found the line due, so it is settled either way. A tombstone stays:
    -- a take of its attempt may still be on its way, from any caller
    -- that resumed the attempt.
    call('ZREM', holds, member)
    changed = 1
  elseif owner ~= nonce then
    -- The record no longer knows this line's attempt: if the attempt began
    -- before the record was read, it is over, and its units go back; the
    -- tombstone fences its takes still on their way.
    if begun(owner) < tonumber(ARGV[6]) then
      back(owner, ARGV[11])
    end
  elseif st == 'a' and s ~= 'r' and s ~= 'e' and
      now_us() - tonumber(ARGV[9] or 0) - tonumber(call('ZSCORE', holds, member) or 0) < tonumber(ARGV[8]) then
    -- A Return in progress: the record may decide it any moment, and a
    -- reader after that must find the line due, so it stays armed (and
    -- the reader asks again) until its client has had ARGV[8] to finish —
    -- counted to when the reader asked for the record, not to now, so
    -- that a view read before then (a reader stalled since) never keeps
    -- the units of an order a Return has decided meanwhile. Both times
    -- are this server's clock: the view's is now less its age, which the
    -- client measured from before it asked, so it errs early.
    changed = 2
  elseif st == 'a' and (s == 't' or s == 'h') and ARGV[10] ~= '1' then
    -- Past the grace, the Return may be slow rather than dead: the line
    -- leaves the holds only on a record read by its disarm op, which
    -- refuses the decision of every Return that read the record before.
    -- Such a Return armed this line after its read, so before this
    -- reader asked for the disarm less the grace: a line armed since
    -- (a retrying Return) is within the grace above and stays armed.
    return {3}
  elseif s == 't' then
    if st == 'p' or st == 'a' then
      changed = 1
      call('ZREM', holds, member)
      put('t', qty, nonce, ARGV[4])
    end
  elseif s == 'h' then
    -- Held until d: due again then (it was due at the pending deadline).
    -- d is of the record's clock: what crosses over is how long it had to
    -- go (d less the time of the read, both the record's), less the view's
    -- age; it is due then by this server's clock.
    -- Landing late, that comes out late too, so the due time is also
    -- capped by d in the client's clock (ARGV[12], see take): a reader
    -- past d must find the line due. When the cap has passed here (a
    -- client clock behind this one), the line stays due, and the reader
    -- decides without it: the record says held.
    local left = tonumber(ARGV[7]) - tonumber(ARGV[6])
    if (st == 'p' or st == 'a') and left > 0 then
      local now = now_us()
      local at = math.min(now + math.max(left - tonumber(ARGV[9] or 0), 0), tonumber(ARGV[12]))
      put('p', qty, nonce)
      call('ZADD', holds, at, member)
      changed = at > now and 1 or 0
    end
  elseif s == 'r' or s == 'e' then
    back(nonce, ARGV[4])
  elseif s ~= 'p' then
    back(nonce, ARGV[11]) -- undoing: as its undo would
  end
end
return {changed}
