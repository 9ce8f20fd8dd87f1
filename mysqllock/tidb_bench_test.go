package mysqllock

import (
	"fmt"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
)

// BenchmarkTiDBHotRow runs NewAtomic on one hot TiDB row at 64 buyers two
// ways: engine-aware (its UPDATE in a pessimistic transaction) and as TiDB
// runs the autocommit UPDATE by default (optimistic), with batched as the
// yardstick. The three alternate, round after round (go test's -count
// would repeat each one before the next), so that a noisy machine affects
// them alike. Needs STOCKGUARD_TIDB=1.
//
//	STOCKGUARD_TIDB=1 go test -run '^$' -bench TiDBHotRow -benchtime 3000x ./mysqllock/
func BenchmarkTiDBHotRow(b *testing.B) {
	db := tidbDB(b)
	db.SetMaxOpenConns(80)
	db.SetMaxIdleConns(80)
	table := newTable(b, db)
	const rounds = 5
	for round := range rounds {
		for _, c := range []struct {
			name string
			new  func() stockguard.Inventory
		}{
			{"atomic", func() stockguard.Inventory { return must.New(NewAtomic(db, WithTable(table))) }},
			{"atomic-autocommit", func() stockguard.Inventory { return must.New(NewAtomic(db, WithTable(table), WithEngine(EngineMySQL))) }},
			{"batched", func() stockguard.Inventory { return must.New(NewBatched(db, WithTable(table))) }},
		} {
			b.Run(fmt.Sprintf("strategy=%s/workers=64/round=%d", c.name, round+1), func(b *testing.B) {
				hotRow(b, backendstest.SharedTiDB(b).Proc, c.new(), fmt.Sprintf("hot-%s-%d", c.name, round), 64)
			})
		}
	}
}
