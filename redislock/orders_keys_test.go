package redislock

import (
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/strategy"
)

// adversarial returns every valid SKU and order ID of up to n atoms chosen
// to break a key scheme: the hash-tag braces, the separators the names
// use, the stand-in tags of SKUs with a brace, non-ASCII; and a long one.
func adversarial(n int) []string {
	atoms := []string{"}", "{", "/", "#", ":", "a", "é", "1", rediskeys.Tag("/}"), rediskeys.Tag("}"), rediskeys.Tag("/a}")}
	out := []string{strings.Repeat("long}/", 20)}
	var grow func(s string, n int)
	grow = func(s string, n int) {
		if s != "" {
			out = append(out, s)
		}
		if n == 0 {
			return
		}
		for _, a := range atoms {
			grow(s+a, n-1)
		}
	}
	grow("", n)
	return slices.DeleteFunc(out, func(s string) bool {
		return strategy.ValidateID(s) != nil || strategy.ValidateSKU(s) != nil
	})
}

// Every key an order uses is a function of its kind and of (SKU, order
// ID) that no other pair shares — under every valid prefix — and a line's
// key is in its SKU's slot.
func TestAtomic_keys_injective(t *testing.T) {
	skus, ids := adversarial(2), adversarial(3)
	// A prefix only precedes everything; one plain, one of separators.
	for _, prefix := range []string{"", "a/b#:é"} {
		a, err := NewAtomic(closedClient(t), WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		type owner struct{ kind, sku, id string }
		seen := make(map[string]owner, len(skus)*len(ids)+2*len(skus)+len(ids))
		claim := func(key string, who owner) {
			if other, dup := seen[key]; dup {
				t.Fatalf("prefix %q: %+v and %+v share key %q", prefix, other, who, key)
			}
			seen[key] = who
		}
		for _, id := range ids {
			claim(a.orderKey(id), owner{"order", "", id})
		}
		for _, sku := range skus {
			claim(a.keys.Stock(sku), owner{"stock", sku, ""})
			claim(a.holdsKey(sku), owner{"holds", sku, ""})
			stockSlot := slot(a.keys.Stock(sku))
			for _, id := range ids {
				key := a.lineKey(sku, id)
				claim(key, owner{"line", sku, id})
				if slot(key) != stockSlot {
					t.Fatalf("prefix %q: line(%q, %q) = %q is not in the slot of its SKU's stock", prefix, sku, id, key)
				}
			}
		}
	}
}

// The pair of the review: SKU "/a}" with order "o1", and SKU
// "<tag of /a}>" with order "a}/o1". Two-phase takes of each must touch
// only their own SKU.
func TestAtomic_twoPhase_lineKeysOfTwoOrdersDiffer(t *testing.T) {
	rdb := backendstest.RedisClient(t)
	a := newOrders(rdb, redistest.Prefix(t, rdb), true)
	ctx := t.Context()
	braced, tagged := "/a}", rediskeys.Tag("/a}")
	stockAll(t, a, 10, braced, tagged)
	if err := a.Take(ctx, "o1", line(braced, 3)); err != nil {
		t.Fatal(err)
	}
	if err := a.Take(ctx, "a}/o1", line(tagged, 4)); err != nil {
		t.Fatal(err)
	}
	if err := a.Return(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	wantLevels(t, a, map[string]int64{braced: 10, tagged: 6})
	wantState(t, a, "o1", stockguard.OrderReturned)
	wantState(t, a, "a}/o1", stockguard.OrderTaken)
}
