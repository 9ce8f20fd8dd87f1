package rediskeys

import (
	"slices"
	"strings"
	"testing"
)

// hashTag is the part of key Redis Cluster hashes: the first "{…}" with
// something inside, else the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestKeys_shareOneSlotPerSKU(t *testing.T) {
	k := Keys{Prefix: "app1:"}
	for _, sku := range []string{"plain", "{x}", "}", "}x", "a}b", "{", "{}", "*", "库存", "'; DROP TABLE stock;--"} {
		stock, lock, fence := k.Stock(sku), k.Lock(sku), k.Fence(sku)
		if !strings.HasPrefix(stock, "app1:stock:") || !strings.HasPrefix(lock, "app1:lock:") || !strings.HasPrefix(fence, "app1:fence:") {
			t.Errorf("%q: keys %q %q %q lack prefix or kind", sku, stock, lock, fence)
		}
		tag := hashTag(stock)
		if tag == stock || hashTag(lock) != tag || hashTag(fence) != tag {
			t.Errorf("%q: tags %q %q %q differ or are missing", sku, tag, hashTag(lock), hashTag(fence))
		}
	}
}

func TestKeys_distinctSKUsDistinctKeys(t *testing.T) {
	k := Keys{}
	skus := []string{"a", "a}", "}a", Tag("a}"), Tag("a}") + "}a}", "{a}", "a ", "A"}
	seen := map[string]string{}
	for _, sku := range skus {
		key := k.Stock(sku)
		if other, dup := seen[key]; dup {
			t.Errorf("SKUs %q and %q share key %q", other, sku, key)
		}
		seen[key] = sku
	}
}

// atomStrings returns base and every string of 1 to n atoms.
func atomStrings(base, atoms []string, n int) []string {
	out := slices.Clone(base)
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
	return out
}

// Pair is injective in (sku, id) and keeps sku's slot, over SKUs of up to
// two and IDs of up to three adversarial atoms, and the review's pair: SKU
// "/a}" with ID "o1" against SKU Tag("/a}") with ID "a}/o1".
func TestKeys_Pair_injective(t *testing.T) {
	atoms := []string{"}", "{", "/", "#", ":", "1", "é", Tag("/}"), Tag("}")}
	base := []string{"o1", "/a}", "a}/o1", Tag("/a}"), strings.Repeat("}/", 64)}
	skus, ids := atomStrings(base, atoms, 2), atomStrings(base, atoms, 3)
	k := Keys{Prefix: "p:"}
	seen := make(map[string][2]string, len(skus)*len(ids))
	for _, sku := range skus {
		tag := hashTag(k.Stock(sku))
		for _, id := range ids {
			key := k.Pair("line", sku, id)
			if other, dup := seen[key]; dup {
				t.Fatalf("(%q, %q) and (%q, %q) share key %q", other[0], other[1], sku, id, key)
			}
			seen[key] = [2]string{sku, id}
			if hashTag(key) != tag {
				t.Fatalf("Pair(%q, %q) = %q hashes on %q, not its SKU's tag %q", sku, id, key, hashTag(key), tag)
			}
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, c := range []struct {
		prefix string
		ok     bool
	}{{"", true}, {"app:", true}, {"a/b#:é", true}, {"{app}:", false}, {"app{", false}, {"}", false}} {
		if err := ValidatePrefix(c.prefix); (err == nil) != c.ok {
			t.Errorf("ValidatePrefix(%q) = %v, want ok %v", c.prefix, err, c.ok)
		}
	}
}
