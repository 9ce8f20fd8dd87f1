package mysqllock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx", for the PostgreSQL pool refused here
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// functions returns every function of the package that takes options,
// over db, and the options each reads (Option's table, written out here
// again). ctx is CreateSchema's and PurgeOrders'.
func functions(ctx context.Context, db *sqlx.DB) []struct {
	name  string
	reads []string
	call  func(...Option) error
} {
	errOf := func(_ any, err error) error { return err }
	atomic := []string{"WithTable", "WithRetry", "WithEngine"}
	return []struct {
		name  string
		reads []string
		call  func(...Option) error
	}{
		{"CreateSchema", []string{"WithTable"}, func(o ...Option) error { return CreateSchema(ctx, db, o...) }},
		{"PurgeOrders", []string{"WithTable", "WithOrderRetention", "WithEngine"}, func(o ...Option) error { return errOf(PurgeOrders(ctx, db, o...)) }},
		{"NewAtomic", atomic, func(o ...Option) error { return errOf(NewAtomic(db, o...)) }},
		{"NewOptimistic", atomic, func(o ...Option) error { return errOf(NewOptimistic(db, o...)) }},
		{"NewFencedStore", []string{"WithTable", "WithEngine"}, func(o ...Option) error { return errOf(NewFencedStore(db, o...)) }},
		{"NewBatched", slices.Concat(atomic, []string{"WithLockWaitTimeout", "WithBatchSize", "WithOrderLanes"}), func(o ...Option) error { return errOf(NewBatched(db, o...)) }},
		{"NewSegmented", slices.Concat(atomic, []string{"WithLockWaitTimeout", "WithSegments"}), func(o ...Option) error { return errOf(NewSegmented(db, o...)) }},
		{"NewPessimistic", slices.Concat(atomic, []string{"WithLockWaitTimeout", "WithLockMode"}), func(o ...Option) error { return errOf(NewPessimistic(db, o...)) }},
		{"NewNamedLock", slices.Concat(atomic, []string{"WithNamedLockTimeout"}), func(o ...Option) error { return errOf(NewNamedLock(db, o...)) }},
	}
}

// Every function refuses, before any I/O, each option it does not read,
// with ErrInvalidRequest naming the option and the function, and accepts
// each one it reads. CreateSchema and PurgeOrders run on an ended
// context, so an option they read ends in the context's error.
func TestOptions_unreadIsRefused(t *testing.T) {
	db, err := sqlx.Open("mysql", "root@tcp(127.0.0.1:1)/none") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	valid := map[string]Option{
		"WithTable":            WithTable("shop"),
		"WithRetry":            WithRetry(strategy.RetryPolicy{MaxAttempts: 3}),
		"WithLockMode":         WithLockMode(LockNoWait),
		"WithLockWaitTimeout":  WithLockWaitTimeout(time.Second),
		"WithNamedLockTimeout": WithNamedLockTimeout(time.Second),
		"WithOrderRetention":   WithOrderRetention(time.Hour),
		"WithBatchSize":        WithBatchSize(8),
		"WithOrderLanes":       WithOrderLanes(2),
		"WithSegments":         WithSegments(4),
		"WithEngine":           WithEngine(EngineMySQL),
	}
	for _, f := range functions(ended, db) {
		for name, opt := range valid {
			err := f.call(opt)
			if slices.Contains(f.reads, name) {
				if errors.Is(err, stockguard.ErrInvalidRequest) {
					t.Errorf("%s(%s): %v, want it read", f.name, name, err)
				}
				continue
			}
			want(t, f.name+"("+name+")", err, stockguard.ErrInvalidRequest)
			if err != nil && !strings.Contains(err.Error(), f.name+" does not read "+name) {
				t.Errorf("%s(%s): %q does not name the option", f.name, name, err)
			}
		}
	}
}

// A pool opened for PostgreSQL is refused by every function, before any
// I/O, with an error that says so; Take would otherwise fail later on SQL
// the caller never wrote.
func TestOptions_postgresPoolIsRefused(t *testing.T) {
	pg, err := sqlx.Open("pgx", "postgres://127.0.0.1:1/none") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range functions(t.Context(), pg) {
		err := f.call()
		want(t, f.name+" over a PostgreSQL pool", err, stockguard.ErrInvalidRequest)
		if err == nil || !strings.Contains(err.Error(), "a PostgreSQL pool") || !strings.Contains(err.Error(), "use pglock") {
			t.Errorf("%s: %q does not name the PostgreSQL pool", f.name, err)
		}
	}
}
