package redisx

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
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
		{"pool timeout, ctx ended", ended, redis.ErrPoolTimeout, Write, context.Canceled},
		{"client closed", live, redis.ErrClosed, Write, stockguard.ErrContention},
		{"dial refused", live, dialRefused, Write, stockguard.ErrContention},
		{"dial timeout, ctx live", live, dialTimeout, Write, stockguard.ErrContention},
		{"waiting for a conn, ctx ended", ended, context.Canceled, Write, context.Canceled},
		{"reply WRONGTYPE", live, replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), Write, stockguard.ErrContention},
		{"reply BUSY", live, replyError("BUSY Redis is busy running a script"), Write, stockguard.ErrContention},
		{"read timeout, write", live, readTimeout, Write, stockguard.ErrOutcomeUnknown},
		{"read timeout, write, ctx ended", ended, readTimeout, Write, stockguard.ErrOutcomeUnknown},
		{"read timeout, read", live, readTimeout, Read, stockguard.ErrContention},
		{"read timeout, read, ctx ended", ended, readTimeout, Read, context.Canceled},
		{"EOF, write", live, io.EOF, Write, stockguard.ErrOutcomeUnknown},
		{"unknown origin, write", live, errors.New("hook failed"), Write, stockguard.ErrOutcomeUnknown},
		{"unknown origin, read", live, errors.New("hook failed"), Read, stockguard.ErrContention},
	}
	sentinels := []error{
		stockguard.ErrInsufficientStock, stockguard.ErrUnknownSKU, stockguard.ErrInvalidRequest,
		stockguard.ErrContention, stockguard.ErrOutcomeUnknown, context.Canceled, context.DeadlineExceeded,
	}
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
	if got := Classify(t.Context(), err, Write); !errors.Is(got, stockguard.ErrContention) {
		t.Fatalf("Classify(%v) = %v, want ErrContention", err, got)
	}
}

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
		case !tt.ok && !(errors.Is(err, ErrCorrupt) && errors.Is(err, stockguard.ErrUnknownSKU)):
			t.Errorf("ParseLevel(%q) = %d, %v; want ErrCorrupt and ErrUnknownSKU", tt.in, got, err)
		}
	}
}
