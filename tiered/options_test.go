package tiered

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/redislock"
)

// Every constructor refuses, before any I/O (the client is closed), each
// option it does not read, with ErrInvalidRequest naming the option and
// the constructor, and accepts each one it reads (Option's table, written
// out here again).
func TestOptions_unreadIsRefusedByTheConstructor(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	back := memorders.New()
	valid := map[string]Option{
		"WithPrefix":       WithPrefix("shop:"),
		"WithFront":        WithFront(redislock.WithOrderRetention(time.Hour)),
		"WithReplicaAck":   WithReplicaAck(1, time.Second),
		"WithGroup":        WithGroup("g"),
		"WithConsumerName": WithConsumerName("c"),
		"WithBatch":        WithBatch(8),
		"WithApplyWorkers": WithApplyWorkers(8),
		"WithClaimIdle":    WithClaimIdle(time.Second),
		"WithStopGrace":    WithStopGrace(time.Second),
		"WithApplyLease":   WithApplyLease(time.Second),
	}
	queue := []string{"WithConsumerName", "WithBatch", "WithApplyWorkers", "WithClaimIdle", "WithStopGrace", "WithApplyLease"}
	errOf := func(_ any, err error) error { return err }
	for _, c := range []struct {
		name  string
		reads []string
		build func(...Option) error
	}{
		{"New", []string{"WithPrefix", "WithGroup", "WithReplicaAck", "WithFront", "WithApplyLease"}, func(o ...Option) error { return errOf(New(rdb, back, o...)) }},
		{"NewConsumer", slices.Concat(queue, []string{"WithPrefix", "WithGroup", "WithReplicaAck"}), func(o ...Option) error { return errOf(NewConsumer(rdb, back, o...)) }},
		{"NewQueueConsumer", queue, func(o ...Option) error { return errOf(NewQueueConsumer(NewStreams(rdb, "s", "g"), back, o...)) }},
	} {
		for name, opt := range valid {
			err := c.build(opt)
			if slices.Contains(c.reads, name) {
				if err != nil {
					t.Errorf("%s(%s): %v, want it read", c.name, name, err)
				}
				continue
			}
			if !errors.Is(err, stockguard.ErrInvalidRequest) || !strings.Contains(err.Error(), c.name+" does not read "+name) {
				t.Errorf("%s(%s): %v, want ErrInvalidRequest naming the option", c.name, name, err)
			}
		}
	}
}
