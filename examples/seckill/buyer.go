package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A buyer is who the shop's login says it is: the login issues each
// buyer a token, "<buyer>.<issued>.<expires>.<hex HMAC-SHA256(key,
// <buyer>.<issued>.<expires>)>" with the times in Unix seconds, under a
// key it shares with the service (SECKILL_BUYER_KEY), and the buyer sends
// it in the Seckill-Buyer header of every buy and order read. The service
// checks the MAC, that the token has not expired and expires within
// -buyer-token-max-ttl, and that it was not issued before the buyer's
// tokens were revoked (revoke.go); it keeps no sessions.
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

// buyerMAC is the token's MAC of "<buyer>.<issued>.<expires>" under key.
func buyerMAC(key []byte, signed string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	return mac.Sum(nil)
}

// buyerOf returns the buyer r's token names and when it was issued, when
// its MAC is right and it is valid now: not expired, and expiring within
// maxTokenTTL (a token the login made for ever is refused). Revocation is
// the caller's to check.
func (s *server) buyerOf(r *http.Request) (buyer string, issued int64, ok bool) {
	token := r.Header.Get(buyerHeader)
	cut := strings.LastIndexByte(token, '.')
	if cut < 0 {
		return "", 0, false
	}
	signed, sum := token[:cut], token[cut+1:]
	fields := strings.Split(signed, ".")
	if len(fields) != 3 || !validBuyer(fields[0]) {
		return "", 0, false
	}
	got, err := hex.DecodeString(sum)
	if err != nil || !hmac.Equal(got, buyerMAC(s.buyerKey, signed)) {
		return "", 0, false
	}
	issued, err1 := strconv.ParseInt(fields[1], 10, 64)
	expires, err2 := strconv.ParseInt(fields[2], 10, 64)
	now := time.Now().Unix()
	return fields[0], issued, err1 == nil && err2 == nil && now < expires && expires <= now+int64(s.maxTokenTTL/time.Second)
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
