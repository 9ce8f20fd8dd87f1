package stocktest

import (
	"fmt"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
)

// reclaimHolds is how many one-unit holds checkManyExpired leaves to
// expire: more than one reclaiming pass of a backend takes on (the MySQL
// ledger's is 256), so that a reader has to go round more than once.
const reclaimHolds = 300

// reclaimReaders is how many readers race to reclaim them.
const reclaimReaders = 8

// checkManyExpired leaves many holds of one SKU to expire, then has
// several readers reclaim them at once, each through Stock or Order. Every
// Stock must count every expired hold's unit: with nothing held and
// nothing taken, available must be the whole stock at every instant,
// whoever reclaimed which hold and however many there are.
func checkManyExpired(o *orders) {
	ttl := o.suite.HoldTTL
	skus, ok := o.stock("many-expired", reclaimHolds)
	if !ok {
		return
	}
	sku := skus[0]
	ids := make([]string, reclaimHolds)
	for i := range ids {
		ids[i] = o.subj.ID(fmt.Sprintf("many-expired-%03d", i))
	}
	start := time.Now()
	for _, id := range ids {
		if !o.hold(o.a, id, ttl, nil, line(sku, 1)) {
			return
		}
	}
	o.sleepPast(time.Now(), ttl)
	if time.Since(start) < ttl {
		return // the context ended
	}

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		o.r.add(format, args...)
	}
	for g := range reclaimReaders {
		inst := []stockguard.Orders{o.a, o.b}[g%2]
		wg.Go(func() {
			// Odd readers reclaim some holds one by one first, so that
			// Stock meets holds reclaimed under it by others.
			if g%2 == 1 {
				for i := g; i < len(ids); i += reclaimReaders {
					info, err := inst.Order(o.ctx, ids[i])
					switch {
					case err != nil:
						report("Order(%q) of an expired hold: %v", ids[i], err)
						return
					case info.State != stockguard.OrderExpired:
						report("Order(%q) past its deadline: state %v, want expired", ids[i], info.State)
					}
				}
			}
			for range 3 {
				got, err := inst.Stock(o.ctx, sku)
				switch {
				case err != nil:
					report("Stock(%q) with %d expired holds: %v", sku, reclaimHolds, err)
					return
				case got != reclaimHolds:
					report("Stock(%q) = %d with every hold expired, want %d: available + held + taken must stay %d", sku, got, reclaimHolds, reclaimHolds)
				}
			}
		})
	}
	wg.Wait()
	o.levels(map[string]int64{sku: reclaimHolds})
}
