package pglock_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/pglock"
)

var dsn = os.Getenv("STOCKGUARD_POSTGRES_DSN")

// A hot SKU on PostgreSQL: concurrent requests of this process share one
// UPDATE and one commit. TestExamples_run runs it on a private server.
func ExampleNewBatched() {
	ctx := context.Background()
	// dsn: e.g. "postgres://postgres@127.0.0.1:5432/test"
	db, err := sqlx.Connect("pgx", dsn) // the pgx driver, through database/sql
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(64) // at least as many connections as concurrent buyers
	db.SetMaxIdleConns(64)
	if err := pglock.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	inv, err := pglock.NewBatched(db) // or NewAtomic, NewSegmented, …
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 10); err != nil {
		log.Fatal(err)
	}
	if err := inv.Decrement(ctx, "sku-42", 3); err != nil {
		log.Fatal(err)
	}
	left, err := inv.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
	// It prints:
	//
	//	left: 7
}
