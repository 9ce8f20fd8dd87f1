// Package all registers every backend and target with package bench.
// Import it for its side effect, as stockbench does:
//
//	import _ "github.com/stockguard/stockguard/bench/all"
//
// A new backend's package is one more import here.
package all

import (
	_ "github.com/stockguard/stockguard/bench/mysqltargets"   // MySQL
	_ "github.com/stockguard/stockguard/bench/pgtargets"      // PostgreSQL
	_ "github.com/stockguard/stockguard/bench/redistargets"   // Redis, Redlock voters
	_ "github.com/stockguard/stockguard/bench/replicatargets" // Redis with replicas and failover, after Redis: its targets are Redis's again
	_ "github.com/stockguard/stockguard/bench/tidbtargets"    // TiDB, after MySQL: its targets are MySQL's again
	_ "github.com/stockguard/stockguard/bench/tieredtargets"  // Redis in front of MySQL, after both
	_ "github.com/stockguard/stockguard/bench/valkeytargets"  // Valkey, after Redis: its targets are Redis's again
)
