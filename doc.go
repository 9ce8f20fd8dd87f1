// Package stockguard is the contract of a stock decrement: take qty units
// of a SKU, all of them or none, never below zero, from many processes at
// once. Inventory (Decrement, SetStock, Stock) is that contract; Orders adds
// whole orders of several Lines under an ID the caller chooses (Take, Hold,
// Confirm, Return, Restock, Order), so that every call can be repeated with
// exactly-once effect.
//
// The implementations live in the strategy packages: mysqllock and pglock
// over database/sql (with sqlx), redislock and watchtx over go-redis, and
// tiered, a Redis front before a database. Start with mysqllock.NewAtomic,
// pglock.NewAtomic or redislock.NewAtomic on the store that already holds
// your stock, and switch to the NewBatched of the same package when one SKU
// has many concurrent buyers per process. The README's "Which strategy"
// table and docs/strategies.md say when each other strategy fits.
//
// Every method returns nil or an error that matches, with errors.Is, exactly
// one of this package's errors or the context's: ErrInsufficientStock,
// ErrUnknownSKU, ErrInvalidRequest (bad input, refused before any I/O),
// ErrContention (busy, gave up) and ErrUnavailable (the backend could not
// serve) changed nothing; so did context.Canceled and
// context.DeadlineExceeded when the context ended before anything was sent.
// ErrOutcomeUnknown means the request may or may not have been applied:
// repeat an Orders call with the same ID, or reconcile. Compare with
// errors.Is, never ==: strategies wrap these errors with detail.
//
// Requests are validated before any I/O: a SKU is 1–MaxSKULen bytes of valid
// UTF-8 without control characters, a quantity 1…MaxQty, a stock level
// 0…MaxQty, an order ID 1–MaxIDLen bytes like a SKU, an order 1–MaxLines
// lines with distinct SKUs, a hold's ttl MinHoldTTL…MaxHoldTTL.
//
// Writing a strategy of your own: package strategy holds the validation,
// contract and retry helpers the strategies here use, and package stocktest
// the conformance suite every strategy passes.
package stockguard
