-- A batch of orders whose keys all share one slot — Takes and Holds, each
-- applied by place (orders_placing.lua), Confirms and Returns, each by act
-- (orders_acting.lua) — in arrival order, all or nothing per order, as
-- orders_place.lua and orders_act.lua would one after the other: the same
-- records, holds and refusals. The batch reads TIME once, and each SKU's
-- level and due holds once; the units it takes or gives back of a SKU are
-- applied and counted once at the end (flush). Each order runs under pcall,
-- so that an error of one (a key of the wrong type) fails it alone; its
-- writes come after every read that can fail, so it wrote nothing but what
-- reclaim gave back.
--
-- KEYS: the m orders' records, then (stock level, holds) of each of the k
-- SKUs the batch names, then the order stream, if any. ARGV[1] m, [2] k, [3] retention (ms), [4] the
-- call's fence point (us, the client's clock), [5] the tombstone ttl (ms)
-- of a refusal, then the k SKUs, then each order: op "T" take, "H" hold,
-- "C" confirm or "R" return, id, hold ttl (us), expiry (us, the client's
-- clock), n, then n (SKU index 1..k, qty) pairs: a Take's or Hold's lines,
-- or the lines a Confirm or Return read in the record.
-- Returns three elements per order, flat (a nested table costs Redis a
-- deferred length and a probe for each reply type): the first three of
-- orders_place.lua's reply (due remote holds reported, never decided
-- without: the client runs such an order alone, so their ids are left out)
-- or of orders_act.lua's, or -19 and a message for an order that failed
-- with an error; false where the reply is shorter.
local m, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local retention, fence, tomb = ARGV[3], ARGV[4], ARGV[5]
local stream = KEYS[m + 2 * k + 1]
local now = now_us()
local memo = {level = {}, swept = {}, take = {}, holds = {}, skus = {}}
local acts = {C = 'confirm', R = 'return'}
local out = {}
-- One table per kind of call, its order's fields set anew for each order:
-- place and act keep nothing of it.
local acting = {retention = retention, stream = stream}
local placing = {retention = retention, decide = '0', fence = fence, tomb = tomb, stream = stream}
-- line[s] is the batch's last line of SKU s, {sku, qty, stock key, holds
-- key}: place and act only read a line, so the next order's line of that
-- SKU and qty is the same table.
local line = {}
local a = 6 + k
for j = 1, m do
  local op, n = ARGV[a], num[ARGV[a + 4]]
  local ls = {}
  for i = 1, n do
    local s, q = num[ARGV[a + 3 + 2 * i]], ARGV[a + 4 + 2 * i]
    local l = line[s]
    if not l or l[2] ~= q then
      l = {ARGV[5 + s], q, KEYS[m + 2 * s - 1], KEYS[m + 2 * s]}
      line[s] = l
    end
    ls[i] = l
  end
  local ok, r
  if acts[op] then
    acting.rec, acting.op, acting.id, acting.lines = KEYS[j], acts[op], ARGV[a + 1], ls
    ok, r = pcall(act, acting, now, memo)
  else
    placing.rec, placing.kind, placing.id, placing.ttl, placing.expiry, placing.lines = KEYS[j], op, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ls
    ok, r = pcall(place, placing, now, memo)
  end
  local o = 3 * j
  if ok then
    out[o - 2], out[o - 1], out[o] = r[1], r[2] or false, r[3] or false
  else
    out[o - 2], out[o - 1], out[o] = -19, type(r) == 'table' and r.err or tostring(r), false
  end
  a = a + 5 + 2 * n
end
for j = 1, #memo.skus do
  local stock = memo.skus[j]
  local q = memo.take[stock]
  if q > 0 then
    q = int(q)
    call('DECRBY', stock, q)
    move_out(memo.holds[stock], q)
  elseif q < 0 then
    q = int(-q)
    call('INCRBY', stock, q)
    move_back(memo.holds[stock], q)
  end
end
return out
