package backends

import (
	"syscall"
	"time"
)

// sleepUntil blocks until t on a thread of its own (nanosleep): a Go timer
// of less than a millisecond waits a millisecond or more whenever the
// process is otherwise idle (the runtime's poller counts whole
// milliseconds), which would turn a 0.2 ms round trip into 2 ms.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(d.Nanoseconds())
		if err := syscall.Nanosleep(&ts, nil); err != nil && err != syscall.EINTR {
			time.Sleep(time.Until(t))
			return
		}
	}
}
