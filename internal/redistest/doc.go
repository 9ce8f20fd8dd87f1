// Package redistest holds test and benchmark helpers shared by the single-key Redis strategies' tests (redislock, watchtx); only _test.go files import it.
package redistest
