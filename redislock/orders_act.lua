-- Confirm, Return or Order of an order whose keys share one slot, read
-- before by orders_read.lua so that its lines' keys are declared here (see
-- act in orders_acting.lua).
-- KEYS[1] the order record; KEYS[2i], KEYS[2i+1] line i's stock level and
-- holds; the order stream last, if any. ARGV[1] "confirm", "return" or
-- "order", [2] retention (ms), [3] the order id, then (sku, qty) of each
-- line from [4] on. Returns what act returns.
local n, stream = order_keys()
local ls = {}
for i = 1, n do
  ls[i] = {ARGV[2 + 2 * i], ARGV[3 + 2 * i], KEYS[2 * i], KEYS[2 * i + 1]}
end
return act({rec = KEYS[1], op = ARGV[1], id = ARGV[3], retention = ARGV[2], lines = ls, stream = stream}, nil, nil)
