-- act: Confirm, Return or Order of an order whose keys share one slot, read
-- before so that its lines' keys are declared. orders_act.lua runs one
-- order through it, orders_batch.lua the Confirms and Returns of a batch;
-- it is prepended to both after orders_lib.lua (and orders_placing.lua,
-- whose memo and note it shares).
--
-- o is the order: rec its record key, op "confirm", "return" or "order",
-- id, retention (ms, decimal), lines a list of {sku, qty, stock key, holds
-- key}, stream the order stream or nil (a hold confirmed now appends a
-- take, a taken order returned now a return: see stream_effect). now is
-- the server's time (nil: read it when needed); memo is place's (nil for
-- one order).
--
-- A held line's units are out while its member is in the SKU's holds; the
-- one ZREM that removes it decides, once, whether they come back (reclaim,
-- expiry, Return: INCRBY) or stay (Confirm). So a hold is expired when its
-- deadline has passed or the SKU side has reclaimed a line.
-- Returns {0, state, deadline}, or {-3, i} line i's stock key holds no
-- level (nothing changed), {-5} a restock's id, {-6, state, deadline}
-- Confirm of a closed order, {-7} no record, {-9} the record is not the one
-- read (read it again).
local function act(o, now, memo)
  local rec, op, id, ls = o.rec, o.op, o.id, o.lines
  local v, same = read_lines(rec, ls, {'s', 'k', 'd'})
  local s, k, d = v[1], v[2], v[3]
  if not s then
    return {-7}
  end
  if k == 'R' then
    return {-5}
  end
  if not same then
    return {-9}
  end

  local function member(l)
    return l[2] .. ' ' .. id
  end

  -- back gives line l's units back to its stock.
  local function back(l)
    if memo then
      note(memo, l[3], l[4], -num[l[2]])
    else
      call('INCRBY', l[3], l[2])
      move_back(l[4], l[2])
    end
  end

  -- remove takes each line's member out of its SKU's holds: the one ZREM
  -- that decides its units. It returns the lines it removed, and whether
  -- every member was there (one gone was reclaimed by the SKU side).
  local function remove()
    local removed, all = {}, true
    for j = 1, #ls do
      local l = ls[j]
      if call('ZREM', l[4], member(l)) == 1 then
        removed[#removed + 1] = l
      else
        all = false
      end
    end
    return removed, all
  end

  -- give_back returns the units of the lines it is handed, once.
  local function give_back(removed)
    for j = 1, #removed do
      back(removed[j])
    end
  end

  local function set(state)
    s = state
    call('HSET', rec, 's', s)
    call('PEXPIRE', rec, o.retention)
  end

  -- Units go back only onto stock levels (a missing key is created anew).
  -- left is each line's level, for a hold confirmed now (stream_effect).
  local left = {}
  if s == 'h' or (s == 't' and op == 'return') then
    for i = 1, #ls do
      local l = ls[i]
      left[i] = memo and memo.level[l[3]]
      if not left[i] then
        local have, why = level(l[3])
        if why == -3 then
          return {-3, i}
        end
        left[i] = have
        if memo then
          memo.level[l[3]] = have -- untouched by the batch so far: its level
        end
      end
    end
  end

  if s == 'h' then
    local live = (now or now_us()) < tonumber(d)
    if live and op ~= 'order' then
      -- A Confirm or Return of a hold in time decides on remove alone: a
      -- member already gone means the hold expired, and the lines removed
      -- here go back with it.
      local removed, all = remove()
      if all and op == 'confirm' then
        set('t')
        stream_effect(o.stream, 'T', id, ls, left)
        return {0, s, d}
      end
      give_back(removed)
      set(all and 'r' or 'e')
      if op == 'confirm' then
        return {-6, s, d}
      end
      return {0, s, d}
    end
    for j = 1, #ls do
      local l = ls[j]
      if live and not call('ZSCORE', l[4], member(l)) then
        live = false
      end
    end
    if not live then
      give_back(remove())
      set('e')
    end
  end

  if op == 'confirm' then
    if s ~= 't' then
      return {-6, s, d}
    end
  elseif op == 'return' and s == 't' then
    give_back(ls)
    set('r')
    stream_effect(o.stream, 'R', id, ls)
  end
  return {0, s, d}
end
