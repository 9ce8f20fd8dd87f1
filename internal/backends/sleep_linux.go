package backends

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper waits until a given time with the kernel's precision: a Go timer
// of less than a millisecond waits a millisecond or more whenever the
// process is otherwise idle (the runtime's poller counts whole
// milliseconds), which would turn a 0.2 ms round trip into 2 ms. It arms a
// timerfd and reads it through the runtime's poller, so that the goroutine
// waits without holding a thread. One goroutine uses it at a time.
type sleeper struct {
	fd int
	f  *os.File // nil: no timerfd, Go timers then
}

func newSleeper() *sleeper {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &sleeper{fd: -1}
	}
	return &sleeper{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
}

// until returns at t or later.
func (s *sleeper) until(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if s.f != nil {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
		if unix.TimerfdSettime(s.fd, 0, &spec, nil) == nil {
			var buf [8]byte // the number of expirations
			if _, err := s.f.Read(buf[:]); err == nil {
				return
			}
		}
	}
	time.Sleep(time.Until(t))
}

func (s *sleeper) close() {
	if s.f != nil {
		s.f.Close()
	}
}
