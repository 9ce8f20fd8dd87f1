package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" driver with database/sql
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// A complete program on MySQL or MariaDB: an order taken twice, its units once.
func Example() {
	ctx := context.Background()
	// MYSQL_DSN: e.g. "root@tcp(127.0.0.1:3306)/shop?interpolateParams=true"
	dial, cancel := context.WithTimeout(ctx, 5*time.Second) // a server that never answers fails here
	defer cancel()
	db, err := sqlx.ConnectContext(dial, "mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(64) // at least as many connections as concurrent buyers
	// The stock and order tables, if they do not exist yet.
	if err := mysqllock.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	shop, err := mysqllock.NewAtomic(db) // every constructor takes the *sqlx.DB
	if err != nil {
		log.Fatal(err)
	}
	if err := shop.SetStock(ctx, "sku-42", 10); err != nil {
		log.Fatal(err)
	}

	// Your order number; here one unique to the run: the ledger keeps an ID until
	// PurgeOrders but SetStock resets the level: a fixed ID would take nothing on a rerun.
	order := fmt.Sprintf("order-%d", time.Now().UnixNano())
	for range 2 { // the same order ID twice: the units are taken once
		switch err := shop.Take(ctx, order, stockguard.Line{SKU: "sku-42", Qty: 3}); {
		case err == nil:
			fmt.Println("order taken")
		case errors.Is(err, stockguard.ErrInsufficientStock):
			fmt.Println("sold out; nothing taken")
		case errors.Is(err, stockguard.ErrOutcomeUnknown):
			fmt.Println("reply lost: repeat the Take with the same ID")
		default: // ErrUnknownSKU, ErrOrderMismatch, ErrContention, ErrUnavailable, ...: nothing taken
			log.Fatal(err)
		}
	}
	left, err := shop.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
	// It prints:
	//
	//	order taken
	//	order taken
	//	left: 7
}
