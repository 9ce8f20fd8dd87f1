// Package rediskeys names the Redis keys of a SKU so that all of them share one cluster slot.
package rediskeys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// Keys builds key names under an optional prefix. The zero value has no
// prefix. Every name is a function of its kind and its SKU (Name) or its
// SKU and ID (Pair) that no other SKU or pair shares, under any prefix
// ValidatePrefix accepts.
type Keys struct {
	Prefix string
}

// ValidatePrefix reports whether prefix may start every key name: it must
// not contain "{" or "}", since Redis Cluster hashes the first "{…}" of a
// name and a brace in the prefix would take the place of the SKU's hash
// tag (every key in one slot, or a SKU's keys scattered across slots).
func ValidatePrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return errors.New("key prefix " + strconv.Quote(prefix) + " contains a brace: it would override the SKUs' hash tags")
	}
	return nil
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
//
// Read back, a name gives its SKU: the tag runs to the first "}" (neither a
// SKU without "}" nor a Tag has one); nothing after it means the tag is the
// SKU, else the rest is. So no two SKUs share a name.
func (k Keys) Name(kind, sku string) string {
	if !strings.Contains(sku, "}") {
		return k.Prefix + kind + ":{" + sku + "}"
	}
	return k.Prefix + kind + ":{" + Tag(sku) + "}" + sku
}

// Pair returns the name of a record of id under sku, in sku's slot:
// "<prefix><kind>:{<tag>}<len(id)>:<id>", followed by the SKU when its tag
// is a Tag, as in Name. The ID goes before the SKU, length first, so it
// ends where its length says, and the rest reads back as Name's does: no
// two (sku, id) pairs share a name, whatever bytes either holds.
// (Appending "/<id>" to Name would not do: Name's SKU suffix can itself
// hold "/", so SKU "/a}" with ID "o1" and SKU Tag("/a}") with ID "a}/o1"
// would meet.)
func (k Keys) Pair(kind, sku, id string) string {
	tag, rest := sku, ""
	if strings.Contains(sku, "}") {
		tag, rest = Tag(sku), sku
	}
	return k.Prefix + kind + ":{" + tag + "}" + strconv.Itoa(len(id)) + ":" + id + rest
}

// Tag returns a brace-free stand-in for sku, used as its hash tag.
func Tag(sku string) string {
	sum := sha256.Sum256([]byte(sku))
	return "#" + hex.EncodeToString(sum[:8])
}
