package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard/bench"
)

// rateSpec is one entry of -rate: an absolute rate of requests per second,
// or a fraction of the target's closed-loop peak at the same worker count.
// The zero value is a closed-loop run.
type rateSpec struct {
	perSecond float64 // absolute rate, when above 0
	ofPeak    float64 // fraction of the closed-loop peak, when above 0
}

func (s rateSpec) closed() bool { return s.perSecond == 0 && s.ofPeak == 0 }

// at returns the rate to offer given the closed-loop peak measured at the
// same worker count (0 when unknown), and false when it cannot be had.
func (s rateSpec) at(peak float64) (float64, bool) {
	switch {
	case s.ofPeak > 0:
		return s.ofPeak * peak, peak > 0
	default:
		return s.perSecond, true
	}
}

func (s rateSpec) String() string {
	switch {
	case s.ofPeak > 0:
		return strconv.FormatFloat(s.ofPeak*100, 'g', -1, 64) + "% of peak"
	case s.perSecond > 0:
		return commas(s.perSecond) + " requests/s"
	}
	return "closed-loop"
}

// parseRates parses -rate: a comma-separated list of requests per second
// ("20000") or percentages of the closed-loop peak ("80%"). The plan is
// one run per entry, sorted (closed-loop first when a percentage needs its
// peak); an empty list is one closed-loop run.
func parseRates(s string) ([]rateSpec, error) {
	if strings.TrimSpace(s) == "" {
		return []rateSpec{{}}, nil
	}
	var abs, rel []rateSpec
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		pct, isPct := strings.CutSuffix(f, "%")
		v, err := strconv.ParseFloat(pct, 64)
		switch {
		case err != nil || !(v > 0):
			return nil, usagef("-rate %q: want a comma-separated list of requests per second (20000) or percentages of the closed-loop peak (80%%), each above 0", s)
		case isPct && v > 1000:
			return nil, usagef("-rate %q: %s%% of the peak is beyond any use (at most 1000%%)", s, pct)
		case isPct:
			if r := (rateSpec{ofPeak: v / 100}); !slices.Contains(rel, r) {
				rel = append(rel, r)
			}
		case v > bench.MaxRate:
			return nil, usagef("-rate %q: %g/s is above the harness's ceiling of %d/s", s, v, bench.MaxRate)
		default:
			if r := (rateSpec{perSecond: v}); !slices.Contains(abs, r) {
				abs = append(abs, r)
			}
		}
	}
	var plan []rateSpec
	if len(rel) > 0 {
		plan = append(plan, rateSpec{}) // the peak the percentages refer to
	}
	slices.SortFunc(rel, func(a, b rateSpec) int { return cmp.Compare(a.ofPeak, b.ofPeak) })
	slices.SortFunc(abs, func(a, b rateSpec) int { return cmp.Compare(a.perSecond, b.perSecond) })
	return append(append(plan, rel...), abs...), nil
}

// loadText describes the plan's load for the report header.
func loadText(c config) string {
	if len(c.rates) == 1 && c.rates[0].closed() {
		return c.workload.LoadText()
	}
	var open []string
	for _, s := range c.rates {
		if !s.closed() {
			open = append(open, s.String())
		}
	}
	text := bench.OpenLoadText(strings.Join(open, ", "))
	if c.rates[0].closed() {
		text = "closed-loop first (the peak), then " + text
	}
	return text
}

// keptUp is the share of its offered rate a run must have sent for its
// latency to count against an SLO: below it the target fell behind the
// schedule, and a short run has not yet shown how far behind it would fall.
const keptUp = 0.95

// writeSLO reports, for each strategy and worker count, the highest offered
// rate whose run kept up and had a p99 within slo.
func writeSLO(w io.Writer, results []*bench.Result, slo time.Duration) error {
	type key struct {
		target         string
		workers, procs int
	}
	var order []key
	best := map[key]*bench.Result{}
	firstMiss := map[key]*bench.Result{}
	for _, r := range results {
		if r.Workload.Rate == 0 {
			continue
		}
		k := key{r.Target, r.Workload.Workers, max(r.Procs, 1)}
		if _, seen := best[k]; !seen {
			order = append(order, k)
			best[k] = nil
		}
		ok := r.Sound() && r.Latency.P99 <= slo && r.AttemptRate >= keptUp*r.Workload.Rate
		if ok && (best[k] == nil || r.Workload.Rate > best[k].Workload.Rate) {
			best[k] = r
		}
		if !ok && (firstMiss[k] == nil || r.Workload.Rate < firstMiss[k].Workload.Rate) {
			firstMiss[k] = r
		}
	}
	if len(order) == 0 {
		_, err := fmt.Fprintf(w, "slo: no open-loop run to hold to p99 ≤ %v (give -rate)\n", slo)
		return err
	}
	fmt.Fprintf(w, "\nslo: highest offered rate with p99 ≤ %v, the schedule kept (sent ≥ %.0f%% of it) and the audit sound:\n", slo, keptUp*100)
	for _, k := range order {
		line := fmt.Sprintf("  %s ×%d: ", k.target, k.workers)
		if k.procs > 1 {
			line = fmt.Sprintf("  %s ×%d in %d procs: ", k.target, k.workers, k.procs)
		}
		if b := best[k]; b != nil {
			line += fmt.Sprintf("%s/s (p99 %v)", commas(b.Workload.Rate), b.Latency.P99.Round(time.Microsecond))
		} else {
			line += "no rate run held it"
		}
		if m := firstMiss[k]; m != nil && (best[k] == nil || m.Workload.Rate > best[k].Workload.Rate) {
			line += fmt.Sprintf("; at %s/s: p99 %v, sent %s/s", commas(m.Workload.Rate), m.Latency.P99.Round(time.Microsecond), commas(m.AttemptRate))
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func commas(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
