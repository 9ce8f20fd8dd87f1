package redislock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// The batch driver: orders_batch.lua runs place (orders_placing.lua, the
// Take and Hold of orders_place.lua) or act (orders_acting.lua, the Confirm
// and Return of orders_act.lua) for each order of a batch.
var (
	//go:embed orders_batch.lua
	ordersBatchLua string

	batchPlaceScript = ordersScript(ordersPlacingLua + ordersActingLua + ordersBatchLua)
)

// codeFailed: an order of a batch failed with an error of its own.
const codeFailed = -19

// Ops of an orderReq beside kindTake and kindHold.
const (
	opConfirm = 'C'
	opReturn  = 'R'
)

// orderReq is one order call for a batch, and its outcome.
type orderReq struct {
	op       byte // kindTake, kindHold, opConfirm or opReturn
	id       string
	ttl      time.Duration
	lines    []stockguard.Line // sorted by SKU; a Confirm's or Return's as read in the record
	deadline time.Time         // its caller's ctx deadline; zero for none
	part     string            // its caller's partition (redisx.Partition): a batch is of one

	err error // its own outcome in the call's reply: nil, or a refusal
}

// result is r's answer once the call carrying it returned err.
func (r *orderReq) result(err error) error {
	if err != nil {
		return err
	}
	return r.err
}

// errAlone: the batch did nothing for an order that needs a call of its
// own — it met a refusal's tombstone (the caller waits for the fence to
// pass), or the due holds of a SKU it is short of need their two-phase
// orders asked or more pages read (withResolve). Its caller runs it as
// Atomic does, under its own context.
var errAlone = errors.New("redislock: the order needs a call of its own")

// Take takes every line, or none, for good under id, with exactly the
// semantics, keys and records of Atomic.Take, so that Atomic and Batched
// instances may share them. An order whose keys share a slot (every order
// on one Redis) queues while a call of its slot is in flight, and the
// whole queue — at most the batch size, in arrival order — then goes out
// as one script call that applies each order all or nothing, as Atomic's
// one-slot script would one after the other (see orders_batch.lua). An
// order whose keys span slots of a Cluster runs alone through Atomic's
// two-phase protocol.
//
// Each order of a batch carries its caller's deadline: the call's send
// time and that deadline bound it as they bound an Atomic attempt, so a
// refusal is final (see Atomic.Take). An order that meets a refusal's
// tombstone, or is short of units that due holds of two-phase orders may
// give back, is not applied by the batch and runs again by itself, as
// Atomic runs it.
//
// A caller whose ctx ends while its order waits in the queue gets the
// context's error, and its order is never sent; once the call carrying it
// is on its way, ErrOutcomeUnknown. The batch goes on under a context of
// its own, so one caller leaving cancels nobody else's order. A call whose
// reply is lost answers each of its orders ErrOutcomeUnknown, and no
// other. An order that failed in the script with an error of its own (a
// key of another type) is ErrUnavailable, nothing of it applied; the others
// of its batch stand. Its errors are otherwise Atomic.Take's.
func (b *Batched) Take(ctx context.Context, id string, lines ...stockguard.Line) error {
	if err := b.orders.admitOrder(ctx, strategy.ValidateTake(id, lines)); err != nil {
		return err
	}
	return b.place(ctx, kindTake, id, 0, lines)
}

// Hold takes every line, or none, under id until Confirm, Return, or ttl
// has passed by the clock of Redis, batched as Take. Its errors are
// Atomic.Hold's and Take's.
func (b *Batched) Hold(ctx context.Context, id string, ttl time.Duration, lines ...stockguard.Line) error {
	if err := b.orders.admitOrder(ctx, strategy.ValidateHold(id, ttl, lines)); err != nil {
		return err
	}
	return b.place(ctx, kindHold, id, ttl, lines)
}

// Confirm makes the hold under id taken for good, if its deadline has not
// passed, as Atomic.Confirm does. An order this instance placed (one of
// the last 16,384) is decided in a batch with the other orders of its slot
// (see Take) on the lines it was placed with, which the script checks
// against the record first. Any other order's record is read first (one
// HGETALL), and, when its keys share a slot, it is then decided in such a
// batch; a two-phase order, and an ID with no record, runs Atomic's
// script. Its errors are Atomic.Confirm's.
func (b *Batched) Confirm(ctx context.Context, id string) error {
	return b.decide(ctx, opConfirm, id)
}

// Return gives the units of the order under id back, exactly once, as
// Atomic.Return does, batched as Confirm. Its errors are Atomic.Return's.
func (b *Batched) Return(ctx context.Context, id string) error {
	return b.decide(ctx, opReturn, id)
}

// Restock is Atomic.Restock: one call of its own.
func (b *Batched) Restock(ctx context.Context, id, sku string, qty int64) error {
	return b.orders.Restock(ctx, id, sku, qty)
}

// Order is Atomic.Order: a read of the record.
func (b *Batched) Order(ctx context.Context, id string) (stockguard.OrderInfo, error) {
	return b.orders.Order(ctx, id)
}

// OrderStats returns the script calls that carried order calls (Take,
// Hold, Confirm, Return) since the instance was created, and the calls
// they carried.
func (b *Batched) OrderStats() BatchStats {
	batches, requests := b.placed.Stats()
	return BatchStats{Batches: batches, Requests: requests}
}

// place runs a Take or a Hold: batched when its keys share a slot, else
// through Atomic's two-phase protocol.
func (b *Batched) place(ctx context.Context, kind byte, id string, ttl time.Duration, lines []stockguard.Line) error {
	a := b.orders
	lines = strategy.SortedLines(lines)
	if !a.oneSlot(id, lines) {
		return a.place(ctx, kind, id, ttl, lines)
	}
	r := orderReq{op: kind, id: id, ttl: ttl, lines: lines, part: redisx.Partition(ctx)}
	r.deadline, _ = ctx.Deadline()
	err := b.placed.Do(ctx, b.queueOf(id, r.part), r)
	if errors.Is(err, errAlone) {
		err = a.place(ctx, kind, id, ttl, lines)
	}
	if err != nil {
		return errtext.Wrap(err, "redislock: %s %q", placeVerb(kind), id)
	}
	b.known.keep(id, lines)
	return nil
}

// decide runs a Confirm or a Return: the decision in a batch of the
// record's slot, on the lines the order was placed with here if they are
// known and the record's, else on the record read first, read again when
// it changed in between.
func (b *Batched) decide(ctx context.Context, op byte, id string) error {
	a, verb := b.orders, "confirm"
	if op == opReturn {
		verb = "return"
	}
	if err := a.admitOrder(ctx, strategy.ValidateID(id)); err != nil {
		return err
	}
	// batch decides the order on lines in a batch of its slot; the script
	// acts only when they are the record's, else it answers errReread.
	part := redisx.Partition(ctx)
	batch := func(lines []stockguard.Line) error {
		return b.placed.Do(ctx, b.queueOf(id, part), orderReq{op: op, id: id, lines: lines, part: part})
	}
	if lines, ok := b.known.get(id); ok {
		err := batch(lines)
		if errors.Is(err, errReread) || err == nil && op == opReturn {
			b.known.forget(id) // not the record's lines, or the order is over
		}
		if !errors.Is(err, errReread) {
			return errtext.Wrap(err, "redislock: %s %q", verb, id)
		}
	}
	for range 3 {
		r, err := b.record(ctx, id)
		switch {
		case err != nil:
			return errtext.Wrap(err, "redislock: %s %q", verb, id)
		case r.state == 0, r.nonce != "":
			// Unknown here, or two-phase: Atomic's script answers, which a
			// client that rewrites scripts (a fence) sees, as it sees the
			// batch's.
			return a.decide(ctx, verb, id)
		case r.kind == kindRestock:
			return errtext.Wrap(errtext.Mismatch(id, "Restock"), "redislock: %s %q", verb, id)
		case op == opConfirm && r.state == 't', op == opReturn && r.state != 'h' && r.state != 't':
			return nil // nothing to change
		case op == opConfirm && r.state != 'h':
			return errtext.Wrap(errtext.Closed(id, orderState(r.state)), "redislock: %s %q", verb, id)
		}
		err = batch(r.lines)
		if !errors.Is(err, errReread) {
			return errtext.Wrap(err, "redislock: %s %q", verb, id)
		}
	}
	return fmt.Errorf("%w: redislock: %s %q: the record kept changing", stockguard.ErrContention, verb, id)
}

// record reads the record of id with one HGETALL: what orders_read.lua
// reads, without the server's time, which a Confirm or Return does not
// need (the batch reads it). Errors are Classify's, Read.
func (b *Batched) record(ctx context.Context, id string) (*record, error) {
	cmd := redis.NewMapStringStringCmd(ctx, "hgetall", b.orders.orderKey(id))
	if err := b.orders.rdb.Process(ctx, cmd); err != nil {
		return nil, redisx.Classify(ctx, err, redisx.Read)
	}
	reply := []any{int64(0)}
	for f, v := range cmd.Val() {
		reply = append(reply, f, v)
	}
	return parseRecord(reply, false)
}

// queueOf is the queue of the orders of partition part whose record is that
// of id: one per partition on a single Redis or a failover client, one per
// partition and slot on a Cluster.
func (b *Batched) queueOf(id, part string) string {
	if b.orders.sharding != shardedBySlot {
		return part
	}
	return strconv.Itoa(int(slot(b.orders.orderKey(id)))) + "/" + part
}

// placeVerb names a Take or a Hold in errors.
func placeVerb(kind byte) string {
	if kind == kindHold {
		return "hold"
	}
	return "take"
}

// writeOrders runs one orders_batch.lua call for bt's members, claimed
// right before it, in their order. It returns the call's error, or nil
// with each member's own outcome set.
func (b *Batched) writeOrders(ctx context.Context, _ string, bt *combine.Batch[orderReq]) error {
	m := bt.Members()
	if len(m) == 0 {
		return nil
	}
	a := b.orders
	// The members share a queue, so a partition: the call carries it.
	ctx = redisx.WithPartition(ctx, m[0].part)
	keys := make([]string, len(m), 3*len(m)+1)
	index := map[string]int{} // SKU -> its index in the call, from 1
	var skus []any
	for i, r := range m {
		keys[i] = a.orderKey(r.id)
		for _, l := range r.lines {
			if _, ok := index[l.SKU]; !ok {
				skus = append(skus, l.SKU)
				index[l.SKU] = len(skus)
				keys = append(keys, a.keys.Stock(l.SKU), a.holdsKey(l.SKU))
			}
		}
	}
	if a.stream != "" {
		keys = append(keys, a.stream)
	}
	// The call's send time stamps every order of it (see bounds.stamp):
	// taken now, before the call leaves.
	now := time.Now()
	args := make([]any, 0, 5+len(skus)+len(m)*9)
	args = append(args, len(m), len(skus), a.retention.Milliseconds(), now.Add(-a.bounds.skew).UnixMicro(), a.bounds.tombstone())
	args = append(args, skus...)
	for _, r := range m {
		end := now.Add(a.bounds.validity)
		if !r.deadline.IsZero() && r.deadline.Before(end) {
			end = r.deadline
		}
		args = append(args, string(r.op), r.id, ttlMicros(r.ttl), end.Add(a.bounds.skew).UnixMicro(), len(r.lines))
		for _, l := range r.lines {
			args = append(args, index[l.SKU], l.Qty)
		}
	}
	reply, err := batchPlaceScript.Run(ctx, a.scripts, keys, args...).Slice()
	if err != nil {
		return errtext.Wrap(redisx.Classify(ctx, err, redisx.Write), "redislock: %d orders in one call", len(m))
	}
	if len(reply) != 3*len(m) {
		return errtext.Wrap(unexpected(reply), "redislock: %d orders in one call", len(m))
	}
	for i, r := range m {
		r.err = b.outcome(r, reply[3*i:3*i+3])
	}
	return nil
}

// outcome is the answer of the order call r from its three elements of a
// batch's reply.
func (b *Batched) outcome(r *orderReq, reply []any) error {
	code := replyInt(reply, 0)
	act := r.op == opConfirm || r.op == opReturn
	switch {
	case reply[0] == nil:
		return unexpected(reply)
	case act && code == 0:
		return nil
	case act && code == codeClosed:
		if s := replyString(reply, 1); s != "" {
			return errtext.Closed(r.id, orderState(s[0]))
		}
		return unexpected(reply)
	case act && (code == codeNoOrder || code == codeMismatch || code == codeReread):
		return errReread
	case code == 0:
		s := replyString(reply, 1)
		if s == "" {
			return unexpected(reply)
		}
		if s == "r" || s == "e" {
			return errtext.Closed(r.id, orderState(s[0]))
		}
		return nil
	case code == codeMismatch:
		return errtext.Mismatch(r.id, "")
	case code == codeStale:
		return errStale
	case code == codeFenced, code == codeResolve, code == codeMore:
		return errAlone
	case code == codeFailed:
		// Its reads come before its writes, and they failed: nothing of it
		// was applied, as when Redis refuses Atomic's script.
		return fmt.Errorf("%w: redis refused the order in its batch's script: %s", stockguard.ErrUnavailable, replyString(reply, 1))
	}
	i := int(replyInt(reply, 1)) - 1
	if i >= 0 && i < len(r.lines) {
		if err := b.orders.refusal(code, r.lines[i]); err != nil {
			return err
		}
	}
	return unexpected(reply)
}
