-- level returns the stock level held in key, or nil and why not:
--   -1 the key does not exist,
--   -3 it holds no stock level: not a string, or not the canonical decimal
--      of 0..2^53-1, the only values stockguard writes.
-- It is prepended to every script that reads a level (atomic.lua,
-- segment_gather.lua), so they agree on what a level is.
local function level(key)
  local v = redis.pcall('GET', key)
  if v == false then
    return nil, -1
  end
  if type(v) ~= 'string' or #v > 16 then
    return nil, -3
  end
  local n = tonumber(v)
  -- %d of a non-integer or a differently spelled number ("007", "1e3", " 7",
  -- "0x10") does not give back v.
  if n == nil or n < 0 or n > 9007199254740991 or string.format('%d', n) ~= v then
    return nil, -3
  end
  return n
end
