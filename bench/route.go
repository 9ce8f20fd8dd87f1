package bench

import (
	"fmt"
	"time"

	"github.com/stockguard/stockguard/internal/backends"
)

// Route returns the address a client dials to reach the server at addr
// (host:port) across a network round trip of rtt, and the function that
// ends the route: addr itself when rtt is 0, else the address of a
// forwarder on loopback that delays each direction by rtt/2
// (backends.NewDelayedLink). Every connection through it costs the client
// process the forwarding as well (see Result.ClientCPU).
func Route(addr string, rtt time.Duration) (string, func() error, error) {
	if rtt == 0 {
		return addr, func() error { return nil }, nil
	}
	if rtt < 0 {
		return "", nil, fmt.Errorf("bench: negative round trip %v", rtt)
	}
	k, err := backends.NewDelayedLink(addr, rtt/2)
	if err != nil {
		return "", nil, fmt.Errorf("bench: a %v route to %s: %w", rtt, addr, err)
	}
	return k.Addr, k.Close, nil
}

// ErrNoRoute is the error of an Opener that cannot put a round trip
// between its clients and its servers (OpenConfig.RTT).
func ErrNoRoute(backend string) error {
	return fmt.Errorf("bench: %s cannot delay its connections (-rtt): its clients find its servers' addresses themselves", backend)
}
