package tiered

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/optset"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/redislock"
)

// Option configures New, NewConsumer and NewQueueConsumer, which read
// these options:
//
//	New               WithPrefix, WithGroup, WithReplicaAck, WithFront, WithApplyLease
//	NewConsumer       WithPrefix, WithGroup, WithReplicaAck, WithConsumerName, WithBatch,
//	                  WithApplyWorkers, WithClaimIdle, WithStopGrace, WithApplyLease
//	NewQueueConsumer  WithConsumerName, WithBatch, WithApplyWorkers, WithClaimIdle, WithStopGrace,
//	                  WithApplyLease
//
// Each refuses an option it does not read, and an invalid one, with an
// error wrapping stockguard.ErrInvalidRequest that names it, before any
// I/O.
type Option func(*options)

// optionSet is a set of this package's options, one bit each: those given
// to a constructor, and those it reads.
type optionSet = optset.Set

const (
	optPrefix optionSet = 1 << iota
	optFront
	optReplicaAck
	optGroup
	optConsumerName
	optBatch
	optApplyWorkers
	optClaimIdle
	optStopGrace
	optApplyLease
)

// optionNames are the options' names, in optionSet's bit order.
var optionNames = [...]string{"WithPrefix", "WithFront", "WithReplicaAck", "WithGroup",
	"WithConsumerName", "WithBatch", "WithApplyWorkers", "WithClaimIdle", "WithStopGrace", "WithApplyLease"}

// What each constructor reads (Option's table).
const (
	readsQueueConsumer = optConsumerName | optBatch | optApplyWorkers | optClaimIdle | optStopGrace | optApplyLease
	readsConsumer      = readsQueueConsumer | optPrefix | optGroup | optReplicaAck
	readsNew           = optPrefix | optGroup | optReplicaAck | optFront | optApplyLease
)

// only refuses the options given that constructor ctor does not read: an
// option silently ignored would leave the caller believing it in force.
func (o *options) only(ctor string, reads optionSet) {
	if err := optset.Unread(ctor, o.given, reads, optionNames[:]); err != nil {
		o.fail(err)
	}
}

// The defaults of the Consumer's options.
const (
	// DefaultGroup is the consumer group's name (WithGroup).
	DefaultGroup = "tiered"
	// DefaultBatch is how many entries a Consumer reads at once (WithBatch).
	DefaultBatch = 1024
	// DefaultApplyWorkers is how many entries of a batch a Consumer applies
	// to the back at once (WithApplyWorkers): a whole batch, so that a
	// group-committing back (mysqllock.NewBatched with
	// WithBatchSize(DefaultBatch)) writes it in one transaction.
	DefaultApplyWorkers = DefaultBatch
	// DefaultClaimIdle is how long an entry delivered to a consumer may stay
	// unacknowledged before another consumer claims it (WithClaimIdle): well
	// past a batch's time on a slow back, so a live consumer's work is not
	// taken from it.
	DefaultClaimIdle = 30 * time.Second
	// DefaultStopGrace is how long a Consumer's Run, its context ended,
	// gives the batch in hand to be applied and acknowledged
	// (WithStopGrace): a group commit takes milliseconds, a back retried
	// through its backoff seconds, and a rollout's SIGTERM commonly leaves
	// 30 s before SIGKILL.
	DefaultStopGrace = 10 * time.Second
	// DefaultApplyLease is how long after a Consumer read the front's epoch
	// it may still send that read's entries to the back (WithApplyLease).
	DefaultApplyLease = 10 * time.Second
)

// Internal pacing of a Consumer, not options: how long a read blocks for
// new entries, how often entries the back could not take yet are tried
// again, and the backoff while the back cannot serve.
const (
	readBlock    = 200 * time.Millisecond
	retryEvery   = 100 * time.Millisecond
	backoffFirst = 10 * time.Millisecond
	backoffMax   = time.Second
)

type options struct {
	prefix    string
	front     []redislock.Option
	group     string
	consumer  string
	batch     int
	workers   int
	claimIdle time.Duration
	stopGrace time.Duration
	lease     time.Duration // WithApplyLease
	ack       redisx.Ack    // WithReplicaAck: what confirms the Consumer's reads
	given     optionSet     // the options given
	err       error
}

func newOptions(opts []Option) options {
	o := options{prefix: DefaultPrefix, group: DefaultGroup, batch: DefaultBatch, workers: DefaultApplyWorkers, claimIdle: DefaultClaimIdle, stopGrace: DefaultStopGrace, lease: DefaultApplyLease}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: tiered: %v", stockguard.ErrInvalidRequest, err)
	}
}

// WithPrefix sets the prefix of the front's keys and of the stream
// (StreamKey); default DefaultPrefix. The front takes it as
// redislock.WithPrefix, with that option's rules.
func WithPrefix(p string) Option {
	return func(o *options) {
		o.given |= optPrefix
		o.prefix = p
	}
}

// WithFront adds options of the front's redislock.NewBatched
// (WithOrderRetention, WithBatchSize, WithReplicaAck, WithAOFAck); New sets WithPrefix and
// WithOrderStream itself, after them. An ack given here covers the front's
// writes, not the Consumer's reads: on replicas, use this package's
// WithReplicaAck.
func WithFront(opts ...redislock.Option) Option {
	return func(o *options) {
		o.given |= optFront
		o.front = append(o.front, opts...)
	}
}

// WithReplicaAck makes the front's writes count once n replicas have them
// (redislock.WithReplicaAck(n, timeout), with its errors) and the
// Consumer apply only entries n replicas have: each of its reads is
// followed on its connection by WAIT n timeout, and entries it does not
// confirm stay pending, read again until they are. Given to WithFront
// instead, the option covers the front alone, and a failover can take
// back entries the Consumer applied: the back keeps orders the front
// forgot. n must be 1…100 and timeout whole milliseconds in 1ms…1min; the
// go-redis client's ReadTimeout must exceed 200ms + timeout (a read and its
// WAIT share one round trip). Default none.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) {
		o.given |= optReplicaAck
		a := redisx.Ack{Replicas: n, Timeout: timeout}
		if err := a.Validate(); err != nil {
			o.fail(err)
			return
		}
		o.ack = a
		o.front = append(o.front, redislock.WithReplicaAck(n, timeout))
	}
}

// WithGroup sets the consumer group; default DefaultGroup. Every Consumer
// of one stream should use the same group: an entry is applied once per
// group.
func WithGroup(name string) Option {
	return func(o *options) {
		o.given |= optGroup
		if name == "" {
			o.fail(errors.New("empty consumer group"))
			return
		}
		o.group = name
	}
}

// WithConsumerName sets the Consumer's name within its group, which must be
// unique among the group's live consumers; default a random one.
func WithConsumerName(name string) Option {
	return func(o *options) {
		o.given |= optConsumerName
		if name == "" {
			o.fail(errors.New("empty consumer name"))
			return
		}
		o.consumer = name
	}
}

// WithBatch sets how many entries a Consumer reads at once, 1…10000;
// default DefaultBatch.
func WithBatch(n int) Option {
	return func(o *options) {
		o.given |= optBatch
		if n < 1 || n > 10000 {
			o.fail(fmt.Errorf("batch %d outside 1…10000", n))
			return
		}
		o.batch = n
	}
}

// WithApplyWorkers sets how many entries of a batch a Consumer applies at
// once, 1…1024; default DefaultApplyWorkers. The entries of one order are
// applied in stream order whatever the number.
func WithApplyWorkers(n int) Option {
	return func(o *options) {
		o.given |= optApplyWorkers
		if n < 1 || n > 1024 {
			o.fail(fmt.Errorf("apply workers %d outside 1…1024", n))
			return
		}
		o.workers = n
	}
}

// WithClaimIdle sets how long an entry delivered to a consumer may stay
// unacknowledged before another claims it, at least a millisecond; default
// DefaultClaimIdle.
func WithClaimIdle(d time.Duration) Option {
	return func(o *options) {
		o.given |= optClaimIdle
		if d < time.Millisecond {
			o.fail(fmt.Errorf("claim idle %v below 1ms", d))
			return
		}
		o.claimIdle = d
	}
}

// WithStopGrace sets how long Run, its context ended, lets the batch in
// hand finish — applied and acknowledged — before it cuts it short (its
// entries then stay pending under the consumer's name); 0 cuts at once;
// default DefaultStopGrace.
func WithStopGrace(d time.Duration) Option {
	return func(o *options) {
		o.given |= optStopGrace
		if d < 0 {
			o.fail(fmt.Errorf("stop grace %v below 0", d))
			return
		}
		o.stopGrace = d
	}
}

// WithApplyLease bounds how long a Consumer goes on sending to the back the
// entries of one read: a Step checks the front's epoch when it reads, and
// calls the back for those entries only until lease has passed since (the
// back's calls get that deadline; entries not applied by then are tried
// again after the next read, which checks the epoch again). Recover waits
// lease and a tenth of it before it reads the back, so that no consumer of
// the lost front still applies its entries: give New and every
// NewConsumer the same lease. At least 10ms; default DefaultApplyLease.
func WithApplyLease(d time.Duration) Option {
	return func(o *options) {
		o.given |= optApplyLease
		if d < 10*time.Millisecond {
			o.fail(fmt.Errorf("apply lease %v below 10ms", d))
			return
		}
		o.lease = d
	}
}
