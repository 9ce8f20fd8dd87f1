-- hotsku.lua: a sysbench 1.0 workload doing what mysqllock.NewAtomic does
-- per Decrement, on one hot row that never sells out, as one server-side
-- prepared statement per event (one round trip, autocommit):
--
--   UPDATE <table> SET qty = qty - ?, version = version + 1 WHERE sku = ? AND qty >= ?
--
-- The table has mysqllock.CreateSchema's layout. compare-sysbench.sh runs it
-- alternately with BenchmarkHotSKU/strategy=atomic.
--
--   sysbench hotsku.lua --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=3306 \
--     --mysql-user=root --mysql-db=test prepare|run|cleanup --threads=16 --time=10

sysbench.cmdline.options = {
   table = {"Stock table name", "sysbench_hotsku"},
   sku = {"The hot SKU", "hot"},
}

local function connect()
   return sysbench.sql.driver():connect()
end

function cmd_prepare()
   local con = connect()
   local t = sysbench.opt.table
   con:query("DROP TABLE IF EXISTS " .. t)
   con:query("CREATE TABLE " .. t .. [[ (
      sku VARBINARY(64) NOT NULL PRIMARY KEY,
      qty BIGINT NOT NULL,
      version BIGINT NOT NULL DEFAULT 0,
      fence BIGINT NOT NULL DEFAULT 0,
      CHECK (qty BETWEEN 0 AND 9007199254740991)
   ) ENGINE=InnoDB]])
   con:query("INSERT INTO " .. t .. " (sku, qty) VALUES ('" .. sysbench.opt.sku .. "', 9007199254740991)")
end

function cmd_cleanup()
   connect():query("DROP TABLE IF EXISTS " .. sysbench.opt.table)
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare},
   cleanup = {cmd_cleanup},
}

function thread_init()
   con = connect()
   stmt = con:prepare("UPDATE " .. sysbench.opt.table ..
      " SET qty = qty - ?, version = version + 1 WHERE sku = ? AND qty >= ?")
   local qty = stmt:bind_create(sysbench.sql.type.BIGINT)
   local sku = stmt:bind_create(sysbench.sql.type.VARCHAR, 64)
   local atleast = stmt:bind_create(sysbench.sql.type.BIGINT)
   stmt:bind_param(qty, sku, atleast)
   qty:set(1)
   sku:set(sysbench.opt.sku)
   atleast:set(1)
end

function event()
   stmt:execute()
end

function thread_done()
   stmt:close()
   con:disconnect()
end
