package redislock

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/internal/rediskeys"
)

// adversarial returns every string of up to three atoms chosen to break a
// key scheme: the hash-tag braces, the separators the names use, the
// stand-in tag of a SKU with a brace, non-ASCII, a long run.
func adversarial() []string {
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
	grow("", 3)
	return out
}

// Every key an order uses is a function of its kind and of (SKU, order
// ID) that no other pair shares — under every valid prefix — and a line's
// key is in its SKU's slot.
func TestAtomic_keys_injective(t *testing.T) {
	strs := adversarial()
	var valid []string
	for _, s := range strs {
		if stockguard.ValidateID(s) == nil && stockguard.ValidateSKU(s) == nil {
			valid = append(valid, s)
		}
	}
	for _, prefix := range []string{"", "app:", "a/b#:", "é"} {
		a := NewAtomic(closedClient(t), WithPrefix(prefix))
		if a.err != nil {
			t.Fatalf("prefix %q: %v", prefix, a.err)
		}
		seen := make(map[string]string, len(valid)*len(valid)+3*len(valid))
		claim := func(key, who string) {
			if other, dup := seen[key]; dup {
				t.Fatalf("prefix %q: %s and %s share key %q", prefix, other, who, key)
			}
			seen[key] = who
		}
		for _, sku := range valid {
			claim(a.keys.Stock(sku), fmt.Sprintf("stock(%q)", sku))
			claim(a.holdsKey(sku), fmt.Sprintf("holds(%q)", sku))
			claim(a.orderKey(sku), fmt.Sprintf("order(%q)", sku))
			for _, id := range valid {
				key := a.lineKey(sku, id)
				claim(key, fmt.Sprintf("line(%q, %q)", sku, id))
				if slot(key) != slot(a.keys.Stock(sku)) {
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
