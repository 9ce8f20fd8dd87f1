package redisx

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// replyError stands in for a Redis error reply (go-redis's own type is internal).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestClassify(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	dialTimeout := errors.Join(context.DeadlineExceeded, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})

	passed, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Nanosecond))
	stop()
	tests := []struct {
		name   string
		ctx    context.Context
		err    error
		effect Effect
		want   error // the one contract sentinel expected; nil means err comes back as is
	}{
		{"nil", live, nil, Write, nil},
		{"redis.Nil", live, redis.Nil, Read, nil},
		{"tx failed", live, redis.TxFailedErr, Write, stockguard.ErrContention},
		{"pool timeout", live, redis.ErrPoolTimeout, Write, stockguard.ErrContention},
		{"pool exhausted", live, redis.ErrPoolExhausted, Read, stockguard.ErrContention},
		{"pool timeout, ctx ended", ended, redis.ErrPoolTimeout, Write, context.Canceled},
		{"client closed", live, redis.ErrClosed, Write, stockguard.ErrUnavailable},
		{"dial refused", live, dialRefused, Write, stockguard.ErrUnavailable},
		{"dial refused, read", live, dialRefused, Read, stockguard.ErrUnavailable},
		{"dial timeout, ctx live", live, dialTimeout, Write, stockguard.ErrUnavailable},
		{"dial timeout at the caller's deadline", passed, dialTimeout, Write, context.DeadlineExceeded},
		{"dial timeout, deadline passed, timer not fired", deadlineOnly{time.Now().Add(-time.Millisecond)}, dialTimeout, Write, context.DeadlineExceeded},
		{"waiting for a conn, ctx ended", ended, context.Canceled, Write, context.Canceled},
		{"reply BUSY", live, replyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), Write, stockguard.ErrContention},
		{"reply TRYAGAIN", live, replyError("TRYAGAIN Multiple keys request during rehashing of slot"), Write, stockguard.ErrContention},
		{"reply BUSYKEY", live, replyError("BUSYKEY Target key name already exists."), Write, stockguard.ErrUnavailable},
		{"reply LOADING", live, replyError("LOADING Redis is loading the dataset in memory"), Read, stockguard.ErrUnavailable},
		{"reply READONLY", live, replyError("READONLY You can't write against a read only replica."), Write, stockguard.ErrUnavailable},
		{"reply MASTERDOWN", live, replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), Read, stockguard.ErrUnavailable},
		{"reply CLUSTERDOWN", live, replyError("CLUSTERDOWN The cluster is down"), Write, stockguard.ErrUnavailable},
		{"reply OOM", live, replyError("OOM command not allowed when used memory > 'maxmemory'."), Write, stockguard.ErrUnavailable},
		{"reply MISCONF", live, replyError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), Write, stockguard.ErrUnavailable},
		{"reply NOPERM", live, replyError("NOPERM this user has no permissions to run the 'evalsha' command"), Write, stockguard.ErrUnavailable},
		{"reply WRONGTYPE", live, replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), Write, stockguard.ErrUnavailable},
		{"reply, ctx ended", ended, replyError("READONLY You can't write against a read only replica."), Write, stockguard.ErrUnavailable},
		{"read timeout, write", live, readTimeout, Write, stockguard.ErrOutcomeUnknown},
		{"read timeout, write, ctx ended", ended, readTimeout, Write, stockguard.ErrOutcomeUnknown},
		{"read timeout, read", live, readTimeout, Read, stockguard.ErrUnavailable},
		{"read timeout, read, ctx ended", ended, readTimeout, Read, context.Canceled},
		{"read timeout, read, deadline passed", passed, readTimeout, Read, context.DeadlineExceeded},
		{"EOF, write", live, io.EOF, Write, stockguard.ErrOutcomeUnknown},
		{"EOF, read", live, io.EOF, Read, stockguard.ErrUnavailable},
		{"unknown origin, write", live, errors.New("hook failed"), Write, stockguard.ErrOutcomeUnknown},
		{"unknown origin, read", live, errors.New("hook failed"), Read, stockguard.ErrUnavailable},
	}
	sentinels := strategy.ContractErrors()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.ctx, tt.err, tt.effect)
			if tt.want == nil {
				if got != tt.err {
					t.Fatalf("Classify(%v) = %v, want it unchanged", tt.err, got)
				}
				return
			}
			for _, s := range sentinels {
				if is := errors.Is(got, s); is != (s == tt.want) {
					t.Errorf("Classify(%v) = %q: errors.Is(_, %v) = %v", tt.err, got, s, is)
				}
			}
		})
	}
}

func TestNotSent_dialRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	err = rdb.Set(t.Context(), "k", 1, 0).Err()
	if !NotSent(err) {
		t.Fatalf("NotSent(%v) = false for a refused dial", err)
	}
	if got := Classify(t.Context(), err, Write); strategy.Contract(got) != stockguard.ErrUnavailable {
		t.Fatalf("Classify(%v) = %v, want ErrUnavailable", err, got)
	}
}

// deadlineOnly is a context whose deadline has passed but whose Err is
// still nil, as a context's is between its deadline and its timer firing.
type deadlineOnly struct{ dl time.Time }

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.dl, true }
func (deadlineOnly) Done() <-chan struct{}         { return nil }
func (deadlineOnly) Err() error                    { return nil }
func (deadlineOnly) Value(any) any                 { return nil }

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"9007199254740991", stockguard.MaxQty, true},
		{"9007199254740992", 0, false},
		{"-1", 0, false},
		{"007", 0, false},
		{"+7", 0, false},
		{"7.0", 0, false},
		{" 7", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseLevel("stock:{x}", tt.in)
		switch {
		case tt.ok && (err != nil || got != tt.want):
			t.Errorf("ParseLevel(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case !tt.ok && !(errors.Is(err, stockguard.ErrCorruptStock) && errors.Is(err, stockguard.ErrUnknownSKU)):
			t.Errorf("ParseLevel(%q) = %d, %v; want ErrCorrupt and ErrUnknownSKU", tt.in, got, err)
		}
	}
}
