package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/internal/redisx"
)

// errReread: the record changed between the read and the script that acts
// on it (it expired and an order with other lines took its ID).
var errReread = errors.New("redislock: order record changed, read it again")

// placeLocal runs a Take or Hold whose keys share a slot: orders_place.lua.
func (a *Atomic) placeLocal(ctx context.Context, kind byte, id string, ttl time.Duration, lines []stockguard.Line) error {
	keys := make([]string, 0, 2+2*len(lines))
	keys = append(keys, a.orderKey(id))
	args := make([]any, 5, 8+2*len(lines))
	args[0], args[1], args[2], args[4] = string(kind), ttlMicros(ttl), a.retention.Milliseconds(), id
	for _, l := range lines {
		keys = append(keys, a.keys.Stock(l.SKU), a.holdsKey(l.SKU))
		args = append(args, l.SKU, l.Qty)
	}
	tail := len(args)
	args = append(args, 0, 0, a.bounds.tombstone())
	keys = a.withStream(keys)
	var state string
	err := a.bounds.retryFenced(ctx, func() error {
		return a.withResolve(ctx, func(decide string) (string, []string, string, error) {
			args[3] = decide
			args[tail], args[tail+1] = a.bounds.stamp(ctx)
			reply, err := placeScript.Run(ctx, a.scripts, keys, args...).Slice()
			if err != nil {
				return "", nil, "", redisx.Classify(ctx, err, redisx.Write)
			}
			code := replyInt(reply, 0)
			switch {
			case code == 0:
				state, _ = reply[1].(string)
				return "", nil, "", nil
			case code == codeMismatch:
				return "", nil, "", errtext.Mismatch(id, "")
			case code == codeFenced:
				return "", nil, "", a.bounds.fenced(reply, 1)
			case code == codeStale:
				return "", nil, "", errStale
			case code == codeMore:
				return "", nil, replyString(reply, 1), nil
			}
			i := int(replyInt(reply, 1)) - 1
			if i < 0 || i >= len(lines) {
				return "", nil, "", unexpected(reply)
			}
			if code == codeResolve {
				return lines[i].SKU, replyStrings(reply, 2), "", nil
			}
			if err := a.refusal(code, lines[i]); err != nil {
				return "", nil, "", err
			}
			return "", nil, "", unexpected(reply)
		})
	})
	if err != nil {
		return err
	}
	if state == "r" || state == "e" {
		return errtext.Closed(id, orderState(state[0]))
	}
	return nil
}

// actLocal applies op ("confirm", "return", "order") to r, the record of
// an order whose keys share a slot, in one script (orders_act.lua) that
// declares every key of its lines. An Order of an order that is not held
// past its deadline, and a Confirm or Return with nothing to change, need
// no script. It returns errReread when the record changed since r was read.
func (a *Atomic) actLocal(ctx context.Context, op, id string, r *record) (*record, error) {
	switch {
	case op == "order" && !r.expired(),
		op == "confirm" && r.state != 'h',
		op == "return" && r.state != 'h' && r.state != 't':
		return r, nil
	}
	keys := make([]string, 0, 2+2*len(r.lines))
	keys = append(keys, a.orderKey(id))
	args := make([]any, 0, 3+2*len(r.lines))
	args = append(args, op, a.retention.Milliseconds(), id)
	for _, l := range r.lines {
		keys = append(keys, a.keys.Stock(l.SKU), a.holdsKey(l.SKU))
		args = append(args, l.SKU, l.Qty)
	}
	keys = a.withStream(keys)
	reply, err := actScript.Run(ctx, a.scripts, keys, args...).Slice()
	if err != nil {
		return nil, redisx.Classify(ctx, err, redisx.Effect(op != "order"))
	}
	switch code := replyInt(reply, 0); code {
	case 0, codeClosed:
		s, _ := reply[1].(string)
		r.state = s[0]
		return r, nil
	case codeNoOrder, codeMismatch, codeReread:
		return nil, errReread
	case codeCorrupt:
		i := int(replyInt(reply, 1)) - 1
		if i >= 0 && i < len(r.lines) {
			return nil, a.refusal(code, r.lines[i])
		}
	}
	return nil, unexpected(reply)
}

// restockLocal runs a Restock whose keys share a slot: orders_restock.lua.
func (a *Atomic) restockLocal(ctx context.Context, id, sku string, qty int64) error {
	keys := []string{a.orderKey(id), a.keys.Stock(sku), a.holdsKey(sku)}
	return a.bounds.retryFenced(ctx, func() error {
		fence, expiry := a.bounds.stamp(ctx)
		reply, err := restockScript.Run(ctx, a.scripts, keys, a.retention.Milliseconds(), sku, qty,
			fence, expiry, a.bounds.tombstone()).Slice()
		if err != nil {
			return redisx.Classify(ctx, err, redisx.Write)
		}
		switch code := replyInt(reply, 0); code {
		case 0:
			return nil
		case codeMismatch:
			return errtext.Mismatch(id, "")
		case codeFenced:
			return a.bounds.fenced(reply, 1)
		case codeStale:
			return errStale
		default:
			if err := a.refusal(code, stockguard.Line{SKU: sku, Qty: qty}); err != nil {
				return err
			}
		}
		return unexpected(reply)
	})
}

// ttlMicros is a hold's ttl in whole microseconds, rounded up.
func ttlMicros(ttl time.Duration) int64 {
	return (ttl + time.Microsecond - 1).Microseconds()
}

// withStream appends WithOrderStream's key, when set, to the keys of an
// orders_place.lua or orders_act.lua call: the scripts take a last key
// after the lines' pairs as the stream to append the order's effect to.
func (a *Atomic) withStream(keys []string) []string {
	if a.stream == "" {
		return keys
	}
	return append(keys, a.stream)
}
