-- Reads the order record KEYS[1]: returns {now (us), field, value, ...},
-- just {now} when there is none.
local out = call('HGETALL', KEYS[1])
table.insert(out, 1, now_us())
return out
