// Package netgate holds a gate that tests put between a client and its server to hold what the client sends, as a slow network does; only _test.go files import it.
package netgate
