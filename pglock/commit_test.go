package pglock

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
)

// syncRep is a private server whose synchronous standby never answers:
// every COMMIT on waiting (a pool whose sessions run synchronous_commit =
// on) is written to the WAL and then waits for the standby, forever;
// admin's sessions (synchronous_commit = off, the server's default) do not
// wait.
type syncRep struct {
	admin, waiting *sqlx.DB
}

func newSyncRep(t *testing.T) syncRep {
	srv := backendstest.PrivatePostgres(t)
	open := func(dsn string) *sqlx.DB {
		db := must.New(sqlx.Open("pgx", dsn))
		t.Cleanup(func() { db.Close() })
		return db
	}
	s := syncRep{admin: open(srv.DSN), waiting: open(srv.DSN + "&synchronous_commit=on")}
	ctx := t.Context()
	for _, q := range []string{"CREATE TABLE probe (n int)",
		"ALTER SYSTEM SET synchronous_standby_names = 'nobody'", "SELECT pg_reload_conf()"} {
		if _, err := s.admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The reload reaches the checkpointer, which tells committing sessions
	// that a standby is named, a moment later: until one COMMIT waits,
	// commit again (a write: a transaction that wrote no WAL does not wait).
	for {
		done := make(chan error, 1)
		go func() {
			_, err := s.waiting.ExecContext(ctx, "INSERT INTO probe VALUES (1)")
			done <- err
		}()
		if pid, ok := s.waiter(t, done); ok {
			// Released by the cancel, it completes.
			if _, err := s.admin.ExecContext(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
}

// waiter waits for a session waiting for the standby and returns its pid,
// or false once done reports that the call ended without waiting.
func (s syncRep) waiter(t *testing.T, done <-chan error) (int, bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return 0, false
		default:
		}
		var pids []int
		if err := s.admin.SelectContext(t.Context(), &pids, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'"); err != nil {
			t.Fatal(err)
		}
		if len(pids) == 1 {
			return pids[0], true
		}
		if time.Now().After(deadline) {
			t.Fatalf("no COMMIT waits for the standby: %d waiters", len(pids))
		}
	}
}

// cancelDuringCommit runs call with a context it cancels once the call's
// COMMIT is on the server, waiting for the standby; it returns the call's
// answer once the server has ended that session, and with it the
// transaction, which it committed.
func (s syncRep) cancelDuringCommit(t *testing.T, call func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	pid, ok := s.waiter(t, done)
	if !ok {
		t.Fatal("the call ended without waiting at COMMIT")
	}
	cancel()
	err := <-done
	// The session waits on after its client left; ended, it finishes the
	// commit the WAL holds.
	if _, err := s.admin.ExecContext(t.Context(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	waitCount(t, s.admin, "the session waiting at COMMIT is still there", zero,
		"SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1", pid)
	return err
}

// A caller who leaves while its COMMIT is on the server, waiting for a
// synchronous standby, is answered ErrOutcomeUnknown: the server has
// committed, on every path that commits — an order of several lines and
// of one (Atomic and Batched), Confirm, Return, Restock, and the
// Pessimistic and Serializable Decrement.
func TestCommit_callerWhoLeavesDuringCommitIsToldOutcomeUnknown(t *testing.T) {
	s := newSyncRep(t)
	table := newTable(t, s.admin)
	admin := must.New(NewAtomic(s.admin, WithTable(table)))
	atomic := must.New(NewAtomic(s.waiting, WithTable(table)))
	batched := must.New(NewBatched(s.waiting, WithTable(table)))
	pessimistic := must.New(NewPessimistic(s.waiting, WithTable(table)))
	serializable := must.New(NewSerializable(s.waiting, WithTable(table)))
	ctx := t.Context()
	for _, sku := range []string{"a", "b", "c"} {
		want(t, "SetStock "+sku, admin.SetStock(ctx, sku, 100), nil)
	}
	want(t, "Hold h1", admin.Hold(ctx, "h1", time.Hour, line("a", 1), line("b", 1)), nil)
	want(t, "Hold h2", admin.Hold(ctx, "h2", time.Hour, line("a", 1), line("b", 1)), nil)

	tests := []struct {
		name  string
		call  func(context.Context) error
		state stockguard.OrderState // of order id, 0: none
		id    string
		left  map[string]int64 // the levels after it, committed
	}{
		{"Atomic.Take of several lines", func(ctx context.Context) error {
			return atomic.Take(ctx, "t1", line("a", 1), line("b", 1))
		}, stockguard.OrderTaken, "t1", map[string]int64{"a": 97, "b": 97}},
		{"Atomic.Take of one line", func(ctx context.Context) error {
			return atomic.Take(ctx, "t2", line("a", 1))
		}, stockguard.OrderTaken, "t2", map[string]int64{"a": 96}},
		{"Atomic.Hold of several lines", func(ctx context.Context) error {
			return atomic.Hold(ctx, "t3", time.Hour, line("a", 1), line("b", 1))
		}, stockguard.OrderHeld, "t3", map[string]int64{"a": 95, "b": 96}},
		{"Confirm", func(ctx context.Context) error { return atomic.Confirm(ctx, "h1") },
			stockguard.OrderTaken, "h1", map[string]int64{"a": 95}},
		{"Return", func(ctx context.Context) error { return atomic.Return(ctx, "h2") },
			stockguard.OrderReturned, "h2", map[string]int64{"a": 96, "b": 97}},
		{"Restock", func(ctx context.Context) error { return atomic.Restock(ctx, "r1", "c", 5) },
			0, "", map[string]int64{"c": 105}},
		{"Batched.Take of several lines", func(ctx context.Context) error {
			return batched.Take(ctx, "t4", line("a", 1), line("b", 1))
		}, stockguard.OrderTaken, "t4", map[string]int64{"a": 95, "b": 96}},
		{"Batched.Confirm", func(ctx context.Context) error { return batched.Confirm(ctx, "t3") },
			stockguard.OrderTaken, "t3", map[string]int64{"a": 95}},
		{"Pessimistic.Decrement", func(ctx context.Context) error { return pessimistic.Decrement(ctx, "c", 1) },
			0, "", map[string]int64{"c": 104}},
		{"Serializable.Decrement", func(ctx context.Context) error { return serializable.Decrement(ctx, "c", 1) },
			0, "", map[string]int64{"c": 103}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, tt.name, s.cancelDuringCommit(t, tt.call), stockguard.ErrOutcomeUnknown)
			wantLevels(t, admin, tt.left)
			if tt.id != "" {
				info, err := admin.Order(ctx, tt.id)
				if err != nil || info.State != tt.state {
					t.Fatalf("Order(%s) = %v, %v; want %v", tt.id, info.State, err, tt.state)
				}
			}
		})
	}
}
