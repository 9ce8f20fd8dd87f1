package stocktest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stockguard/stockguard"
)

// Invalid order inputs under the contract's validation rules.
var (
	badIDs = []string{
		"",
		strings.Repeat("x", stockguard.MaxIDLen+1),
		strings.Repeat("é", 65), // 130 bytes, 65 runes: bytes count, not runes
		"\xff\xfe",
		"half-\xe2\x82",
		"new\nline",
		"nul\x00byte",
		"tab\tid",
		"del\x7f",
		"c1\u0085control",
	}
	badTTLs = []time.Duration{
		0,
		-1,
		-time.Hour,
		stockguard.MinHoldTTL - 1,
		stockguard.MaxHoldTTL + 1,
		-1 << 63,
		1<<63 - 1,
	}
)

// badLines returns orders that break the line rules: no lines, too many,
// a SKU twice, and each bad SKU and qty on a line next to a valid one.
func badLines(valid stockguard.Line, sku func(string) string) [][]stockguard.Line {
	many := make([]stockguard.Line, stockguard.MaxLines+1)
	for i := range many {
		many[i] = line(sku(fmt.Sprintf("many-%d", i)), 1)
	}
	out := [][]stockguard.Line{
		nil,
		{},
		many,
		{valid, valid},
		{valid, line(valid.SKU, valid.Qty+1)},
	}
	for _, bad := range badSKUs {
		out = append(out, []stockguard.Line{valid, line(bad, 1)})
	}
	for _, q := range badQtys {
		out = append(out, []stockguard.Line{line(valid.SKU, q)}, []stockguard.Line{line(sku("other"), 1), line(valid.SKU, q)})
	}
	return out
}

// checkOrdersInvalidInput makes every call with each bad input, with a live
// and with a dead context: validation comes before any I/O, so each is
// ErrInvalidRequest, never the context's error, and nothing changes or is
// recorded.
func checkOrdersInvalidInput(o *orders) {
	skus, ok := o.stock("invalid", 10, 10)
	if !ok {
		return
	}
	valid := []stockguard.Line{line(skus[0], 1), line(skus[1], 1)}
	id := o.subj.ID("invalid")
	dead, cancel := context.WithCancel(o.ctx)
	cancel()
	bad := stockguard.ErrInvalidRequest
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"live ctx", o.ctx}, {"dead ctx", dead}} {
		expect := func(op string, err error) { o.r.expect(c.name+": "+op, err, bad) }
		for _, badID := range badIDs {
			expect(fmt.Sprintf("Take(%q)", badID), o.a.Take(c.ctx, badID, valid...))
			expect(fmt.Sprintf("Hold(%q)", badID), o.a.Hold(c.ctx, badID, longTTL, valid...))
			expect(fmt.Sprintf("Confirm(%q)", badID), o.a.Confirm(c.ctx, badID))
			expect(fmt.Sprintf("Return(%q)", badID), o.a.Return(c.ctx, badID))
			expect(fmt.Sprintf("Restock(%q)", badID), o.a.Restock(c.ctx, badID, skus[0], 1))
			_, err := o.a.Order(c.ctx, badID)
			expect(fmt.Sprintf("Order(%q)", badID), err)
		}
		for _, lines := range badLines(valid[0], o.subj.SKU) {
			desc := fmt.Sprintf("%v", lines)
			if len(lines) > stockguard.MaxLines {
				desc = fmt.Sprintf("%d lines", len(lines))
			}
			expect(fmt.Sprintf("Take(%q, %s)", id, desc), o.a.Take(c.ctx, id, lines...))
			expect(fmt.Sprintf("Hold(%q, %s)", id, desc), o.a.Hold(c.ctx, id, longTTL, lines...))
		}
		for _, ttl := range badTTLs {
			expect(fmt.Sprintf("Hold(%q, ttl %v)", id, ttl), o.a.Hold(c.ctx, id, ttl, valid...))
		}
		for _, sku := range badSKUs {
			expect(fmt.Sprintf("Restock(%q, %q, 1)", id, sku), o.a.Restock(c.ctx, id, sku, 1))
		}
		for _, q := range badQtys {
			expect(fmt.Sprintf("Restock(%q, %q, %d)", id, skus[0], q), o.a.Restock(c.ctx, id, skus[0], q))
		}
	}
	o.unknown(id)
	o.levels(map[string]int64{skus[0]: 10, skus[1]: 10})
}

// checkOrdersNilContext makes every call, of Orders and of Inventory, with
// a nil context and otherwise valid input: ErrInvalidRequest before any
// I/O, not a panic, and nothing changes.
func checkOrdersNilContext(o *orders) {
	skus, ok := o.stock("nil-context", 10, 10)
	if !ok {
		return
	}
	a, b := skus[0], skus[1]
	held := o.subj.ID("nil-context-held")
	if !o.hold(o.a, held, longTTL, nil, line(a, 1)) {
		return
	}
	id, restock := o.subj.ID("nil-context"), o.subj.ID("nil-context-restock")
	var nilCtx context.Context
	inst := o.a
	for _, c := range []struct {
		op   string
		call func() error
	}{
		{fmt.Sprintf("Take(nil ctx, %q)", id), func() error { return inst.Take(nilCtx, id, line(a, 1), line(b, 1)) }},
		{fmt.Sprintf("Hold(nil ctx, %q)", id), func() error { return inst.Hold(nilCtx, id, longTTL, line(a, 1)) }},
		{fmt.Sprintf("Confirm(nil ctx, %q)", held), func() error { return inst.Confirm(nilCtx, held) }},
		{fmt.Sprintf("Return(nil ctx, %q)", held), func() error { return inst.Return(nilCtx, held) }},
		{fmt.Sprintf("Restock(nil ctx, %q)", restock), func() error { return inst.Restock(nilCtx, restock, b, 5) }},
		{fmt.Sprintf("Order(nil ctx, %q)", held), func() error { _, err := inst.Order(nilCtx, held); return err }},
		{fmt.Sprintf("Decrement(nil ctx, %q)", b), func() error { return inst.Decrement(nilCtx, b, 1) }},
		{fmt.Sprintf("SetStock(nil ctx, %q)", b), func() error { return inst.SetStock(nilCtx, b, 99) }},
		{fmt.Sprintf("Stock(nil ctx, %q)", b), func() error { _, err := inst.Stock(nilCtx, b); return err }},
	} {
		o.r.expect(c.op, safely(c.call), stockguard.ErrInvalidRequest)
	}
	o.order(held, stockguard.OrderHeld, line(a, 1))
	o.unknown(id)
	o.unknown(restock)
	o.levels(map[string]int64{a: 9, b: 10})
}

// checkOrdersCanceled makes every call with an ended context and valid
// input: the context's error (or another contract error) and nothing
// applied.
func checkOrdersCanceled(o *orders) {
	skus, ok := o.stock("canceled", 10)
	if !ok {
		return
	}
	a := skus[0]
	held := o.subj.ID("canceled-held")
	if !o.hold(o.a, held, longTTL, nil, line(a, 1)) {
		return
	}
	dead, cancel := context.WithCancel(o.ctx)
	cancel()
	id, restock := o.subj.ID("canceled"), o.subj.ID("canceled-restock")
	o.r.expect(fmt.Sprintf("Take(dead ctx, %q)", id), o.a.Take(dead, id, line(a, 1)), context.Canceled)
	o.r.expect(fmt.Sprintf("Hold(dead ctx, %q)", id), o.a.Hold(dead, id, longTTL, line(a, 1)), context.Canceled)
	o.r.expect(fmt.Sprintf("Restock(dead ctx, %q)", restock), o.a.Restock(dead, restock, a, 5), context.Canceled)
	_, orderErr := o.a.Order(dead, held)
	for _, c := range []struct {
		op  string
		err error
	}{
		{"Confirm", o.a.Confirm(dead, held)},
		{"Return", o.a.Return(dead, held)},
		{"Order", orderErr},
	} {
		if c.err == nil {
			o.r.add("%s(dead ctx, %q) succeeded", c.op, held)
		}
		o.r.contract(c.op+" with a canceled context", c.err)
	}
	o.order(held, stockguard.OrderHeld, line(a, 1))
	o.unknown(id)
	o.unknown(restock)
	o.levels(map[string]int64{a: 9})
}
