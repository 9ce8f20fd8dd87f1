// Command loadgen drives buy requests at one or more seckill instances,
// reports requests/s and latency percentiles, and audits the sale: units
// acknowledged with 200 against the stock gone, and every order on the
// backend as its buyer was told.
//
//	export SECKILL_ADMIN_TOKEN=... SECKILL_BUYER_KEY=...   # as the services have them
//	go run ./cmd/loadgen -urls http://127.0.0.1:8081,http://127.0.0.1:8082 -admin-url http://127.0.0.1:9091 -stock 100000 -n 50000 -c 64
//
// With -timeout and -retries, a buy that got no answer in time or a 5xx
// is sent again with the same order ID, as a careful client does.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/examples/seckill/internal/load"
)

type options struct {
	urls             []string
	adminURL         string
	sku              string
	stock            int64
	n, c, buyers     int
	qty              int64
	prefix           string
	timeout          time.Duration
	retries          int
	noOrderID, check bool
}

func main() {
	var o options
	urls := flag.String("urls", "http://127.0.0.1:8080", "comma-separated service URLs, buys spread round-robin")
	flag.StringVar(&o.adminURL, "admin-url", "http://127.0.0.1:9090", "a copy's admin API: stocking, registering the buyers, the audit")
	flag.StringVar(&o.sku, "sku", "loadgen", "SKU to buy")
	flag.Int64Var(&o.stock, "stock", 100000, "units to stock before the run (0: leave the stock as it is)")
	flag.IntVar(&o.n, "n", 20000, "buy requests")
	flag.IntVar(&o.c, "c", 64, "concurrent buyers")
	flag.IntVar(&o.buyers, "buyers", 64, "buyers, registered before the run (each needs -buyer-cap ≥ n/buyers × qty on the services)")
	flag.Int64Var(&o.qty, "qty", 1, "units per buy")
	flag.StringVar(&o.prefix, "order-prefix", "", "order ID prefix (default: unique per run)")
	flag.DurationVar(&o.timeout, "timeout", 0, "bound on one attempt (0: 30 s)")
	flag.IntVar(&o.retries, "retries", 0, "times a buy is sent again, same order ID, after no answer or a 5xx")
	flag.BoolVar(&o.noOrderID, "no-order-id", false, "send buys without order IDs (-strategy mutex-counterexample)")
	flag.BoolVar(&o.check, "check-orders", true, "after the run, read every order from the admin API and check it against its answer")
	flag.Parse()
	o.urls = strings.Split(*urls, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	client := load.NewClient(o.c)
	token := os.Getenv("SECKILL_ADMIN_TOKEN")
	if o.stock > 0 {
		if err := load.SetStock(ctx, client, o.adminURL, token, o.sku, o.stock); err != nil {
			return err
		}
	}
	if err := load.Register(ctx, client, o.adminURL, token, o.buyers); err != nil {
		return err
	}
	before, err := load.Stock(ctx, client, o.urls[0], o.sku)
	if err != nil {
		return err
	}
	if o.prefix == "" {
		o.prefix = fmt.Sprintf("loadgen-%d-", os.Getpid())
	}
	res := load.Run(ctx, client, load.Config{URLs: o.urls, SKU: o.sku, Qty: o.qty, Requests: o.n, Concurrency: o.c,
		OrderPrefix: o.prefix, Buyers: o.buyers, BuyerKey: os.Getenv("SECKILL_BUYER_KEY"), NoOrderID: o.noOrderID,
		Timeout: o.timeout, Retries: o.retries})
	after, err := load.Stock(ctx, client, o.urls[0], o.sku)
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
	if o.check && !o.noOrderID {
		return checkOrders(ctx, client, o, token, res, gone)
	}
	return nil
}

// checkOrders reads every order of the run from the admin API: each
// answered 200 must be taken once with its units, each answered otherwise
// absent, and each never answered either; the units of the orders taken
// must be the stock gone.
func checkOrders(ctx context.Context, client *http.Client, o options, token string, res load.Result, gone int64) error {
	answer := make(map[load.Order]string, o.n)
	for _, a := range res.Accepted {
		answer[a] = "200"
	}
	for _, u := range res.Unknown {
		answer[u] = "none"
	}
	var next, taken, absent, unknownTaken, unknownAbsent, wrong atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range o.c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= o.n || ctx.Err() != nil {
					return
				}
				order := load.Order{Buyer: load.Buyer(i % max(o.buyers, 1)), ID: fmt.Sprintf("%s%d", o.prefix, i)}
				code, isTaken, err := readOrder(ctx, client, o, token, order)
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				switch a := answer[order]; {
				case a == "200" && isTaken:
					taken.Add(1)
				case a == "" && code == http.StatusNotFound:
					absent.Add(1)
				case a == "none" && isTaken:
					unknownTaken.Add(1)
				case a == "none" && code == http.StatusNotFound:
					unknownAbsent.Add(1)
				default:
					wrong.Add(1)
					fmt.Printf("order %s/%s: answered %q, on the backend: HTTP %d taken %v\n", order.Buyer, order.ID, a, code, isTaken)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	fmt.Printf("orders: %d answered 200 and taken once; %d answered otherwise and absent; %d never answered: %d taken, %d absent; %d wrong\n",
		taken.Load(), absent.Load(), len(res.Unknown), unknownTaken.Load(), unknownAbsent.Load(), wrong.Load())
	if units := (taken.Load() + unknownTaken.Load()) * o.qty; units != gone {
		return fmt.Errorf("orders taken hold %d units, %d gone", units, gone)
	}
	if wrong.Load() != 0 {
		return fmt.Errorf("%d orders disagree with their answers", wrong.Load())
	}
	return nil
}

// readOrder reads one order from the admin API, again while the service
// answers 5xx (the backend may still be paused), and reports its status
// and whether it is taken with the run's one line.
func readOrder(ctx context.Context, client *http.Client, o options, token string, order load.Order) (int, bool, error) {
	var reply struct {
		State string `json:"state"`
		Lines []struct {
			SKU string `json:"sku"`
			Qty int64  `json:"qty"`
		} `json:"lines"`
	}
	for {
		code, err := load.Get(ctx, client, o.adminURL+"/buyers/"+order.Buyer+"/orders/"+url.PathEscape(order.ID), token, &reply)
		if err == nil && code < 500 {
			taken := code == http.StatusOK && reply.State == "taken" && len(reply.Lines) == 1 && reply.Lines[0].SKU == o.sku && reply.Lines[0].Qty == o.qty
			return code, taken, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
