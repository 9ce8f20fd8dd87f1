// Package peers measures redislock's lock family against the Go Redis locks
// users compare it with — bsm/redislock, go-redsync/redsync and rueidis's
// rueidislock — on the same Redis servers, in one run.
//
// It is a module of its own, so that the peers never become dependencies
// of the library. It offers two things:
//
//   - lock-cycle measurements (Measure): Obtain+Release at 1 and 64
//     goroutines on fresh keys, 64 goroutines waiting on one key, and
//     Redlock over 3 and 5 masters — successful cycles per second, Redis
//     commands per acquisition (INFO commandstats deltas, commands run by
//     scripts included) and the 99th percentile of the time to acquire;
//     cmd/lockbench runs them in alternating rounds;
//   - harness targets (registered with package bench on import): a
//     decrement guarded by each peer's lock — lock the SKU, read, check,
//     write, release — next to redislock's own strategies.
//
// The servers are private redis-server processes started from PATH
// (OpenServers), so that the command counts are the benchmark's alone.
package peers
