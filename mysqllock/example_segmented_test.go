package mysqllock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/stockguard/stockguard/mysqllock"
)

// One hot SKU spread over 16 rows, so that its buyers lock different rows.
// The segments live in their own table, created next to the stock table.
func ExampleNewSegmented() {
	ctx := context.Background()
	db := open(64)
	defer db.Close()
	if err := mysqllock.CreateSchema(ctx, db); err != nil { // table stock_segments
		log.Fatal(err)
	}
	inv, err := mysqllock.NewSegmented(db, mysqllock.WithSegments(16))
	if err != nil {
		log.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku-42", 10); err != nil { // 1 unit in ten segments, none in six
		log.Fatal(err)
	}
	// 7 units fit no single segment, but the total: taken across segments.
	if err := inv.Decrement(ctx, "sku-42", 7); err != nil {
		log.Fatal(err)
	}
	left, err := inv.Stock(ctx, "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
}
