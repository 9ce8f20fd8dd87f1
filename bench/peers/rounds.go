package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Case is a scenario and the peers compared in it, with the servers whose
// commands count.
type Case struct {
	Scenario Scenario
	Peers    []Peer
	Servers  []redis.UniversalClient
}

// Masters is how many servers Standard needs: Redlock's largest quorum.
const Masters = 5

// Standard returns the standard cases on srv's servers (at least Masters;
// the single-server cases use the first), their keys under run: 1 and 64
// goroutines on fresh keys, 64 goroutines waiting on one key, and Redlock
// over 3 and 5 masters against redsync over the same. close closes the
// peers' own clients.
func Standard(srv *Servers, run string) (cases []Case, close func() error, err error) {
	if len(srv.Clients) < Masters {
		return nil, nil, fmt.Errorf("peers: %d servers, %d needed", len(srv.Clients), Masters)
	}
	prefix := run + ":"
	one := srv.Clients[:1]
	rueidis, err := Rueidislock(srv.Addrs[0], prefix)
	if err != nil {
		return nil, nil, err
	}
	single := []Peer{Stockguard(one[0], prefix), BSM(one[0], prefix), Redsync(one, prefix), rueidis}
	waiting := []Peer{Stockguard(one[0], prefix), StockguardPolling(one[0], prefix), BSM(one[0], prefix), Redsync(one, prefix), rueidis}
	three, five := srv.Clients[:3], srv.Clients[:5]
	cases = []Case{
		{Scenario{Name: "1 goroutine, fresh keys", Goroutines: 1}, single, one},
		{Scenario{Name: "64 goroutines, fresh keys", Goroutines: 64}, single, one},
		{Scenario{Name: "64 goroutines, one key", Goroutines: 64, Shared: true}, waiting, one},
		{Scenario{Name: "Redlock, 3 masters, 64 goroutines, fresh keys", Goroutines: 64}, []Peer{Redlock(three, prefix), Redsync(three, prefix)}, three},
		{Scenario{Name: "Redlock, 5 masters, 64 goroutines, fresh keys", Goroutines: 64}, []Peer{Redlock(five, prefix), Redsync(five, prefix)}, five},
	}
	return cases, rueidis.Close, nil
}

// NewRun returns a fresh key prefix for one run: "pb" and 12 hex digits.
func NewRun() string {
	var b [6]byte
	rand.Read(b[:]) // documented never to return an error
	return "pb" + hex.EncodeToString(b[:])
}

// Rounds measures every peer of every case rounds times for d each,
// alternating: each round runs every case, and within it every peer, the
// peers' order rotating from round to round so that none always goes
// first. After each measurement the keys under run are deleted, outside
// the measured time. progress, if not nil, gets a line per measurement.
// The result holds, per case, every peer's measurements.
func Rounds(ctx context.Context, cases []Case, run string, rounds int, d time.Duration, progress io.Writer) ([][]Measurement, error) {
	out := make([][]Measurement, len(cases))
	for r := range rounds {
		for ci, c := range cases {
			n := len(c.Peers)
			for k := range n {
				p := c.Peers[(k+r)%n]
				m, err := Measure(ctx, p, c.Scenario, d, c.Servers, run)
				if err != nil {
					return nil, err
				}
				out[ci] = append(out[ci], m)
				if progress != nil {
					fmt.Fprintf(progress, "round %d  %-48s %-22s %9.0f cycles/s %6.1f cmds/acq  p99 %v\n",
						r+1, c.Scenario.Name, p.Name, m.Rate(), m.PerAcquisition(), m.P99.Round(10*time.Microsecond))
				}
				if err := deletePrefix(ctx, c.Servers, run); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// deletePrefix removes every key starting with prefix from servers.
func deletePrefix(ctx context.Context, servers []redis.UniversalClient, prefix string) error {
	var errs []error
	for _, c := range servers {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		flush := func() {
			if len(batch) > 0 {
				errs = append(errs, c.Unlink(ctx, batch...).Err())
				batch = batch[:0]
			}
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				flush()
			}
		}
		flush()
		errs = append(errs, iter.Err())
	}
	return errors.Join(errs...)
}

// Summary is one peer's medians over the rounds of a case.
type Summary struct {
	Peer                          string
	Rate, PerAcquisition          float64
	P99                           time.Duration
	Rates                         []float64 // every round's rate, in round order
	GaveUp, ReleaseFailed         int64     // over all rounds
	RatioToFirst, CommandsToFirst float64   // the first peer's median over this one's
}

// Summarize returns each peer's medians over its measurements, peers in
// the order they first appear, with the first peer (the case's own lock)
// compared to each.
func Summarize(ms []Measurement) []Summary {
	var order []string
	by := map[string][]Measurement{}
	for _, m := range ms {
		if _, ok := by[m.Peer]; !ok {
			order = append(order, m.Peer)
		}
		by[m.Peer] = append(by[m.Peer], m)
	}
	out := make([]Summary, len(order))
	for i, name := range order {
		list := by[name]
		s := Summary{Peer: name}
		var rates, per []float64
		var p99 []time.Duration
		for _, m := range list {
			rates = append(rates, m.Rate())
			per = append(per, m.PerAcquisition())
			p99 = append(p99, m.P99)
			s.GaveUp += m.GaveUp
			s.ReleaseFailed += m.ReleaseFailed
		}
		s.Rates = slices.Clone(rates)
		s.Rate, s.PerAcquisition, s.P99 = median(rates), median(per), median(p99)
		out[i] = s
	}
	for i := range out {
		if out[i].Rate > 0 {
			out[i].RatioToFirst = out[0].Rate / out[i].Rate
		}
		if out[i].PerAcquisition > 0 {
			out[i].CommandsToFirst = out[0].PerAcquisition / out[i].PerAcquisition
		}
	}
	return out
}

func median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// WriteMarkdown writes a table per case: each peer's median cycles/s,
// commands per acquisition and p99 time to acquire, and the case's first
// peer (the stockguard lock) as a multiple of each.
func WriteMarkdown(w io.Writer, cases []Case, results [][]Measurement) {
	for ci, c := range cases {
		sums := Summarize(results[ci])
		if len(sums) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (median of %d rounds)\n\n", c.Scenario.Name, len(sums[0].Rates))
		fmt.Fprintf(w, "| lock | cycles/s | rounds | cmds/acquisition | p99 acquire | %s's cycles/s ÷ lock's | %s's cmds/acq ÷ lock's |\n", sums[0].Peer, sums[0].Peer)
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|")
		for _, s := range sums {
			rounds := ""
			for i, r := range s.Rates {
				if i > 0 {
					rounds += " / "
				}
				rounds += fmt.Sprintf("%.0f", r)
			}
			gave := ""
			if s.GaveUp > 0 {
				gave += fmt.Sprintf(" (%d gave up)", s.GaveUp)
			}
			if s.ReleaseFailed > 0 {
				gave += fmt.Sprintf(" (%d releases failed)", s.ReleaseFailed)
			}
			fmt.Fprintf(w, "| %s | %.0f%s | %s | %.1f | %v | %.2f× | %.2f× |\n",
				s.Peer, s.Rate, gave, rounds, s.PerAcquisition, s.P99.Round(10*time.Microsecond), s.RatioToFirst, s.CommandsToFirst)
		}
	}
}
