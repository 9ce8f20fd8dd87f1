package bench

import (
	"math"
	"strconv"
	"time"
)

// schedule is an open-loop worker's timetable, as wrk2 keeps one: of a
// run's requests, arriving every 1/Rate seconds from the run's start, worker
// i of W sends numbers i, i+W, i+2W, … Each request's latency runs from its
// intended start, not from when the worker got round to sending it, so a
// stall that holds the workers back shows in the latency of every request
// that should have started during it (coordinated omission corrected): a
// closed-loop worker stuck in a 100 ms call sends nothing meanwhile and
// records one slow request; an open-loop one records the whole backlog.
//
// The worker that falls behind sends at once, with no pause, until it has
// caught up; one that is ahead sleeps until the intended start. Waking late
// by the timer's slack (tens of microseconds) counts as latency, as it
// would for a client.
type schedule struct {
	offset float64 // intended start of the worker's first request, ns since the run's start
	step   float64 // ns between the worker's requests: W/Rate seconds
	next   int64   // index of the worker's next request
	timer  *time.Timer
}

// newSchedule returns worker id's timetable under w; closed-loop (Rate 0),
// one that is not open.
func newSchedule(w Workload, id int) schedule {
	if w.Rate <= 0 {
		return schedule{}
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return schedule{
		offset: float64(id) * 1e9 / w.Rate,
		step:   float64(w.Workers) * 1e9 / w.Rate,
		timer:  t,
	}
}

// open reports whether the load is open-loop.
func (s *schedule) open() bool { return s.step > 0 }

// wait sleeps until the next request's intended start, since base, and
// returns it; it returns false instead when stopped closes first.
// Computing each start from the origin, not by adding up steps, keeps
// rounding from drifting the rate.
func (s *schedule) wait(base time.Time, stopped <-chan struct{}) (time.Duration, bool) {
	at := time.Duration(s.offset + float64(s.next)*s.step)
	s.next++
	if d := at - time.Since(base); d > 0 {
		s.timer.Reset(d)
		select {
		case <-s.timer.C:
		case <-stopped:
			s.timer.Stop()
			return at, false
		}
	}
	return at, true
}

// loop returns "open" for an open-loop workload, else "closed".
func (w Workload) loop() string {
	if w.Rate > 0 {
		return "open"
	}
	return "closed"
}

// LoadText says in a line how w loads the target and what its latencies
// measure, for report headers.
func (w Workload) LoadText() string {
	if w.Rate > 0 {
		return OpenLoadText(offeredText(w.Rate) + " requests/s")
	}
	return "closed-loop: each worker sends its next request when the previous one returns; " +
		"latency from the send (a stall delays the requests behind it unseen)"
}

// OpenLoadText is LoadText for open-loop runs at rates (a text such as
// "20,000 requests/s" or a list of them).
func OpenLoadText(rates string) string {
	return "open-loop at " + rates + " per run, on a fixed schedule over the workers; " +
		"latency from each request's intended start (coordinated omission corrected)"
}

// openLegend explains the open-loop columns under a table.
const openLegend = "OFFERED/S: the schedule's requests per second; ATTEMPTS/S below it means the target fell behind, and the\n" +
	"latencies, from each request's intended start, include the wait.\n"

func offeredText(rate float64) string {
	if rate == 0 {
		return "closed"
	}
	if rate >= 100 || rate == math.Trunc(rate) {
		return count(rate) // whole requests per second are precise enough

	}
	return strconv.FormatFloat(rate, 'g', 4, 64)
}
