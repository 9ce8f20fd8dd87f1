package redislock

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// closedClient is a client whose every command fails: what is checked
// "before any I/O" must not reach it.
func closedClient(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	return rdb
}

// Every constructor refuses an invalid option, before any I/O (rdb is
// closed), with an error that is ErrInvalidRequest and nothing else; none
// builds a value that would fail only on its first request.
func TestOptions_invalidIsRefusedByTheConstructor(t *testing.T) {
	rdb := closedClient(t)
	masters := []redis.UniversalClient{rdb, rdb, rdb}
	tests := []struct {
		name string
		opt  Option
	}{
		{"WithPrefix with a hash tag", WithPrefix("{app}:")},
		{"WithPrefix with an open brace", WithPrefix("app{")},
		{"WithPrefix with a close brace", WithPrefix("app}")},
		{"WithLockTTL 0", WithLockTTL(0)},
		{"WithLockTTL below 1ms", WithLockTTL(time.Microsecond)},
		{"WithStore nil", WithStore(nil)},
		{"WithSegments 0", WithSegments(0)},
		{"WithSegments beyond MaxSegments", WithSegments(MaxSegments + 1)},
		{"WithNodeTimeout 0", WithNodeTimeout(0)},
		{"WithDrift negative factor", WithDrift(-0.1, 0)},
		{"WithDrift factor 1", WithDrift(1, 0)},
		{"WithDrift NaN", WithDrift(math.NaN(), 0)},
		{"WithDrift negative fixed", WithDrift(0.01, -time.Millisecond)},
		{"WithStockMaster negative", WithStockMaster(-1)},
		{"WithRetry MaxDelay below BaseDelay", WithRetry(strategy.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond})},
		{"WithBatchSize negative", WithBatchSize(-5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, build := range map[string]func() (any, error){
				"New":               func() (any, error) { return New(rdb, tc.opt) },
				"NewAtomic":         func() (any, error) { return NewAtomic(rdb, tc.opt) },
				"NewBatched":        func() (any, error) { return NewBatched(rdb, tc.opt) },
				"NewGuarded":        func() (any, error) { return NewGuarded(rdb, tc.opt) },
				"NewSegmented":      func() (any, error) { return NewSegmented(rdb, tc.opt) },
				"NewRedisStore":     func() (any, error) { return NewRedisStore(rdb, tc.opt) },
				"NewRedlock":        func() (any, error) { return NewRedlock(masters, tc.opt) },
				"NewRedlockGuarded": func() (any, error) { return NewRedlockGuarded(masters, tc.opt) },
			} {
				v, err := build()
				checkInvalid(t, name, err)
				if !reflect.ValueOf(v).IsNil() {
					t.Errorf("%s: %v beside its error, want nil", name, v)
				}
			}
		})
	}
}

// Every constructor refuses, before any I/O, each option it does not read,
// with ErrInvalidRequest naming the option and the constructor, and
// accepts each one it reads (Option's table, written out here again).
func TestOptions_unreadIsRefusedByTheConstructor(t *testing.T) {
	rdb := closedClient(t)
	masters := []redis.UniversalClient{rdb, rdb, rdb}
	store, err := NewRedisStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]Option{
		"WithPrefix":          WithPrefix("app:"),
		"WithRetry":           WithRetry(strategy.RetryPolicy{MaxAttempts: 3}),
		"WithLockTTL":         WithLockTTL(time.Second),
		"WithStore":           WithStore(store),
		"WithReplicaAck":      WithReplicaAck(1, time.Second),
		"WithAOFAck":          WithAOFAck(1, 0, time.Second),
		"WithBatchSize":       WithBatchSize(8),
		"WithSegments":        WithSegments(4),
		"WithSegmentLocks":    WithSegmentLocks(),
		"WithNodeTimeout":     WithNodeTimeout(time.Second),
		"WithDrift":           WithDrift(0.01, time.Millisecond),
		"WithStockMaster":     WithStockMaster(1),
		"WithOrderRetention":  WithOrderRetention(time.Hour),
		"WithOrderStream":     WithOrderStream("orders"),
		"WithAttemptValidity": WithAttemptValidity(time.Second),
		"WithClockSkew":       WithClockSkew(time.Millisecond),
	}
	client := []string{"WithPrefix", "WithReplicaAck", "WithAOFAck"}
	redlock := slices.Concat(client, []string{"WithNodeTimeout", "WithDrift"})
	for _, c := range []struct {
		name  string
		reads []string
		build func(...Option) (any, error)
	}{
		{"New", client, func(o ...Option) (any, error) { return New(rdb, o...) }},
		{"NewRedisStore", client, func(o ...Option) (any, error) { return NewRedisStore(rdb, o...) }},
		{"NewAtomic", slices.Concat(client, []string{"WithOrderRetention", "WithOrderStream", "WithAttemptValidity", "WithClockSkew"}), func(o ...Option) (any, error) { return NewAtomic(rdb, o...) }},
		{"NewBatched", slices.Concat(client, []string{"WithBatchSize", "WithOrderRetention", "WithOrderStream", "WithAttemptValidity", "WithClockSkew"}), func(o ...Option) (any, error) { return NewBatched(rdb, o...) }},
		{"NewGuarded", slices.Concat(client, []string{"WithRetry", "WithLockTTL", "WithStore"}), func(o ...Option) (any, error) { return NewGuarded(rdb, o...) }},
		{"NewSegmented", slices.Concat(client, []string{"WithRetry", "WithLockTTL", "WithSegments", "WithSegmentLocks"}), func(o ...Option) (any, error) { return NewSegmented(rdb, o...) }},
		{"NewRedlock", redlock, func(o ...Option) (any, error) { return NewRedlock(masters, o...) }},
		{"NewRedlockGuarded", slices.Concat(redlock, []string{"WithRetry", "WithLockTTL", "WithStockMaster"}), func(o ...Option) (any, error) { return NewRedlockGuarded(masters, o...) }},
	} {
		for name, opt := range valid {
			v, err := c.build(opt)
			if slices.Contains(c.reads, name) {
				if err != nil {
					t.Errorf("%s(%s): %v, want it read", c.name, name, err)
				}
				continue
			}
			checkInvalid(t, c.name+"("+name+")", err)
			if err != nil && !strings.Contains(err.Error(), c.name+" does not read "+name) {
				t.Errorf("%s(%s): %q does not name the option", c.name, name, err)
			}
			if !reflect.ValueOf(v).IsNil() {
				t.Errorf("%s(%s): %v beside its error, want nil", c.name, name, v)
			}
		}
	}
}

func TestOptions_badConstructorArgumentsAreRefused(t *testing.T) {
	rdb := closedClient(t)
	_, err := NewRedlock(nil)
	checkInvalid(t, "NewRedlock without masters", err)
	_, err = NewRedlockGuarded(nil)
	checkInvalid(t, "NewRedlockGuarded without masters", err)
	_, err = NewRedlockGuarded([]redis.UniversalClient{rdb}, WithStockMaster(1))
	checkInvalid(t, "NewRedlockGuarded, stock master 1 of 1", err)
}

func checkInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, stockguard.ErrInvalidRequest) || strategy.Contract(err) != stockguard.ErrInvalidRequest {
		t.Errorf("%s: %v, want only ErrInvalidRequest", what, err)
	}
}
