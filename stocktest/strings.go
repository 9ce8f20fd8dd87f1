package stocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// HostileStrings are SKUs and order IDs that have broken stores before:
// quotes and backslashes for SQL literals, a multibyte character before a
// quote (a GBK or SJIS connection reads its last byte and a backslash as
// one character), LIKE and Redis pattern characters, hash tags, SQL
// comments, a line separator, strings that differ by a trailing space or
// by case, and ones at and past the length limits. Fuzz targets add them
// to their seed corpora.
func HostileStrings() []string {
	return []string{
		"a", "a ", " a", "A", "'", `"`, `\`, `\'`, `'\`, "''", "中'", "𝄞'\\", "中' OR sku=0x76696374696d#",
		"%", "_", "%_", "*", "?", "[a]", "{x}", "{", "}", "}{", "'; DROP TABLE stock;--", "-- ", "#", "/*", "*/",
		"a\u2028b", "\u2029", "\ufeff", "\u00e9", "e\u0301", "ß", "ẞ", "İ", "\x00", "\n", "a\tb", "\xff", "\xe4\xb8",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("中", 21) + "x", strings.Repeat("中", 22),
		strings.Repeat("y", 128), strings.Repeat("y", 129), "",
	}
}

// StringCheck checks how the instances of one store treat a SKU or an
// order ID string: one that stockguard refuses is ErrInvalidRequest
// before any I/O, and one it accepts round-trips exactly and never
// touches another SKU or order. Build it with its fields, call Prepare
// once, then SKU and OrderID for each string, from one goroutine.
type StringCheck struct {
	// Inventories are instances over the store under test.
	Inventories []stockguard.Inventory
	// Orders are Orders instances over the same store (may be empty).
	Orders []stockguard.Orders
	// Offline are instances like the others whose store is unreachable
	// (a closed pool or client): any I/O they try fails, so a string they
	// refuse with ErrInvalidRequest was refused before I/O.
	Offline []stockguard.Inventory

	tag     string
	victims []string
	line    string
	n       atomic.Int64
}

// victimLevel is the level of the SKU no string may touch.
const victimLevel = 424242

// Prepare stocks the SKUs the checks use.
func (c *StringCheck) Prepare(ctx context.Context) error {
	if len(c.Inventories) == 0 {
		return errors.New("stocktest: StringCheck needs at least one Inventory")
	}
	c.tag = runTag()
	// "victim" is the SKU the injections among HostileStrings aim at.
	c.victims = []string{"victim", "victim~" + c.tag}
	c.line = "line~" + c.tag
	// Every instance stocks them: one whose stock lives apart (segments)
	// has victims of its own.
	for _, inv := range c.Inventories {
		for _, v := range c.victims {
			if err := inv.SetStock(ctx, v, victimLevel); err != nil {
				return err
			}
		}
	}
	return c.Inventories[0].SetStock(ctx, c.line, stockguard.MaxQty/2)
}

// variants returns strings a store might confuse with s: with a space
// added, in other case, a rune shorter. Only those valid is accepts,
// other than s, are kept.
func variants(s string, valid func(string) error) []string {
	cands := []string{s + " ", " " + s, strings.ToUpper(s), strings.ToLower(s)}
	if _, size := utf8.DecodeLastRuneInString(s); size > 0 && size < len(s) {
		cands = append(cands, s[:len(s)-size])
	}
	var out []string
	for _, v := range cands {
		if v != s && valid(v) == nil && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// invalid checks that err is ErrInvalidRequest.
func invalid(vs *[]Violation, what string, err error) {
	if !errors.Is(err, stockguard.ErrInvalidRequest) {
		*vs = append(*vs, Violation{Case: "Strings", Detail: fmt.Sprintf("%s: %s, want %s", what, answer(err), stockguard.ErrInvalidRequest)})
	}
}

func (c *StringCheck) fail(vs *[]Violation, format string, args ...any) {
	*vs = append(*vs, Violation{Case: "Strings", Detail: fmt.Sprintf(format, args...)})
}

// SKU checks sku on every instance.
func (c *StringCheck) SKU(ctx context.Context, sku string) []Violation {
	var vs []Violation
	if strategy.ValidateSKU(sku) != nil {
		for i, inv := range slices.Concat(c.Inventories, c.Offline) {
			invalid(&vs, fmt.Sprintf("instance %d: SetStock(%q, 1)", i, sku), inv.SetStock(ctx, sku, 1))
			invalid(&vs, fmt.Sprintf("instance %d: Decrement(%q, 1)", i, sku), inv.Decrement(ctx, sku, 1))
			_, err := inv.Stock(ctx, sku)
			invalid(&vs, fmt.Sprintf("instance %d: Stock(%q)", i, sku), err)
		}
		for i, inv := range slices.Concat(c.Inventories, c.Offline) {
			o, ok := inv.(stockguard.Orders)
			if !ok {
				continue
			}
			id := fmt.Sprintf("fz-%d~%s", c.n.Add(1), c.tag)
			invalid(&vs, fmt.Sprintf("instance %d: Take(%q, %q)", i, id, sku), o.Take(ctx, id, stockguard.Line{SKU: sku, Qty: 1}))
			invalid(&vs, fmt.Sprintf("instance %d: Restock(%q, %q)", i, id, sku), o.Restock(ctx, id, sku, 1))
		}
		return c.victimUntouched(ctx, vs)
	}
	level := func(inv stockguard.Inventory, what string, want int64) {
		got, err := inv.Stock(ctx, sku)
		if err != nil || got != want {
			c.fail(&vs, "%s: Stock(%q) = %d, %s; want %d", what, sku, got, answer(err), want)
		}
	}
	for i, inv := range c.Inventories {
		want := 1000 + c.n.Add(1)
		if err := inv.SetStock(ctx, sku, want); err != nil {
			c.fail(&vs, "instance %d: SetStock(%q, %d): %s", i, sku, want, answer(err))
			continue
		}
		level(inv, fmt.Sprintf("instance %d: after SetStock", i), want)
		if err := inv.Decrement(ctx, sku, 1); err != nil {
			c.fail(&vs, "instance %d: Decrement(%q, 1): %s", i, sku, answer(err))
			continue
		}
		level(inv, fmt.Sprintf("instance %d: after Decrement", i), want-1)
		for _, v := range variants(sku, strategy.ValidateSKU) {
			if err := inv.SetStock(ctx, v, 7); err != nil {
				c.fail(&vs, "instance %d: SetStock(%q, 7): %s", i, v, answer(err))
			}
			level(inv, fmt.Sprintf("instance %d: after SetStock(%q) of another SKU", i, v), want-1)
		}
	}
	for i, o := range c.Orders {
		before, err := o.Stock(ctx, sku)
		if err != nil {
			c.fail(&vs, "orders %d: Stock(%q): %s", i, sku, answer(err))
			continue
		}
		id := fmt.Sprintf("fz-%d~%s", c.n.Add(1), c.tag)
		want := []stockguard.Line{{SKU: sku, Qty: 1}, {SKU: c.line, Qty: 1}}
		if err := o.Take(ctx, id, want...); err != nil {
			c.fail(&vs, "orders %d: Take(%q, %v): %s", i, id, want, answer(err))
			continue
		}
		info, err := o.Order(ctx, id)
		if err != nil || !slices.Equal(info.Lines, strategy.SortedLines(want)) {
			c.fail(&vs, "orders %d: Order(%q) = %v, %s; want lines %v", i, id, info.Lines, answer(err), strategy.SortedLines(want))
		}
		level(o, fmt.Sprintf("orders %d: after Take", i), before-1)
		if err := o.Restock(ctx, id+"/r", sku, 2); err != nil {
			c.fail(&vs, "orders %d: Restock(%q, 2): %s", i, sku, answer(err))
		}
		if err := o.Return(ctx, id); err != nil {
			c.fail(&vs, "orders %d: Return(%q): %s", i, id, answer(err))
		}
		level(o, fmt.Sprintf("orders %d: after Restock and Return", i), before+2)
	}
	return c.victimUntouched(ctx, vs)
}

// OrderID checks id on every Orders instance.
func (c *StringCheck) OrderID(ctx context.Context, id string) []Violation {
	var vs []Violation
	ln := stockguard.Line{SKU: c.line, Qty: 1}
	if strategy.ValidateID(id) != nil {
		for i, inv := range c.Offline {
			if o, ok := inv.(stockguard.Orders); ok {
				c.invalidID(&vs, fmt.Sprintf("offline %d", i), o, id, ln)
			}
		}
		for i, o := range c.Orders {
			c.invalidID(&vs, fmt.Sprintf("orders %d", i), o, id, ln)
		}
		return c.victimUntouched(ctx, vs)
	}
	for i, o := range c.Orders {
		// The string itself, as it comes: every input takes the same line
		// under it, so a repeated input is a repeat of one order.
		if err := o.Take(ctx, id, ln); err != nil {
			c.fail(&vs, "orders %d: Take(%q, %v): %s", i, id, ln, answer(err))
			continue
		}
		info, err := o.Order(ctx, id)
		if err != nil || info.ID != id || !slices.Equal(info.Lines, []stockguard.Line{ln}) || info.State != stockguard.OrderTaken {
			c.fail(&vs, "orders %d: Order(%q) = {%q %v %v}, %s; want {%q taken [%v]}", i, id, info.ID, info.State, info.Lines, answer(err), id, ln)
		}
		// The string behind a prefix of its own, so that its neighbours
		// (a space added, other case) are surely unrecorded.
		u := fmt.Sprintf("%d~%s~%s", c.n.Add(1), c.tag, id)
		if strategy.ValidateID(u) != nil {
			continue
		}
		if err := o.Hold(ctx, u, time.Hour, ln); err != nil {
			c.fail(&vs, "orders %d: Hold(%q): %s", i, u, answer(err))
			continue
		}
		for _, v := range variants(u, strategy.ValidateID) {
			if _, err := o.Order(ctx, v); !errors.Is(err, stockguard.ErrUnknownOrder) {
				c.fail(&vs, "orders %d: Order(%q) after Hold(%q) only: %s, want %s", i, v, u, answer(err), stockguard.ErrUnknownOrder)
			}
		}
		if err := o.Return(ctx, u); err != nil {
			c.fail(&vs, "orders %d: Return(%q): %s", i, u, answer(err))
		}
		if info, err := o.Order(ctx, u); err != nil || info.ID != u || info.State != stockguard.OrderReturned {
			c.fail(&vs, "orders %d: Order(%q) after Return = {%q %v}, %s", i, u, info.ID, info.State, answer(err))
		}
	}
	return c.victimUntouched(ctx, vs)
}

func (c *StringCheck) invalidID(vs *[]Violation, who string, o stockguard.Orders, id string, ln stockguard.Line) {
	ctx := context.Background()
	invalid(vs, fmt.Sprintf("%s: Take(%q)", who, id), o.Take(ctx, id, ln))
	invalid(vs, fmt.Sprintf("%s: Hold(%q)", who, id), o.Hold(ctx, id, time.Hour, ln))
	invalid(vs, fmt.Sprintf("%s: Confirm(%q)", who, id), o.Confirm(ctx, id))
	invalid(vs, fmt.Sprintf("%s: Return(%q)", who, id), o.Return(ctx, id))
	invalid(vs, fmt.Sprintf("%s: Restock(%q)", who, id), o.Restock(ctx, id, ln.SKU, 1))
	_, err := o.Order(ctx, id)
	invalid(vs, fmt.Sprintf("%s: Order(%q)", who, id), err)
}

// victimUntouched adds a violation when the victim SKU's level changed.
func (c *StringCheck) victimUntouched(ctx context.Context, vs []Violation) []Violation {
	for i, inv := range c.Inventories {
		for _, v := range c.victims {
			if got, err := inv.Stock(ctx, v); err != nil || got != victimLevel {
				c.fail(&vs, "instance %d: Stock(%q) = %d, %s: a string touched another SKU (want %d)", i, v, got, answer(err), victimLevel)
			}
		}
	}
	return vs
}
