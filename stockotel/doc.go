// Package stockotel records OpenTelemetry metrics and traces for any
// stockguard.Inventory or stockguard.Orders.
//
// It is a wrapper, not an option on each strategy, so that it works the
// same on every strategy of this module and on an Inventory of your own:
//
//	inv := stockotel.Wrap(redislock.NewAtomic(rdb))
//	orders := stockotel.WrapOrders(mysqllock.NewBatched(db))
//
// It depends on the OpenTelemetry API only; pick the SDK and exporter in
// your program and pass its providers with WithMeterProvider and
// WithTracerProvider (the default is the otel globals, which record
// nothing until the program installs providers).
//
// Every call is one span (SpanPrefix + method) and one count of
// MetricOperations and MetricDuration, labelled with the operation and the
// outcome: AttrOutcome is OutcomeOK or the stable name of the one contract
// error the call returned (Outcome). SKUs and order IDs are span
// attributes only, never metric attributes, so a catalogue of a million
// SKUs does not become a million time series. Strategies that count retries
// (strategy.RetryCounter) or batches (a Stats method returning a struct
// with int64 fields Batches and Requests, as mysqllock.Batched does) are
// also observed through MetricRetries, MetricBatches and
// MetricBatchRequests.
//
// What a wrapper cannot see: it measures each call from the outside, so
// the time a strategy spends waiting for a row lock, a Redis lock or a
// batch to fill is part of MetricDuration but not broken out; a retry
// inside a strategy shows only in MetricRetries; and a hold that expires
// by the backend's clock is never a call, so it is seen only when Order
// reports it (MetricOrders with state expired).
//
// Bad options (a nil provider, an empty strategy name) follow the
// stockguard policy: the wrapper is still returned and every method
// returns an error wrapping stockguard.ErrInvalidRequest, before any I/O.
package stockotel
