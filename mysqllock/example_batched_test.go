package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// A flash sale on one hot SKU: one Batched instance per process, shared by
// every buyer goroutine, turns many concurrent purchases into few writes.
// The pool needs a connection per SKU in flight, not per buyer.
func ExampleNewBatched() {
	ctx := context.Background()
	db := open(16)
	defer db.Close()
	if err := mysqllock.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	inv, err := mysqllock.NewBatched(db, mysqllock.WithBatchSize(128))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 1000); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			switch err := inv.Decrement(ctx, "sku-42", 1); {
			case err == nil, errors.Is(err, stockguard.ErrInsufficientStock):
			case errors.Is(err, stockguard.ErrOutcomeUnknown):
				// The batch's write was sent but its reply lost: reconcile.
			default:
				log.Print(err) // nothing was taken
			}
		})
	}
	wg.Wait()
	s := inv.Stats()
	fmt.Printf("%d purchases in %d writes\n", s.Requests, s.Batches)
}
