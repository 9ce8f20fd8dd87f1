package bench

import "time"

// Latency summarises the measured requests' latencies, successful or not.
type Latency struct {
	P50, P90, P99, P999, Max, Mean time.Duration
}

// Result is what one Run measured and found.
type Result struct {
	Target         string
	Counterexample bool
	// Procs is the number of OS processes the workers ran in: 1 for Run,
	// the number of parts for Stocked.Finish.
	Procs int
	// Needs names the backends the target used.
	Needs    []string
	Workload Workload
	// Elapsed is the measured window: from the end of warm-up to the end of
	// the last request begun before the stop.
	Elapsed time.Duration
	// Attempts counts measured requests; Successes those that took stock,
	// Units the units they took.
	Attempts, Successes, Units int64
	// Lines counts the lines of the successful orders of a Checkout
	// (Successes counts the orders); LineRate is them per second over
	// Elapsed.
	Lines    int64
	LineRate float64
	// Throughput is successful decrements (a Checkout: orders) per second: over Elapsed, or over
	// SellOut when a flash sale sold out.
	Throughput float64
	// AttemptRate is requests per second over Elapsed.
	AttemptRate float64
	Latency     Latency
	// Retries is the strategy's own retry count during the measured window
	// (from strategy.RetryCounter, 0 when it has none).
	Retries      int64
	RetriesPerOp float64
	// Errors counts measured requests by error kind (Kind.String), only
	// kinds that occurred.
	Errors map[string]int64
	// OtherErrors holds a few messages of errors outside the contract.
	OtherErrors []string
	// SoldOut reports that every SKU of a flash sale refused a request of
	// the smallest quantity; SellOut is the time from the start of
	// measurement to the last successful decrement.
	SoldOut bool
	SellOut time.Duration
	Audit   Audit
	// Stats holds the target's own figures (see Store.Stats), nil when it
	// has none.
	Stats map[string]float64
	// Interrupted reports that the run's context ended before the run did.
	Interrupted bool
	// ClientCPU is the processor time, user and system, the client
	// processes used over the measured window: the workers, the
	// strategies' client code, the harness, and whatever else runs in
	// them (a tiered target's consumer; the forwarders of -rtt). Summed
	// over the processes of a split run.
	ClientCPU time.Duration
	// ServerCPU is each server's processor time over the measured window,
	// for the servers of the target's backends (see WithServerCPU); nil
	// when none was asked for.
	ServerCPU []ServerCPU
}

// Sound reports whether the audit found nothing wrong. Errors outside the
// contract (Errors["other"]) are reported but do not make a run unsound
// unless they hid oversold or lost stock, which the audit then shows.
func (r *Result) Sound() bool {
	return r.Audit.Sound()
}
