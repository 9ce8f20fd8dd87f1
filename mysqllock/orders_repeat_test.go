package mysqllock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/internal/ordersload"
)

// A refusal is final only when decided under the ID's lock, and an ID
// stays busy until its abandoned write has ended. Here a first attempt is
// held on the server — its INSERT done, its UPDATE waiting for a restock
// another transaction has not committed — and its caller leaves
// (ErrOutcomeUnknown). The SKU is remembered short, so the repeat is
// screened by a plain read that sees no units. When the restock commits,
// the first attempt takes the unit: the repeat must not have been told
// ErrInsufficientStock — on the same instance or on another.
func TestBatched_repeatIsNotRefusedWhileItsFirstAttemptMayCommit(t *testing.T) {
	for _, pool := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		for _, where := range []string{"same instance", "other instance"} {
			t.Run(pool.name+"/"+where, func(t *testing.T) {
				db := testDB(t, pool.edit)
				db.SetMaxOpenConns(16)
				table := newTable(t, db)
				first, err := NewBatched(db, WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				repeat := first
				if where == "other instance" {
					repeat = must.New(NewBatched(db, WithTable(table)))
				}
				ctx := t.Context()
				want(t, "SetStock", first.SetStock(ctx, "s", 0), nil)
				// An uncommitted restock: holds the row, so the first
				// attempt's UPDATE waits for it.
				restock, err := db.BeginTxx(context.WithoutCancel(ctx), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { restock.Rollback() })
				if _, err := restock.Exec("UPDATE " + quote(table) + " SET qty = 1 WHERE sku = 's'"); err != nil {
					t.Fatal(err)
				}

				actx, leave := context.WithCancel(ctx)
				firstDone := make(chan error, 1)
				go func() { firstDone <- first.Take(actx, "x", line("s", 1)) }()
				lockWaits(t, db, 1)
				leave()
				if err := <-firstDone; !errors.Is(err, stockguard.ErrOutcomeUnknown) && !errors.Is(err, context.Canceled) {
					t.Fatalf("first attempt: %v, want ErrOutcomeUnknown or the context's error", err)
				}

				repeat.short.mark("s")
				repeatDone := make(chan error, 1)
				go func() { repeatDone <- repeat.Take(ctx, "x", line("s", 1)) }()
				var answer error
				answered := blockedOrAnswered(t, db, repeat, repeatDone, &answer)
				if err := restock.Commit(); err != nil {
					t.Fatal(err)
				}
				if !answered {
					answer = <-repeatDone
				}
				settled(t, db, table)

				_, err = first.Order(ctx, "x")
				switch {
				case errors.Is(answer, stockguard.ErrInsufficientStock) || errors.Is(answer, stockguard.ErrUnknownSKU):
					if !errors.Is(err, stockguard.ErrUnknownOrder) {
						t.Fatalf("the repeat was refused (%v), yet the order is recorded (Order: %v)", answer, err)
					}
				case answer == nil:
					if err != nil {
						t.Fatalf("the repeat was granted, yet Order: %v", err)
					}
				case !errors.Is(answer, stockguard.ErrOutcomeUnknown) && !errors.Is(answer, stockguard.ErrContention):
					t.Fatalf("repeat: %v", answer)
				}
				left := stockOf(t, first, "s")
				if recorded := err == nil; recorded && left != 0 || !recorded && left != 1 {
					t.Fatalf("%d units left, order recorded: %v", left, recorded)
				}
			})
		}
	}
}

// waits counts the transactions waiting for a row lock.
func waits(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	if err := db.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// blockedOrAnswered waits until the repeat call on b answered (reported
// true, its answer stored in answer) or is held: queued behind the first
// attempt's lane, or waiting for a row lock on the server.
func blockedOrAnswered(t *testing.T, db *sqlx.DB, b *Batched, done chan error, answer *error) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case *answer = <-done:
			return true
		default:
		}
		if b.orders.Pending(b.lane("x")) > 0 {
			return false
		}
		time.Sleep(120 * time.Millisecond) // see waitingOn: the table refreshes every 100ms
		if waits(t, db) >= 2 {             // the first attempt, and the repeat
			return false
		}
	}
	t.Fatal("the repeat neither answered nor waited")
	return false
}

// settled waits until no statement on table's tables runs on the server:
// the abandoned first attempt has ended.
func settled(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.GetContext(t.Context(), &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE ?`, "%"+table+"%")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("a statement on the table still runs")
}

// A caller who leaves while its batch is held before writing — claimed,
// the batch's locking read waiting — is dropped: its context's error, and
// the batch never writes its order. Answered ErrOutcomeUnknown instead and
// written later, its repeat on another instance, refused meanwhile, would
// be a refusal of an order that is then taken.
func TestBatched_callerWhoLeftBeforeTheWriteIsNeverWritten(t *testing.T) {
	db, table, b1, b2 := twoBatched(t, interpolate) // statement by statement: a Confirm sends the batch the locking way
	ctx := t.Context()
	want(t, "Hold h1", b1.Hold(ctx, "h1", stockguard.MaxHoldTTL, line("z", 1)), nil)
	want(t, "Hold h2", b1.Hold(ctx, "h2", stockguard.MaxHoldTTL, line("z", 1)), nil)
	lockOrder := func(id string) *sqlx.Tx {
		tx, err := db.BeginTxx(context.WithoutCancel(ctx), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		var n int
		if err := tx.Get(&n, "SELECT COUNT(*) FROM "+quote(OrdersTable(table))+" WHERE id = ? FOR UPDATE", id); err != nil || n != 1 {
			t.Fatalf("lock %s: %d rows, %v", id, n, err)
		}
		return tx
	}
	t1, t2 := lockOrder("h1"), lockOrder("h2")

	// The lane is busy with h1's Confirm, held on t1: the next two queue
	// and go out together, as one batch that the Confirm of h2 sends the
	// locking way, where it waits on t2 — claimed, not yet written.
	c1 := make(chan error, 1)
	go func() { c1 <- b1.Confirm(ctx, "h1") }()
	lockWaits(t, db, 1)
	c2 := make(chan error, 1)
	go func() { c2 <- b1.Confirm(ctx, "h2") }()
	combinetest.Queued(t, b1.orders, b1.lane("h2"), 1)
	actx, leave := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { first <- b1.Take(actx, "x", line("s", 1)) }()
	combinetest.Queued(t, b1.orders, b1.lane("x"), 2)
	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}
	want(t, "Confirm h1", <-c1, nil)
	lockWaits(t, db, 1) // the batch of h2 and x, on t2
	leave()
	firstErr := <-first

	// The repeat, elsewhere, finds no units and is refused; then a restock.
	repeatErr := b2.Take(ctx, "x", line("s", 1))
	want(t, "SetStock s", b2.SetStock(ctx, "s", 1), nil)
	if err := t2.Commit(); err != nil {
		t.Fatal(err)
	}
	want(t, "Confirm h2", <-c2, nil)

	ordersload.RepeatAgrees(t, b1, "x", firstErr, repeatErr)
}

// On a multiStatements pool a caller is answered ErrOutcomeUnknown only
// once the server has recorded its order's ID in the batch's open
// transaction. Here the batch's INSERT of IDs a and x waits on a (a test
// transaction holds that ID) before it reaches x, and x's caller leaves:
// x is not recorded yet, so the repeat on another instance finds no order
// and no units and is refused. Then a restock, and the INSERT goes on: x
// must not be recorded after all.
func TestBatched_multiStatements_callerWhoLeftBeforeItsIDWasRecordedIsNeverWritten(t *testing.T) {
	db, table, b1, b2 := twoBatched(t, multi)
	ctx := t.Context()
	holdA, err := db.BeginTxx(context.WithoutCancel(ctx), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holdA.Rollback() })
	if _, err := holdA.Exec("INSERT INTO "+quote(OrdersTable(table))+" (id, kind, state, created_at, changed_at) VALUES ('a', ?, ?, NOW(6), NOW(6))", kindTake, stockguard.OrderTaken); err != nil {
		t.Fatal(err)
	}

	// a and x queue behind a Take held on z's row, and go out together.
	release := queueBehind(t, b1, table, "z")
	actx, leave := context.WithCancel(ctx)
	answers := queueCalls(t, b1,
		func() error { return b1.Take(ctx, "a", line("z", 1)) },
		func() error { return b1.Take(actx, "x", line("s", 1)) })
	release()
	lockWaits(t, db, 1) // the batch's INSERT, on a
	leave()
	firstErr := <-answers[1]

	repeatErr := b2.Take(ctx, "x", line("s", 1))
	want(t, "SetStock s", b2.SetStock(ctx, "s", 1), nil)
	if err := holdA.Rollback(); err != nil {
		t.Fatal(err)
	}
	want(t, "Take a", <-answers[0], nil)
	settled(t, db, table)

	recorded := ordersload.RepeatAgrees(t, b1, "x", firstErr, repeatErr)
	if left := stockOf(t, b1, "s"); recorded && left != 0 || !recorded && left != 1 {
		t.Fatalf("%d units of s left, order recorded: %v", left, recorded)
	}
}

// The careful caller's load — short deadlines, repeats on any instance
// until the answer is definite, restocks among them — over Batched,
// Batched with four lanes and Atomic on one table: every refusal stands
// in the ledger afterwards, every acknowledgement too, and units add up.
func TestOrders_repeatsAgreeWithTheLedger(t *testing.T) {
	bothPaths(t, func(t *testing.T, db *sqlx.DB) {
		db.SetMaxOpenConns(32) // see orderDB
		repeats(t, db)
	})
}

// TiDB, the same.
func TestTiDB_repeatsAgreeWithTheLedger(t *testing.T) {
	repeats(t, tidbDB(t))
}

func repeats(t *testing.T, db *sqlx.DB) {
	table := newTable(t, db)
	insts := []stockguard.Orders{
		must.New(NewBatched(db, WithTable(table))),
		must.New(NewBatched(db, WithTable(table), WithOrderLanes(4))),
		must.New(NewAtomic(db, WithTable(table))),
	}
	ordersload.Repeats(t, insts, func() { settled(t, db, table) }, 12, 2000)
}

// gated returns the pool setting that sends a pool's connections through g.
func gated(t *testing.T, g *netgate.Gate) func(*mysql.Config) {
	name := "gate-" + nonIdent.ReplaceAllString(t.Name(), "_")
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		return g.Dial(ctx, "tcp", addr)
	})
	return func(c *mysql.Config) { c.Net = name }
}

// On a multiStatements pool Atomic's order is two round trips: the first
// records the order, the second takes the units and commits. Here the
// first attempt's statements are sent but held on their way to the server
// while its caller leaves; the repeat, elsewhere, finds no order and no
// units and is refused; then a restock, and the held statements reach the
// server: the order must not be recorded after all.
func TestAtomic_multiStatements_callerWhoLeftBeforeItsIDWasRecordedIsNeverWritten(t *testing.T) {
	g := netgate.New(t)
	gdb := testDB(t, multi, gated(t, g))
	gdb.SetMaxOpenConns(1)
	db := testDB(t, multi)
	table := newTable(t, db)
	first, err := NewAtomic(gdb, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	repeat, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 0), nil)
	want(t, "SetStock z", repeat.SetStock(ctx, "z", 1), nil)
	want(t, "Take warm", first.Take(ctx, "warm", line("z", 1)), nil) // the gated connection is set up
	var id int
	if err := gdb.GetContext(ctx, &id, "SELECT CONNECTION_ID()"); err != nil {
		t.Fatal(err)
	}

	g.Hold()
	actx, leave := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Take(actx, "x", line("s", 1)) }()
	<-g.Blocked()
	leave()
	firstErr := <-firstDone
	repeatErr := repeat.Take(ctx, "x", line("s", 1))
	want(t, "SetStock s", repeat.SetStock(ctx, "s", 1), nil)
	g.Release()
	// The first attempt is over once its connection is back in the pool,
	// its answers read, or gone, the server having read all it was sent.
	for deadline := time.Now().Add(30 * time.Second); gdb.Stats().Idle == 0; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt still runs")
		}
	}

	ordersload.RepeatAgrees(t, repeat, "x", firstErr, repeatErr)
}

// twoBatched gives two Batched instances over one new table of the pool
// kind, with SKU s sold out and z stocked with 10.
func twoBatched(t *testing.T, kind func(*mysql.Config)) (db *sqlx.DB, table string, b1, b2 *Batched) {
	t.Helper()
	db = testDB(t, kind)
	db.SetMaxOpenConns(16)
	table = newTable(t, db)
	b1 = must.New(NewBatched(db, WithTable(table)))
	b2 = must.New(NewBatched(db, WithTable(table)))
	want(t, "SetStock s", b1.SetStock(t.Context(), "s", 0), nil)
	want(t, "SetStock z", b1.SetStock(t.Context(), "z", 10), nil)
	return db, table, b1, b2
}
