package lock

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

// New and NewRedlock refuse an invalid option, before any I/O (rdb is
// closed), with an error that is ErrInvalidRequest and nothing else.
func TestOptions_invalidIsRefusedByTheConstructor(t *testing.T) {
	rdb := closedClient(t)
	masters := []redis.UniversalClient{rdb, rdb, rdb}
	for name, opt := range map[string]Option{
		"WithPrefix with a hash tag":    WithPrefix("{app}:"),
		"WithPrefix with a close brace": WithPrefix("app}"),
		"WithReplicaAck 0 replicas":     WithReplicaAck(0, time.Second),
		"WithAOFAck local 2":            WithAOFAck(2, 0, time.Second),
		"WithNodeTimeout 0":             WithNodeTimeout(0),
		"WithDrift negative factor":     WithDrift(-0.1, 0),
		"WithDrift factor 1":            WithDrift(1, 0),
		"WithDrift NaN":                 WithDrift(math.NaN(), 0),
		"WithDrift negative fixed":      WithDrift(0.01, -time.Millisecond),
	} {
		for ctor, build := range map[string]func() (any, error){
			"New":        func() (any, error) { return New(rdb, opt) },
			"NewRedlock": func() (any, error) { return NewRedlock(masters, opt) },
		} {
			v, err := build()
			checkInvalid(t, ctor+": "+name, err)
			if !reflect.ValueOf(v).IsNil() {
				t.Errorf("%s: %s: %v beside its error, want nil", ctor, name, v)
			}
		}
	}
	_, err := NewRedlock(nil)
	checkInvalid(t, "NewRedlock without masters", err)
	_, err = New(rdb, WithReplicaAck(1, time.Second), WithAOFAck(1, 0, time.Second))
	checkInvalid(t, "New with both acks", err)
}

// New refuses, before any I/O, each option only NewRedlock reads, naming
// it; each constructor accepts every option it reads (Option's table).
func TestOptions_unreadIsRefusedByTheConstructor(t *testing.T) {
	rdb := closedClient(t)
	masters := []redis.UniversalClient{rdb, rdb, rdb}
	valid := map[string]Option{
		"WithPrefix":      WithPrefix("app:"),
		"WithReplicaAck":  WithReplicaAck(1, time.Second),
		"WithAOFAck":      WithAOFAck(1, 0, time.Second),
		"WithNodeTimeout": WithNodeTimeout(time.Second),
		"WithDrift":       WithDrift(0.01, time.Millisecond),
	}
	client := []string{"WithPrefix", "WithReplicaAck", "WithAOFAck"}
	for _, c := range []struct {
		name  string
		reads []string
		build func(...Option) (any, error)
	}{
		{"New", client, func(o ...Option) (any, error) { return New(rdb, o...) }},
		{"NewRedlock", slices.Concat(client, []string{"WithNodeTimeout", "WithDrift"}), func(o ...Option) (any, error) { return NewRedlock(masters, o...) }},
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

func TestObtain_invalidObtainOptions(t *testing.T) {
	c, err := New(closedClient(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ms := time.Millisecond
	for name, opts := range map[string][]ObtainOption{
		"ObtainRetry nil":                          {ObtainRetry(nil)},
		"LinearBackoff 0":                          {ObtainRetry(LinearBackoff(0))},
		"ExponentialBackoff lo 0":                  {ObtainRetry(ExponentialBackoff(0, ms))},
		"ExponentialBackoff hi below lo":           {ObtainRetry(ExponentialBackoff(5*ms, ms))},
		"LimitRetry nil":                           {ObtainRetry(LimitRetry(nil, 1))},
		"LimitRetry negative":                      {ObtainRetry(LimitRetry(LinearBackoff(ms), -1))},
		"LimitRetry of an invalid strategy":        {ObtainRetry(LimitRetry(LinearBackoff(0), 1))},
		"an invalid RetryPolicy":                   {ObtainRetry(stockguard.RetryPolicy{MaxAttempts: -1})},
		"an Adaptive RetryPolicy":                  {ObtainRetry(stockguard.RetryPolicy{Adaptive: true})},
		"MaxHold 0":                                {MaxHold(0)},
		"IfExists empty":                           {IfExists("")},
		"Reentrant with NoFence":                   {Reentrant(NewOwner()), NoFence()},
		"Reentrant with IfExists":                  {Reentrant(NewOwner()), IfExists("x")},
		"an invalid one among valid ones":          {Notify(), MaxHold(-ms), Watchdog()},
		"an invalid one after a valid ObtainRetry": {ObtainRetry(NoRetry()), ObtainRetry(LinearBackoff(-1))},
	} {
		_, err := c.Obtain(ctx, "k", time.Second, opts...)
		checkInvalid(t, name, err)
	}
}

func checkInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, stockguard.ErrInvalidRequest) || strategy.Contract(err) != stockguard.ErrInvalidRequest {
		t.Errorf("%s: %v, want only ErrInvalidRequest", what, err)
	}
}
