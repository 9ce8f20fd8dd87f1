package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// open connects the way the package recommends: interpolateParams=true and
// a pool at least as large as the number of concurrent buyers.
func open(workers int) *sqlx.DB {
	cfg, err := mysql.ParseDSN(os.Getenv("STOCKGUARD_MYSQL_DSN")) // e.g. root@tcp(127.0.0.1:3306)/test
	if err != nil {
		log.Fatal(err)
	}
	cfg.InterpolateParams = true // one round trip per statement instead of two
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
	return db
}

// A flash sale that would rather turn buyers away than queue them on the
// hot row: NOWAIT answers ErrContention at once when the row is busy.
func ExampleNewPessimistic() {
	ctx := context.Background()
	db := open(64)
	defer db.Close()
	inv, err := mysqllock.NewPessimistic(db,
		mysqllock.WithLockMode(mysqllock.LockNoWait),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku-42", 1); errors.Is(err, stockguard.ErrContention) {
		fmt.Println("busy, try again")
	}
}

// Waiting mode with a bound on the server-side wait, for checks that need
// more than one comparison inside the transaction.
func ExampleWithLockWaitTimeout() {
	db := open(16)
	defer db.Close()
	inv, err := mysqllock.NewPessimistic(db, mysqllock.WithLockWaitTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_ = inv.Decrement(context.Background(), "sku-42", 1)
}

// Optimistic CAS with the default contention-aware retries; Retries feeds
// a retries-per-operation metric.
func ExampleNewOptimistic() {
	ctx := context.Background()
	db := open(64)
	defer db.Close()
	inv, err := mysqllock.NewOptimistic(db, mysqllock.WithTable("stock"))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku-42", 1); err != nil {
		fmt.Println(err)
	}
	fmt.Println("retries so far:", inv.Retries())
}

// Run your own read-check-write under the SKU's named lock, on the
// connection that holds it.
func ExampleNamedLock_WithLock() {
	ctx := context.Background()
	db := open(16)
	defer db.Close()
	inv, err := mysqllock.NewNamedLock(db, mysqllock.WithNamedLockTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	err = inv.WithLock(ctx, "sku-42", func(ctx context.Context, conn *sqlx.Conn) error {
		var qty int64
		if err := conn.QueryRowxContext(ctx, "SELECT qty FROM stock WHERE sku = ?", "sku-42").Scan(&qty); err != nil {
			return err
		}
		fmt.Println("units while nobody else can take any:", qty)
		return nil
	})
	if errors.Is(err, stockguard.ErrContention) {
		fmt.Println("lock busy")
	}
}

// Stock in MySQL, guarded by a lock service that hands out fencing tokens
// (redislock's Lock.Token): a holder whose lease ran out cannot overwrite
// the write of the holder after it.
func ExampleFencedStore_WriteFenced() {
	ctx := context.Background()
	db := open(16)
	defer db.Close()
	store, err := mysqllock.NewFencedStore(db)
	if err != nil {
		log.Fatal(err)
	}
	var token int64 = 17 // from the lock that guards "sku-42"
	qty, err := store.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	if err := store.WriteFenced(ctx, "sku-42", qty-1, token); errors.Is(err, stockguard.ErrFenced) {
		fmt.Println("lost the lock meanwhile; nothing written")
	}
}
