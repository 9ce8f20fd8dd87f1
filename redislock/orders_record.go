package redislock

import (
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// Kinds of order record ("k").
const (
	kindTake    = 'T'
	kindHold    = 'H'
	kindRestock = 'R'
)

// record is an order record as a script read it (orders_read.lua,
// orders_record.lua).
type record struct {
	now      int64  // the clock of the record's server when read, us
	flag     string // orders_record.lua: "new", "expired" or "mismatch"
	state    byte   // 0 when there is no record; see orders_record.lua
	kind     byte
	lines    []stockguard.Line // in SKU order
	nonce    string            // the two-phase attempt; "" for a one-slot order
	pending  int64             // two-phase: the attempt's deadline, us
	deadline int64             // holds: us
	sealed   bool              // two-phase, taken: every line knows it (see orders_record.lua)
	disarms  string            // two-phase: field v, "0" when absent (see orders_record.lua)
	asked    time.Time         // two-phase: when the client asked for it (its own clock)
	refused  int64             // no record: the time of the refusal its tombstone keeps, us
}

// in converts t, a time of the record's server's clock, into how long from
// now it is, for a script on another server: the remaining time when the
// record was read, less the time since the client asked for it (which is
// longer than the record's age, so the answer errs early). Only durations
// cross between servers, so their clocks may differ by any offset.
func (r *record) in(t int64) int64 {
	return t - r.now - time.Since(r.asked).Microseconds()
}

// at converts t, a time of the record's server's clock, into the client's
// clock, erring early as in does: a bound for a script that counts in from
// when it runs, which is later than it was sent by however long the
// request was held on its way. It assumes the clocks agree within the
// clock skew, as the fence does (see bounds); a server ahead of the client
// only finds the time early.
func (r *record) at(t int64) int64 {
	return r.asked.UnixMicro() + t - r.now
}

// parseRecord reads a script's reply: the server's time, flag when hasFlag,
// then the record's fields and values.
func parseRecord(reply []any, hasFlag bool) (*record, error) {
	r := &record{disarms: "0"}
	bad := func() (*record, error) { return nil, unexpected(reply) }
	if len(reply) < 1 {
		return bad()
	}
	now, ok := reply[0].(int64)
	if !ok {
		return bad()
	}
	r.now, reply = now, reply[1:]
	if hasFlag {
		if len(reply) < 1 {
			return bad()
		}
		r.flag, _ = reply[0].(string)
		reply = reply[1:]
	}
	if len(reply)%2 != 0 {
		return bad()
	}
	for i := 0; i < len(reply); i += 2 {
		f, _ := reply[i].(string)
		v, _ := reply[i+1].(string)
		var err error
		switch {
		case f == "s" && len(v) == 1:
			r.state = v[0]
		case f == "k" && len(v) == 1:
			r.kind = v[0]
		case f == "n":
			r.nonce = v
		case f == "w":
			r.pending, err = strconv.ParseInt(v, 10, 64)
		case f == "d":
			r.deadline, err = strconv.ParseInt(v, 10, 64)
		case f == "z":
			r.sealed = v == "1"
		case f == "v":
			r.disarms = v
		case f == "x":
			r.refused, err = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(f, "="):
			var q int64
			q, err = strconv.ParseInt(v, 10, 64)
			r.lines = append(r.lines, stockguard.Line{SKU: f[1:], Qty: q})
		}
		if err != nil {
			return bad()
		}
	}
	r.lines = strategy.SortedLines(r.lines)
	return r, nil
}

// orderState is the contract's name of a settled record's state.
func orderState(s byte) stockguard.OrderState {
	switch s {
	case 'h':
		return stockguard.OrderHeld
	case 't':
		return stockguard.OrderTaken
	case 'r':
		return stockguard.OrderReturned
	case 'e':
		return stockguard.OrderExpired
	}
	return 0
}

// info is what Order reports of r, recorded under id.
func (r *record) info(id string) stockguard.OrderInfo {
	info := stockguard.OrderInfo{ID: id, State: orderState(r.state), Lines: r.lines}
	// A confirmed hold is taken and expires no more: no deadline.
	if r.kind == kindHold && info.State != stockguard.OrderTaken {
		info.Deadline = time.UnixMicro(r.deadline)
	}
	return info
}

// expired reports whether r, a one-slot hold, is past its deadline.
func (r *record) expired() bool { return r.state == 'h' && r.now >= r.deadline }
