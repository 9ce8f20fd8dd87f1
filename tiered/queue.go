package tiered

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
)

// Op is the effect an entry carries to the back.
type Op byte

// The ops of entries.
const (
	OpTake   Op = 'T' // the order's lines are taken for good
	OpReturn Op = 'R' // the order, taken before, is returned
)

// Entry is one order's final effect on its way to the back.
type Entry struct {
	ID       string // the queue's position of the entry
	Op       Op
	Order    string
	Lines    []stockguard.Line // in SKU order
	Appended time.Time         // when the front appended it, by the front's clock
	// Left is, for a take, each SKU's level on the front right after it,
	// when the front wrote it: the units the front had beyond it.
	Left map[string]int64
}

// Queue is what a Consumer and a Reconciler need of the channel between the
// tiers: a consumer group's reads, claims and acknowledgements, and the
// entries not yet acknowledged. Streams implements it over a Redis Stream;
// a log such as Kafka or NATS JetStream could sit behind it.
//
// Every read names the front's epoch it was made under, and an Ack applies
// only under the epoch named: a consumer never acknowledges entries of a
// front lost (and recovered) since it read them. A front without an armed
// epoch (lost, or being recovered) fails reads and acknowledgements with
// ErrFrontLost.
type Queue interface {
	// Read returns up to n entries delivered to no consumer of the group
	// yet, now delivered to consumer, waiting up to block for the first,
	// and the front's epoch they were read under.
	// On consumer's first read, on the read after an Ack that failed, and
	// on every read for a claim-idle after a read or claim that failed (its
	// bytes may reach the server after the reads that follow it), it
	// returns first the entries already delivered to consumer and not
	// acknowledged — those of a reply lost on its way, of a process that
	// ran under the same name before, of an Ack lost — a batch at a time,
	// each read going on from the last, and new entries in the rest of the
	// batch.
	Read(ctx context.Context, consumer string, n int, block time.Duration) ([]Entry, string, error)
	// Claim hands consumer up to n entries delivered to any consumer and
	// unacknowledged for at least idle, going on through the pending
	// entries from where the last Claim stopped, and returns the front's
	// epoch they were claimed under.
	Claim(ctx context.Context, consumer string, idle time.Duration, n int) ([]Entry, string, error)
	// Ack acknowledges entries applied, if the front's epoch is still
	// epoch: they are never delivered again, and the IDs of the orders of
	// their takes are the back's (IDsKey). Under another epoch it
	// acknowledges nothing and returns ErrFrontLost.
	Ack(ctx context.Context, epoch string, entries ...Entry) error
	// Backlog returns every entry not acknowledged yet, delivered or not,
	// in queue order.
	Backlog(ctx context.Context) ([]Entry, error)
	// Len returns how many entries Backlog would return, without reading
	// them.
	Len(ctx context.Context) (int64, error)
}

// Streams is the Queue over the Redis Stream of an Orders' front, read by
// a consumer group. Ack acknowledges and deletes an entry in one
// transaction, so the stream holds exactly the entries not acknowledged.
type Streams struct {
	rdb     redis.UniversalClient
	stream  string
	group   string
	records rediskeys.Keys // the front's order records, for IDsKey

	// ack, when on, must confirm every read before its entries are handed
	// out (WithReplicaAck); set by NewConsumer.
	ack redisx.Ack

	mu sync.Mutex
	// caughtUp holds the consumers whose entries delivered and not
	// acknowledged are all in their hands: read since their last failed
	// read. Without it, a lost XREADGROUP reply would leave its entries
	// to XAUTOCLAIM, a claim-idle later.
	caughtUp map[string]bool
	// suspect is, for consumers whose read or claim failed, until when
	// each of their reads starts with their own pending entries: the
	// failed command may still reach Redis after the reads that followed
	// it (a network that delivers late) and hand them entries then. Past
	// recheck, XAUTOCLAIM finds such entries idle for a claim-idle.
	suspect map[string]time.Time
	recheck time.Duration
	// ownFrom is, for consumers paging through their own pending entries,
	// the ID after which the next page starts.
	ownFrom map[string]string
	// claimFrom is where each consumer's next XAUTOCLAIM starts ("" or
	// absent: the start).
	claimFrom map[string]string
}

var _ Queue = (*Streams)(nil)

// NewStreams returns the Queue of the stream key read by group: the
// stream of an Orders, StreamKey of its prefix.
func NewStreams(rdb redis.UniversalClient, stream, group string) *Streams {
	prefix := strings.TrimSuffix(stream, StreamKey(""))
	return &Streams{rdb: rdb, stream: stream, group: group, records: recordKeys(prefix), caughtUp: map[string]bool{}, suspect: map[string]time.Time{}, recheck: DefaultClaimIdle,
		ownFrom: map[string]string{}, claimFrom: map[string]string{}}
}

// create creates the group at the start of the stream (and the stream,
// empty, if need be); a group that exists is left as it is. Only Setup and
// Recover call it: a Consumer that finds no group reports ErrFrontLost.
func (s *Streams) create(ctx context.Context) error {
	err := s.rdb.XGroupCreateMkStream(ctx, s.stream, s.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return redisx.Classify(ctx, err, redisx.Read)
	}
	return nil
}

// Read implements Queue. Until consumer is caught up it pages through its
// own pending entries, a batch a call from where the last call stopped, and
// fills the rest of the batch with new entries: entries the back keeps
// refusing never hold back the ones behind them.
func (s *Streams) Read(ctx context.Context, consumer string, n int, block time.Duration) ([]Entry, string, error) {
	s.mu.Lock()
	from, own := s.ownFrom[consumer]
	if !own && (!s.caughtUp[consumer] || s.suspected(consumer)) {
		from, own = "0", true
	}
	s.mu.Unlock()
	var out []Entry
	epoch := ""
	if own {
		// Its own pending entries after from (an ID: they never block).
		res, e, err := s.readGroup(ctx, &redis.XReadGroupArgs{
			Group: s.group, Consumer: consumer, Streams: []string{s.stream, from}, Count: int64(n), Block: -1,
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, "", s.readFailed(ctx, consumer, err)
		}
		epoch = e
		out = entries(res)
		s.mu.Lock()
		if len(out) < n {
			delete(s.ownFrom, consumer)
			s.caughtUp[consumer] = true
		} else {
			s.ownFrom[consumer] = out[len(out)-1].ID
		}
		s.mu.Unlock()
		if len(out) == n {
			return out, epoch, nil
		}
		if len(out) > 0 {
			block = -1 // do not wait: there are entries in hand
		}
	}
	res, e, err := s.readGroup(ctx, &redis.XReadGroupArgs{
		Group: s.group, Consumer: consumer, Streams: []string{s.stream, ">"}, Count: int64(n - len(out)), Block: block,
	})
	if err == nil && epoch != "" && e != epoch {
		err = fmt.Errorf("%w: the epoch changed from %s to %s between two reads", errNoEpoch, epoch, e)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		// The entries read before stay in out: a failed read leaves the
		// consumer to read its own pending entries again anyway.
		return out, epoch, s.readFailed(ctx, consumer, err)
	}
	return append(out, entries(res)...), e, nil
}

// readFailed is the error of a failed read or claim of consumer's, whose
// reply may have carried entries that are now consumer's own pending ones:
// its next Read reads them from the start.
func (s *Streams) readFailed(ctx context.Context, consumer string, err error) error {
	s.mu.Lock()
	delete(s.caughtUp, consumer)
	delete(s.ownFrom, consumer)
	s.suspect[consumer] = time.Now().Add(s.recheck)
	s.mu.Unlock()
	if errors.Is(err, errNoEpoch) || strings.HasPrefix(err.Error(), "NOGROUP") {
		return fmt.Errorf("%w: stream %q: %v", ErrFrontLost, s.stream, err)
	}
	return redisx.Classify(ctx, err, redisx.Read)
}

// suspected reports whether a failed command of consumer's may still hand
// it entries; s.mu is held.
func (s *Streams) suspected(consumer string) bool {
	until, ok := s.suspect[consumer]
	if ok && time.Now().After(until) {
		delete(s.suspect, consumer)
		return false
	}
	return ok
}

// errNoEpoch: the front has no armed epoch (its key is gone, or Recover
// runs).
var errNoEpoch = errors.New("no epoch key")

func entries(res []redis.XStream) []Entry {
	var out []Entry
	for _, st := range res {
		for _, m := range st.Messages {
			out = append(out, parseEntry(m))
		}
	}
	return out
}

// readGroup is XREADGROUP, confirmed, and the epoch it read under (also
// with redis.Nil, no entries).
func (s *Streams) readGroup(ctx context.Context, a *redis.XReadGroupArgs) ([]redis.XStream, string, error) {
	var cmd *redis.XStreamSliceCmd
	epoch, err := s.confirmed(ctx, func(p redis.Pipeliner) redis.Cmder { cmd = p.XReadGroup(ctx, a); return cmd })
	if err != nil {
		return nil, epoch, err // redis.Nil: no entries, under epoch
	}
	return cmd.Val(), epoch, nil
}

// witnessTTL is how long the witness key of a confirmed read lives.
const witnessTTL = time.Second

// confirmed runs read, a command that hands entries to a consumer, after a
// read of the front's epoch key, in a pipeline — one connection, one
// server — where, with an ack, a witness write and the ack's WAIT follow
// it. It returns the epoch, or errNoEpoch when the front has no armed one
// (the entries read are then not handed out). The
// witness moves the connection's replication mark past everything the read
// saw (a read of entries delivered before writes nothing itself), so the
// WAIT confirms the entries read; a read and a WAIT on different
// connections could straddle a failover and confirm a new master that never
// had them. It returns read's error, or an *redisx.AckError when the WAIT
// fell short: the entries are then on the master alone, and a failover may
// take them back from the front.
func (s *Streams) confirmed(ctx context.Context, read func(redis.Pipeliner) redis.Cmder) (string, error) {
	p := s.rdb.Pipeline()
	// Sent at most once, and so the whole pipeline (go-redis resends a
	// pipeline only when every command may be resent): a read resent after
	// a timeout would hand the consumer other entries, and leave those of
	// the first, delivered to it, unknown to it until a claim.
	epoch := redis.NewStringCmd(ctx, "get", EpochKey(s.stream))
	_ = p.Process(ctx, redisx.Once(epoch))
	cmd := read(p)
	var witness *redis.StatusCmd
	check := func() error { return nil }
	if s.ack.On() {
		witness = p.Set(ctx, s.stream+":witness", "1", witnessTTL)
		check = redisx.Pipe(ctx, p, s.ack)
	}
	_, _ = p.Exec(ctx) // each command carries its own error
	switch err := epoch.Err(); {
	case errors.Is(err, redis.Nil):
		return "", errNoEpoch
	case err == nil && strings.HasPrefix(epoch.Val(), recovering):
		return "", fmt.Errorf("%w: %s", errNoEpoch, epoch.Val())
	case err != nil:
		return "", err
	}
	if err := cmd.Err(); err != nil {
		return epoch.Val(), err
	}
	if witness != nil {
		if err := witness.Err(); err != nil {
			return "", &redisx.AckError{Ack: s.ack, Err: fmt.Errorf("witness write: %w", err)}
		}
	}
	return epoch.Val(), check()
}

// Claim implements Queue. Each call goes on from where the last one
// stopped in the group's pending entries, from the start again once it
// went through them: entries that stay pending at the head (refused by the
// back, claimed back and forth) never hide those behind them. It checks
// the front's epoch key first: ErrFrontLost when it is gone.
func (s *Streams) Claim(ctx context.Context, consumer string, idle time.Duration, n int) ([]Entry, string, error) {
	s.mu.Lock()
	start := s.claimFrom[consumer]
	s.mu.Unlock()
	if start == "" {
		start = "0"
	}
	var cmd *redis.XAutoClaimCmd
	epoch, err := s.confirmed(ctx, func(c redis.Pipeliner) redis.Cmder {
		cmd = c.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: s.stream, Group: s.group, Consumer: consumer, MinIdle: idle, Start: start, Count: int64(n),
		})
		return cmd
	})
	if err != nil {
		// What it claimed, if anything, is consumer's own pending now:
		// its next read takes it.
		return nil, "", s.readFailed(ctx, consumer, err)
	}
	msgs, next := cmd.Val()
	s.mu.Lock()
	if next == "0-0" {
		delete(s.claimFrom, consumer)
	} else {
		s.claimFrom[consumer] = next
	}
	s.mu.Unlock()
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, parseEntry(m))
	}
	return out, epoch, nil
}

// ackScript acknowledges and deletes entries if the epoch key KEYS[1]
// holds ARGV[1], and adds record keys to the set KEYS[3]: KEYS[2] the
// stream, ARGV[2] the group, ARGV[3] the number n of entry IDs that
// follow, then the record keys. Otherwise it answers the fence's error
// reply, acknowledging nothing.
//
// It deletes the entries before the oldest one still pending with one
// XTRIM MINID, and only those after it one by one: an XDEL costs Redis
// about ten times an XACK per entry, a trim a fraction of one per entry
// (it drops whole nodes of the stream). Every entry before the oldest
// pending one was delivered (the group delivers in order) and is no
// longer pending, so acknowledged: the stream still holds exactly the
// entries not acknowledged. With none pending, the newest entry
// acknowledged now stands for that bound: every entry up to it was
// delivered.
var ackScript = redis.NewScript(`
local stream, group = KEYS[2], ARGV[2]
local epoch = redis.call('GET', KEYS[1])
if epoch ~= ARGV[1] then
  return redis.error_reply('` + fenceCode + ` ' .. tostring(epoch))
end
local last = 3 + tonumber(ARGV[3])
for i = 4, last, 1000 do
  redis.call('XACK', stream, group, unpack(ARGV, i, math.min(i + 999, last)))
end
-- after compares two stream IDs, their two decimals as numbers of any
-- length.
local function above(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end
local function after(x, y)
  local xm, xs = string.match(x, '^(%d+)-(%d+)$')
  local ym, ys = string.match(y, '^(%d+)-(%d+)$')
  if xm ~= ym then
    return above(xm, ym)
  end
  return above(xs, ys)
end
local low = redis.call('XPENDING', stream, group)[2]
local rest = {}
if low then
  for i = 4, last do
    if after(ARGV[i], low) then
      rest[#rest + 1] = ARGV[i]
    end
  end
else
  low = ARGV[4]
  for i = 5, last do
    if after(ARGV[i], low) then
      low = ARGV[i]
    end
  end
  rest[1] = low
end
redis.call('XTRIM', stream, 'MINID', '=', low)
for i = 1, #rest, 1000 do
  redis.call('XDEL', stream, unpack(rest, i, math.min(i + 999, #rest)))
end
for i = last + 1, #ARGV, 1000 do
  redis.call('SADD', KEYS[3], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 1
`)

// Ack implements Queue: XACK and XDEL, and the SADD of the takes' record
// keys, in one script that checks the epoch.
func (s *Streams) Ack(ctx context.Context, epoch string, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	args := make([]any, 0, 3+2*len(entries))
	args = append(args, epoch, s.group, len(entries))
	for _, e := range entries {
		args = append(args, e.ID)
	}
	for _, e := range entries {
		if e.Op == OpTake {
			args = append(args, s.records.Name("order", e.Order))
		}
	}
	err := ackScript.Run(ctx, s.rdb, []string{EpochKey(s.stream), s.stream, IDsKey(s.stream)}, args...).Err()
	if found, ok := fenced(err); ok {
		return fmt.Errorf("%w: stream %q read under epoch %s, now %s: nothing acknowledged", ErrFrontLost, s.stream, epoch, found)
	}
	if err != nil {
		// The entries stay pending under their consumers: each rereads
		// its own at its next Read, applies them again (no-ops on the
		// back) and acknowledges them, instead of waiting for a claim.
		s.mu.Lock()
		clear(s.caughtUp)
		clear(s.ownFrom)
		s.mu.Unlock()
		return redisx.Classify(ctx, err, redisx.Write)
	}
	return nil
}

// Backlog implements Queue: the stream holds only what is not
// acknowledged.
func (s *Streams) Backlog(ctx context.Context) ([]Entry, error) {
	var out []Entry
	start := "-"
	for {
		msgs, err := s.rdb.XRangeN(ctx, s.stream, start, "+", 1000).Result()
		if err != nil {
			return nil, redisx.Classify(ctx, err, redisx.Read)
		}
		for _, m := range msgs {
			out = append(out, parseEntry(m))
		}
		if len(msgs) < 1000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// Len implements Queue: the stream's length, as it holds exactly the
// entries not acknowledged.
func (s *Streams) Len(ctx context.Context) (int64, error) {
	n, err := s.rdb.XLen(ctx, s.stream).Result()
	if err != nil {
		return 0, redisx.Classify(ctx, err, redisx.Read)
	}
	return n, nil
}

// parseEntry reads a stream message appended by the front's scripts
// (redislock.WithOrderStream). A message that is not one has Op 0.
func parseEntry(m redis.XMessage) Entry {
	e := Entry{ID: m.ID}
	if ms, _, ok := strings.Cut(m.ID, "-"); ok {
		if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
			e.Appended = time.UnixMilli(v)
		}
	}
	for k, v := range m.Values {
		s, _ := v.(string)
		switch {
		case k == "o" && (s == string(OpTake) || s == string(OpReturn)):
			e.Op = Op(s[0])
		case k == "i":
			e.Order = s
		case strings.HasPrefix(k, "="):
			q, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				e.Op = 0
				return e
			}
			e.Lines = append(e.Lines, stockguard.Line{SKU: k[1:], Qty: q})
		case strings.HasPrefix(k, "^"):
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				if e.Left == nil {
					e.Left = map[string]int64{}
				}
				e.Left[k[1:]] = n
			}
		}
	}
	slices.SortFunc(e.Lines, func(a, b stockguard.Line) int { return strings.Compare(a.SKU, b.SKU) })
	if e.Order == "" || len(e.Lines) == 0 {
		e.Op = 0
	}
	return e
}

// String reads "T o1 [a×2 b×1] @1700000000000-0".
func (e Entry) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%c %s [", e.Op, e.Order)
	for i, l := range e.Lines {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s×%d", l.SKU, l.Qty)
	}
	fmt.Fprintf(&b, "] @%s", e.ID)
	return b.String()
}
