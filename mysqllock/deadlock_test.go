package mysqllock

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// deadlock calls start, which must make the strategy under test decrement
// sku, and draws the strategy's transaction into a deadlock it loses: a
// transaction that has written many rows (InnoDB rolls back the lighter
// side) share-locks sku's row; the strategy's exclusive request queues
// behind it (waiting is the statement starting with waiter); then the
// transaction asks for the row exclusively, which must wait for the queued
// request: a cycle. It returns the server's deadlock count increase.
func deadlock(t *testing.T, db *sqlx.DB, table, sku, waiter string, start func()) int64 {
	t.Helper()
	before := deadlocks(t, db)
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 50 {
		if _, err := tx.Exec("INSERT INTO "+quote(table)+" (sku, qty) VALUES (?, 1)", fmt.Sprintf("ballast-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var qty int64
	if err := tx.Get(&qty, "SELECT qty FROM "+quote(table)+" WHERE sku = ? LOCK IN SHARE MODE", sku); err != nil {
		t.Fatal(err)
	}
	start()
	waitingOn(t, db, waiter)
	if _, err := tx.Exec("UPDATE "+quote(table)+" SET version = version + 1 WHERE sku = ?", sku); err != nil {
		t.Fatalf("the heavier transaction lost the deadlock: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return deadlocks(t, db) - before
}

func deadlocks(t *testing.T, db *sqlx.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDecrement_deadlockRetried(t *testing.T) {
	db := testDB(t, interpolate)
	for _, name := range strategyNames {
		t.Run(name, func(t *testing.T) {
			for _, attempts := range []int{1, 10} {
				table := newTable(t, db)
				mustSet(t, db, table, "hot", 10)
				inv := strategies(db, WithTable(table), WithRetry(strategy.RetryPolicy{MaxAttempts: attempts}))[name]
				waiter := "UPDATE " + quote(table)
				if name == "pessimistic" {
					waiter = "SELECT qty FROM " + quote(table)
				}
				done := make(chan error, 1)
				n := deadlock(t, db, table, "hot", waiter, func() {
					go func() { done <- inv.Decrement(t.Context(), "hot", 2) }()
				})
				err := <-done
				if n < 1 {
					t.Errorf("attempts=%d: no deadlock happened (%d)", attempts, n)
				}
				qty, _ := level(t, db, table, "hot")
				if attempts == 1 {
					contractOne(t, err, stockguard.ErrContention)
					if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != erLockDeadlock {
						t.Errorf("attempts=1: %v does not wrap error 1213", err)
					}
					if qty != 10 {
						t.Errorf("qty %d after a lost deadlock, want 10", qty)
					}
					continue
				}
				if err != nil {
					t.Fatalf("attempts=%d: %v", attempts, err)
				}
				if r := inv.(strategy.RetryCounter).Retries(); r < 1 {
					t.Errorf("Retries() = %d, want ≥ 1", r)
				}
				if qty != 8 {
					t.Errorf("qty %d, want 8", qty)
				}
			}
		})
	}
}
