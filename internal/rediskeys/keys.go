// Package rediskeys names the Redis keys of a SKU so that all of them share one cluster slot.
package rediskeys

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Keys builds key names under an optional prefix. The zero value has no prefix.
type Keys struct {
	Prefix string
}

// Stock is the key holding sku's stock level: "<prefix>stock:{sku}".
func (k Keys) Stock(sku string) string { return k.Name("stock", sku) }

// Lock is the key of sku's lock: "<prefix>lock:{sku}".
func (k Keys) Lock(sku string) string { return k.Name("lock", sku) }

// Fence is the key of sku's fencing counter: "<prefix>fence:{sku}".
func (k Keys) Fence(sku string) string { return k.Name("fence", sku) }

// Name returns "<prefix><kind>:{sku}". Redis Cluster hashes only the part
// between the first "{" and the next "}", so every key of one SKU lands in the
// same slot and a script may touch several of them. A SKU containing "}"
// would end that hash tag early (or make it empty, so the whole key is hashed
// and a SKU's keys scatter across slots); such a SKU gets a tag derived from
// its hash, followed by the SKU itself so the name stays unique.
func (k Keys) Name(kind, sku string) string {
	if !strings.Contains(sku, "}") {
		return k.Prefix + kind + ":{" + sku + "}"
	}
	return k.Prefix + kind + ":{" + Tag(sku) + "}" + sku
}

// Tag returns a brace-free stand-in for sku, used as its hash tag.
func Tag(sku string) string {
	sum := sha256.Sum256([]byte(sku))
	return "#" + hex.EncodeToString(sum[:8])
}
