// Package netgate holds what tests put between a client and its server to hold what the client sends, as a slow network does: a Gate the test opens and shuts, and Late, a seeded network that delivers a random share of writes late, also after the client left; only _test.go files import it.
package netgate
