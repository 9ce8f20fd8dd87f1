// Command loadgen drives buy requests at one or more seckill instances,
// reports requests/s and latency percentiles, and audits the sale: units
// acknowledged with 200 against the stock gone.
//
//	go run ./cmd/loadgen -urls http://127.0.0.1:8081,http://127.0.0.1:8082 -stock 100000 -n 50000 -c 64
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/stockguard/stockguard/examples/seckill/internal/load"
)

func main() {
	urls := flag.String("urls", "http://127.0.0.1:8080", "comma-separated service URLs, buys spread round-robin")
	sku := flag.String("sku", "loadgen", "SKU to buy")
	stock := flag.Int64("stock", 100000, "units to stock before the run (0: leave the stock as it is)")
	n := flag.Int("n", 20000, "buy requests")
	c := flag.Int("c", 64, "concurrent buyers")
	qty := flag.Int64("qty", 1, "units per buy")
	prefix := flag.String("order-prefix", "", "order ID prefix (default: unique per run)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, strings.Split(*urls, ","), *sku, *stock, *n, *c, *qty, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, urls []string, sku string, stock int64, n, c int, qty int64, prefix string) error {
	client := load.NewClient(c)
	if stock > 0 {
		// Stocking is an admin call: the token the services were started with.
		if err := load.SetStock(ctx, client, urls[0], os.Getenv("SECKILL_ADMIN_TOKEN"), sku, stock); err != nil {
			return err
		}
	}
	before, err := load.Stock(ctx, client, urls[0], sku)
	if err != nil {
		return err
	}
	if prefix == "" {
		prefix = fmt.Sprintf("loadgen-%d-", os.Getpid())
	}
	res := load.Run(ctx, client, load.Config{URLs: urls, SKU: sku, Qty: qty, Requests: n, Concurrency: c, OrderPrefix: prefix})
	after, err := load.Stock(ctx, client, urls[0], sku)
	if err != nil {
		return err
	}
	fmt.Println(res)
	gone := before - after
	fmt.Printf("audit: stock %d → %d, gone %d, acknowledged %d", before, after, gone, res.Acked)
	switch {
	case res.Acked > gone:
		fmt.Printf(": OVERSOLD by %d\n", res.Acked-gone)
	case res.Acked < gone && res.Failed == 0:
		fmt.Printf(": %d units gone unacknowledged\n", gone-res.Acked)
	default:
		fmt.Println(": ok")
	}
	return nil
}
