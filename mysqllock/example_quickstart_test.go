package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// dsn names the server Example uses; TestExamples_run points it
// at the test binary's server.
var dsn = os.Getenv("STOCKGUARD_MYSQL_DSN")

// The everyday choice, one conditional UPDATE per purchase; README.md quotes
// this body: stock a SKU, sell 3 units, tell the buyer what happened.
func Example() {
	ctx := context.Background()
	// dsn: e.g. "root@tcp(127.0.0.1:3306)/test?interpolateParams=true"
	db, err := sqlx.Connect("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(64) // at least as many connections as concurrent buyers
	if err := mysqllock.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	inv := mysqllock.NewAtomic(db) // or NewBatched(db), redislock.NewAtomic(rdb), …
	if err := inv.SetStock(ctx, "sku-42", 10); err != nil {
		log.Fatal(err)
	}

	switch err := inv.Decrement(ctx, "sku-42", 3); {
	case err == nil:
		fmt.Println("sold 3")
	case errors.Is(err, stockguard.ErrInsufficientStock):
		fmt.Println("sold out; nothing taken")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		fmt.Println("reply lost after the write was sent: reconcile (or use Orders) before answering")
	default:
		fmt.Println("nothing was taken:", err) // unknown SKU, bad request, context ended, busy, unavailable
	}
	left, err := inv.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
	// It prints (TestExamples_run runs it on a private server):
	//
	//	sold 3
	//	left: 7
}
