-- Take or Hold of an order whose keys share one slot: every line checked,
-- then every line taken and the order recorded, in this one script (see
-- place in orders_placing.lua).
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
local n, stream = order_keys()
local tail = 6 + 2 * n -- the fence point, then the expiry and the tombstone ttl
local ls = {}
for i = 1, n do
  ls[i] = {ARGV[4 + 2 * i], ARGV[5 + 2 * i], KEYS[2 * i], KEYS[2 * i + 1]}
end
return place({
  rec = KEYS[1], kind = ARGV[1], id = ARGV[5], ttl = ARGV[2], retention = ARGV[3],
  decide = ARGV[4], lines = ls, fence = ARGV[tail], expiry = ARGV[tail + 1], tomb = ARGV[tail + 2],
  stream = stream,
}, now_us(), nil)
