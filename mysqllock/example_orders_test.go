package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/mysqllock"
)

// A checkout: hold the cart while the buyer pays, confirm it once paid,
// return it when the order is cancelled. Every call names the order, so a
// call whose outcome is unknown is simply repeated: it ends in the state
// one successful call would have left, and nothing is taken twice.
func Example_checkout() {
	ctx := context.Background()
	db := open(16)
	defer db.Close()
	if err := mysqllock.CreateSchema(ctx, db); err != nil { // stock, segments and the order ledger
		log.Fatal(err)
	}
	shop, err := mysqllock.NewAtomic(db) // or NewBatched: the same calls
	if err != nil {
		log.Fatal(err)
	}
	for sku, qty := range map[string]int64{"tee-m": 5, "mug": 2} {
		if err := shop.SetStock(ctx, sku, qty); err != nil {
			log.Fatal(err)
		}
	}
	// The caller's order number; here unique per run of the example.
	order := fmt.Sprintf("order-%d", time.Now().UnixNano())
	cart := []stockguard.Line{{SKU: "tee-m", Qty: 2}, {SKU: "mug", Qty: 1}}

	// Hold the units for 15 minutes; unpaid, they come back by themselves.
	switch err := retry(func() error { return shop.Hold(ctx, order, 15*time.Minute, cart...) }); {
	case errors.Is(err, stockguard.ErrInsufficientStock):
		fmt.Println("sold out") // nothing held
		return
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("held:", levels(ctx, shop))

	// Paid: take the units for good.
	if err := retry(func() error { return shop.Confirm(ctx, order) }); errors.Is(err, stockguard.ErrOrderClosed) {
		fmt.Println("too late: the hold expired") // refund the buyer
		return
	} else if err != nil {
		log.Fatal(err)
	}
	info, err := shop.Order(ctx, order)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("confirmed:", info.State, info.Lines)

	// Cancelled: the units go back, once, however often this is repeated.
	for range 2 {
		if err := retry(func() error { return shop.Return(ctx, order) }); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("returned:", levels(ctx, shop))
	// It prints (TestExamples_run runs it on a private server):
	//
	//	held: tee-m 3, mug 1
	//	confirmed: taken [{mug 1} {tee-m 2}]
	//	returned: tee-m 5, mug 2
}

// retry repeats call while its outcome is unknown — the connection died
// after the request was sent — which is safe for every Orders call.
func retry(call func() error) error {
	err := call()
	for try := 1; try < 5 && errors.Is(err, stockguard.ErrOutcomeUnknown); try++ {
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		err = call()
	}
	return err
}

func levels(ctx context.Context, shop stockguard.Orders) string {
	tee, err := shop.Stock(ctx, "tee-m")
	if err != nil {
		log.Fatal(err)
	}
	mug, err := shop.Stock(ctx, "mug")
	if err != nil {
		log.Fatal(err)
	}
	return fmt.Sprintf("tee-m %d, mug %d", tee, mug)
}
