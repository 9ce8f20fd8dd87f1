-- wrk script for POST /buy: every request is one unit of SKU (env SKU,
-- default "flash") under its own order ID, as the buyer whose token is in
-- env TOKEN (README.md shows how to make one), so retries stay
-- exactly-once. Run one wrk per service copy, each with its own PREFIX:
--   TOKEN=... PREFIX=a wrk -t2 -c32 -d10s -s wrk/buy.lua http://127.0.0.1:8081
-- At the end it prints the responses by status and the units acknowledged.

local sku = os.getenv("SKU") or "flash"
local prefix = os.getenv("PREFIX") or "wrk"
local token = os.getenv("TOKEN") or ""
local threads = {}
local counter = 1

function setup(thread)
  thread:set("id", counter)
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  n = 0
  statuses = {}
  wrk.method = "POST"
  wrk.path = "/buy"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Seckill-Buyer"] = token
end

function request()
  n = n + 1
  local body = string.format('{"order_id":"%s-%d-%d","sku":"%s","qty":1}', prefix, id, n, sku)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for status, count in pairs(t:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  for status, count in pairs(total) do
    io.write(string.format("status %d: %d\n", status, count))
  end
  io.write(string.format("units acknowledged: %d\n", total[200] or 0))
  io.write(string.format("p99: %.2f ms\n", latency:percentile(99) / 1000))
end
