package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts of Atomic: each is level.lua and orders_lib.lua followed by
// its own file (the order scripts' after the library functions they share
// with Batched's orders_batch.lua: place, act), hashed once per process.
var (
	//go:embed orders_lib.lua
	ordersLibLua string
	//go:embed orders_decrement.lua
	ordersDecrementLua string
	//go:embed orders_stock.lua
	ordersStockLua string
	//go:embed orders_place.lua
	ordersPlaceLua string
	//go:embed orders_placing.lua
	ordersPlacingLua string
	//go:embed orders_acting.lua
	ordersActingLua string
	//go:embed orders_act.lua
	ordersActLua string
	//go:embed orders_restock.lua
	ordersRestockLua string
	//go:embed orders_read.lua
	ordersReadLua string
	//go:embed orders_record.lua
	ordersRecordLua string
	//go:embed orders_line.lua
	ordersLineLua string
	//go:embed orders_setstock.lua
	ordersSetStockLua string
	//go:embed orders_held.lua
	ordersHeldLua string

	decrementScript = ordersScript(ordersDecrementLua)
	stockScript     = ordersScript(ordersStockLua)
	placeScript     = ordersScript(ordersPlacingLua + ordersPlaceLua)
	actScript       = ordersScript(ordersPlacingLua + ordersActingLua + ordersActLua)
	restockScript   = ordersScript(ordersRestockLua)
	readScript      = ordersScript(ordersReadLua)
	recordScript    = ordersScript(ordersRecordLua)
	lineScript      = ordersScript(ordersLineLua)
	setStockScript  = ordersScript(ordersSetStockLua)
	heldScript      = ordersScript(ordersHeldLua)
)

func ordersScript(src string) *redis.Script { return redis.NewScript(levelLua + ordersLibLua + src) }

// Codes the scripts reply with.
const (
	codeUnknownSKU = -1
	codeShort      = -2
	codeCorrupt    = -3
	codeMismatch   = -5
	codeClosed     = -6
	codeNoOrder    = -7
	codeResolve    = -8
	codeReread     = -9
	codeOverflow   = -10
	codeLineUndone = -11
	codeLineNewer  = -12
	codeLineArmed  = -13
	codeLineGone   = -14
	codeFenced     = -15
	codeStale      = -16
	codeMore       = -17
)

// flag01 is a script's boolean argument.
func flag01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// replyInt is element i of a script's array reply, as an integer (0 when
// missing or not one).
func replyInt(reply []any, i int) int64 {
	if i >= len(reply) {
		return 0
	}
	n, _ := reply[i].(int64)
	return n
}

// replyString is element i of a script's array reply, as a string ("" when
// missing or not one).
func replyString(reply []any, i int) string {
	if i >= len(reply) {
		return ""
	}
	s, _ := reply[i].(string)
	return s
}

// replyStrings are the string elements of reply from index i on.
func replyStrings(reply []any, i int) []string {
	var out []string
	for ; i < len(reply); i++ {
		if s, ok := reply[i].(string); ok {
			out = append(out, s)
		}
	}
	return out
}
