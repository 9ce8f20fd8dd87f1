package rediskeys

import (
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
