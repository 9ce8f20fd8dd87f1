//go:build !linux

package backends

import "time"

// sleeper waits until a given time.
type sleeper struct{}

func newSleeper() *sleeper { return &sleeper{} }

// until returns at t or later.
func (*sleeper) until(t time.Time) { time.Sleep(time.Until(t)) }

func (*sleeper) close() {}
