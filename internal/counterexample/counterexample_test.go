package counterexample

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/stocktest"
)

func TestMain(m *testing.M) { backendstest.Main(m) }

func unique() string {
	var b [6]byte
	rand.Read(b[:])
	return "ce" + hex.EncodeToString(b[:])
}

// subjects returns a constructor per counterexample, each building
// instances over one fresh table or key prefix.
func subjects(t *testing.T) map[string]func() stockguard.Inventory {
	rdb := backendstest.RedisClient(t)
	db := backendstest.DB(t)
	table := unique()
	if err := mysqllock.CreateSchema(t.Context(), db, mysqllock.WithTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE `"+table+"`") })
	prefix := unique() + ":"
	must := func(inv stockguard.Inventory, err error) stockguard.Inventory {
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	return map[string]func() stockguard.Inventory{
		"CheckThenAct":   func() stockguard.Inventory { return NewCheckThenAct(rdb, prefix+"cta:") },
		"SetNXExpire":    func() stockguard.Inventory { return NewSetNXExpire(rdb, prefix+"sne:") },
		"DelUnlock":      func() stockguard.Inventory { return NewDelUnlock(rdb, prefix+"del:") },
		"GetSetLock":     func() stockguard.Inventory { return NewGetSetLock(rdb, prefix+"gsl:") },
		"LocalMutex":     func() stockguard.Inventory { return must(NewLocalMutex(db, table)) },
		"RepeatableRead": func() stockguard.Inventory { return must(NewRepeatableRead(db, table)) },
	}
}

// TestCounterexamples_sequentiallyCorrect runs stocktest's cases except the
// concurrent ones: one request at a time, every counterexample keeps the
// contract. What breaks them is concurrency alone, which the harness's audit
// catches (bench.TestCounterexamples_caught).
func TestCounterexamples_sequentiallyCorrect(t *testing.T) {
	for name, newInv := range subjects(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range (stocktest.Suite{}).Cases() {
				if strings.HasPrefix(c.Name, "Conservation") || strings.HasPrefix(c.Name, "Linearizable") {
					continue
				}
				for _, v := range c.Check(t.Context(), stocktest.NewSubject(newInv)) {
					t.Error(v)
				}
			}
		})
	}
}

func TestNewMySQL_rejectsBadTable(t *testing.T) {
	for _, table := range []string{"", "a b", "x`; DROP TABLE stock; --", strings.Repeat("t", 49)} {
		if _, err := NewLocalMutex(nil, table); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("NewLocalMutex(%q): %v", table, err)
		}
		if _, err := NewRepeatableRead(nil, table); !errors.Is(err, stockguard.ErrInvalidRequest) {
			t.Errorf("NewRepeatableRead(%q): %v", table, err)
		}
	}
}
