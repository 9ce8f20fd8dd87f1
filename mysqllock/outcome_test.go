package mysqllock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// writers are the calls that send a write in autocommit mode, with the
// statement each one blocks in when the row is locked.
func writers(f *FencedStore, strategies map[string]stockguard.Inventory) map[string]struct {
	stmt string
	call func(ctx context.Context) error
} {
	type w = struct {
		stmt string
		call func(ctx context.Context) error
	}
	ws := map[string]w{
		"atomic":      {"UPDATE", func(ctx context.Context) error { return strategies["atomic"].Decrement(ctx, "hot", 1) }},
		"optimistic":  {"UPDATE", func(ctx context.Context) error { return strategies["optimistic"].Decrement(ctx, "hot", 1) }},
		"namedlock":   {"UPDATE", func(ctx context.Context) error { return strategies["namedlock"].Decrement(ctx, "hot", 1) }},
		"setstock":    {"INSERT INTO", func(ctx context.Context) error { return f.SetStock(ctx, "hot", 5) }},
		"writefenced": {"UPDATE", func(ctx context.Context) error { return f.WriteFenced(ctx, "hot", 5, 1) }},
	}
	return ws
}

// A write whose connection dies before its reply — killed from another
// session while it waits for a row lock — has an unknown outcome, and so
// does one whose context ends meanwhile: the driver closes the socket, but
// the server goes on with the statement.
func TestDecrement_outcomeUnknown(t *testing.T) {
	db := testDB(t, interpolate)
	for _, how := range []string{"kill", "cancel"} {
		for _, name := range []string{"atomic", "optimistic", "namedlock", "setstock", "writefenced"} {
			t.Run(how+"/"+name, func(t *testing.T) {
				table := newTable(t, db)
				mustSet(t, db, table, "hot", 10)
				w := writers(must.New(NewFencedStore(db, WithTable(table))), strategies(db, WithTable(table)))[name]
				tx := holdRow(t, db, table, "hot", "FOR UPDATE")
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- w.call(ctx) }()
				id := waitingOn(t, db, w.stmt+" "+quote(table))
				if how == "kill" {
					if _, err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
						t.Fatal(err)
					}
				} else {
					cancel()
				}
				contractOne(t, <-done, stockguard.ErrOutcomeUnknown)
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				// Either outcome is possible; record which one the server chose.
				time.Sleep(50 * time.Millisecond)
				qty, version := level(t, db, table, "hot")
				t.Logf("after %s: qty %d, version %d", how, qty, version)
			})
		}
	}
}

// The named lock of a request whose connection died is free again, and no
// pooled connection holds it.
func TestNamedLock_Decrement_killedFreesLock(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	n, err := NewNamedLock(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	tx := holdRow(t, db, table, "hot", "FOR UPDATE")
	done := make(chan error, 1)
	go func() { done <- n.Decrement(t.Context(), "hot", 1) }()
	id := waitingOn(t, db, "UPDATE "+quote(table))
	if _, err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
	contractOne(t, <-done, stockguard.ErrOutcomeUnknown)
	tx.Rollback()
	lockFree(t, n, "hot")
	if err := n.Decrement(t.Context(), "hot", 1); err != nil {
		t.Fatal(err)
	}
}
