package bench

// The harness's own test targets, for the benchmarks of package bench_test.
var (
	NoopTarget = noopTarget
	MemTarget  = memTarget
)
