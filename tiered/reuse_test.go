package tiered

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/redislock"
)

// An order or restock ID reused after the front forgot it
// (WithOrderRetention) is refused on the front while the back remembers it:
// answered from the back's ledger, never applied afresh on the front
// alone; the tiers agree.
func TestOrders_idReusedPastTheFrontsRetention_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	o := must.New(New(r.rdb, r.back, WithPrefix(r.prefix), WithFront(redislock.WithOrderRetention(time.Second))))
	stock(t, o, 10, "a")
	if err := o.Take(ctx, "reused-1", line("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := o.Restock(ctx, "restock-1", "a", 2); err != nil {
		t.Fatal(err)
	}
	c := r.consumer(nil)
	r.applyAll(t, c)
	for { // the front forgets both IDs a second after their last change
		// (a restock's is a mismatch either way: its record is watched)
		_, err1 := o.Order(ctx, "reused-1")
		n, err2 := r.rdb.Exists(ctx, recordKeys(r.prefix).Name("order", "restock-1")).Result()
		if err2 != nil {
			t.Fatal(err2)
		}
		if errors.Is(err1, stockguard.ErrUnknownOrder) && n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A script call carrying orders of the forgotten ID and of a fresh one
	// (a batch) applies nothing, and names the forgotten one alone.
	fc := newFencedClient(r.rdb, StreamKey(r.prefix), r.prefix)
	keys := []string{recordKeys(r.prefix).Name("order", "probe-1"), recordKeys(r.prefix).Name("order", "reused-1")}
	cmd := redis.NewCmd(ctx, "eval", "redis.call('SET', KEYS[1], 'x')", len(keys), keys[0], keys[1])
	err := fc.Process(withEpoch(ctx, *o.epoch.Load()), cmd)
	if got, ok := seen(err); !ok || !slices.Equal(got, keys[1:]) {
		t.Errorf("a call on a fresh and a forgotten ID = %v, want the forgotten one's key %q", err, keys[1])
	}
	if n, err := r.rdb.Exists(ctx, keys[0]).Result(); err != nil || n != 0 {
		t.Errorf("the refused call wrote the fresh order's key: %d, %v", n, err)
	}
	// Fresh orders placed beside a take under the forgotten ID, in the
	// front's batches, are taken; the forgotten ID is answered by the back.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := o.Take(ctx, fmt.Sprintf("fresh-%d", i), line("a", 1)); err != nil {
				t.Errorf("a fresh take beside a forgotten ID: %v", err)
			}
		})
		wg.Go(func() {
			if err := o.Take(ctx, "reused-1", line("a", 1)); err != nil {
				t.Errorf("reused Take beside fresh ones = %v, want nil (taken already)", err)
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		if err := o.Return(ctx, fmt.Sprintf("fresh-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A restock's ID the front forgot is still the contract's mismatch for
	// Confirm, Return and Order: the back has it.
	if _, err := o.Order(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Order of a forgotten restock's ID = %v, want ErrOrderMismatch", err)
	}
	if err := o.Return(ctx, "restock-1"); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("Return of a forgotten restock's ID = %v, want ErrOrderMismatch", err)
	}
	// Answered from the back's ledger, nothing applied afresh on the front.
	if err := o.Take(ctx, "reused-1", line("a", 1)); err != nil {
		t.Errorf("reused Take, the same lines = %v, want nil (taken already)", err)
	}
	if err := o.Take(ctx, "reused-1", line("a", 2)); !errors.Is(err, stockguard.ErrOrderMismatch) {
		t.Errorf("reused Take, other lines = %v, want ErrOrderMismatch", err)
	}
	if err := o.Restock(ctx, "restock-1", "a", 2); err != nil {
		t.Errorf("reused Restock = %v, want nil (restocked already)", err)
	}
	if _, err := o.Order(ctx, "reused-1"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Errorf("Order of a forgotten ID = %v, want ErrUnknownOrder", err)
	}
	wantStock(t, "front", o, "a", 11)
	r.applyAll(t, c)
	tiersAgree(t, o, r.back, "a")
}
