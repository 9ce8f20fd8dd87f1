package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// A buyer is who the shop's login says it is: the login issues each
// buyer a token, "<buyer>.<hex HMAC-SHA256(key, buyer)>", under a key it
// shares with the service (SECKILL_BUYER_KEY), and the buyer sends it in
// the Seckill-Buyer header of every buy and order read. The service
// checks the MAC, and nothing else: it keeps no sessions.
const (
	// buyerHeader carries the buyer's token.
	buyerHeader = "Seckill-Buyer"
	// envBuyerKey names the environment variable holding the key the
	// buyer tokens are signed with.
	envBuyerKey = "SECKILL_BUYER_KEY"
	// minBuyerKeyLen is the shortest key accepted: 128 bits of hex.
	minBuyerKeyLen = 32
	// maxBuyerLen bounds a buyer ID, so that its allowance SKU fits the
	// library's 64 bytes.
	maxBuyerLen = 48
)

// validBuyer reports whether b is a buyer ID: 1–maxBuyerLen ASCII
// letters, digits, '-' or '_'. The narrow alphabet keeps a buyer ID free
// of the separators the order key and the token use.
func validBuyer(b string) bool {
	if b == "" || len(b) > maxBuyerLen {
		return false
	}
	for _, c := range []byte(b) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// buyerMAC is the token's MAC of buyer under key.
func buyerMAC(key []byte, buyer string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(buyer))
	return mac.Sum(nil)
}

// buyerOf returns the buyer r's token names, when its MAC is right.
func (s *server) buyerOf(r *http.Request) (string, bool) {
	buyer, sum, ok := strings.Cut(r.Header.Get(buyerHeader), ".")
	if !ok || !validBuyer(buyer) {
		return "", false
	}
	got, err := hex.DecodeString(sum)
	if err != nil {
		return "", false
	}
	return buyer, hmac.Equal(got, buyerMAC(s.buyerKey, buyer))
}

// orderKey is the library's ID of buyer's order id: two buyers' equal
// IDs are two orders, and one buyer cannot name another's. The buyer ID
// holds no newline, so the pair is read back one way only.
func orderKey(buyer, id string) string {
	sum := sha256.Sum256([]byte(buyer + "\n" + id))
	return "o:" + hex.EncodeToString(sum[:])
}

// registrationKey is the library's ID of the restock that gives buyer its
// allowance (see server.registerOnce).
func registrationKey(buyer string) string { return "reg:" + buyer }

// restockKey is the library's ID of an admin's restock under id.
func restockKey(id string) string { return "restock:" + id }

// reservedPrefix starts the SKUs the service keeps for itself: the
// buyers' allowances. A client's SKU cannot start with it.
const reservedPrefix = "~"

// allowanceSKU is the SKU whose stock is what buyer may still have out on
// open orders: every order takes its units from it too, in the same
// all-or-nothing order, and a return or an expired hold gives them back.
func allowanceSKU(buyer string) string { return reservedPrefix + "allowance:" + buyer }
