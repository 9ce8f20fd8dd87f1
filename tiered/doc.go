// Package tiered is a stockguard.Orders with Redis in front and a durable
// Orders behind: the flash-sale architecture, where Redis takes the stock
// at memory speed and a database is the ledger of record.
//
// Every call is answered by the front, a redislock.NewAtomic with
// redislock.WithOrderStream: the script that takes an order's units also
// appends its final effect to a Redis Stream, so there is no take without
// its entry and no entry without its take. A Consumer, in the service or in
// a process of its own, applies each entry to the back (a
// mysqllock.NewBatched or NewAtomic, a pglock Orders — any
// stockguard.Orders) under the same order ID, so the back's ledger makes a
// redelivered entry a no-op, and acknowledges it only after the back
// committed. A Reconciler compares the two tiers per SKU, accounting for
// the entries in flight, and reports what does not add up.
//
// The back sees final effects only: a Take, or a hold once confirmed,
// becomes a Take there; a Return of a taken order a Return. Holds,
// expiries and Returns of holds stay on the front: their units never left
// for good, so the back, whose holds could expire on their own before a
// Confirm arrived, never sees them.
//
// Setup prepares a front once, at deployment; a front that lost its data
// (restarted without persistence) is refused with ErrFrontLost until
// Recover re-seeds it from the back. Every script the front runs, and every
// read and acknowledgement of a Consumer, carries the front's epoch
// (EpochKey) and applies only under it, so nothing of a lost front lands on
// its recovered successor. An ID the back applied is never applied afresh
// on the front after the front forgot it (IDsKey).
package tiered
