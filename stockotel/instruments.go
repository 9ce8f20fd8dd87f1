package stockotel

import (
	"context"
	"reflect"

	sgstrategy "github.com/stockguard/stockguard/strategy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// durationBuckets are the histogram's advised boundaries in seconds: from
// a Redis round trip on loopback (~100µs) to a lock wait at its timeout.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// instruments are the synchronous instruments of one wrapper. An
// instrument the SDK refuses is reported to otel.Handle and replaced by
// the API's no-op, as the otel API does: telemetry never fails a sale.
type instruments struct {
	operations metric.Int64Counter
	duration   metric.Float64Histogram
	units      metric.Int64Counter
	unknown    metric.Int64Counter
	orders     metric.Int64Counter
}

func newInstruments(meter metric.Meter) *instruments {
	var ins instruments
	var err error
	ins.operations, err = meter.Int64Counter(MetricOperations,
		metric.WithDescription("Calls to the inventory, by operation and outcome."),
		metric.WithUnit("{operation}"))
	handle(err)
	ins.duration, err = meter.Float64Histogram(MetricDuration,
		metric.WithDescription("Duration of calls to the inventory, lock and batch waits included."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	handle(err)
	ins.units, err = meter.Int64Counter(MetricUnitsTaken,
		metric.WithDescription("Units taken by successful Decrement, Take and Hold calls."),
		metric.WithUnit("{unit}"))
	handle(err)
	ins.unknown, err = meter.Int64Counter(MetricOutcomeUnknown,
		metric.WithDescription("Calls whose outcome is unknown and must be reconciled."),
		metric.WithUnit("{operation}"))
	handle(err)
	ins.orders, err = meter.Int64Counter(MetricOrders,
		metric.WithDescription("Order calls, by operation, outcome and resulting state."),
		metric.WithUnit("{order}"))
	handle(err)
	return &ins
}

// observe registers the observable instruments that inner supports:
// retries for a strategy.RetryCounter, batch counts for a strategy with
// Stats. The callback lives as long as the MeterProvider, so wrap a
// strategy once, at start-up.
func observe(meter metric.Meter, inner any, strategy attribute.KeyValue) {
	retrier, _ := inner.(sgstrategy.RetryCounter)
	stats := statsOf(inner)
	if retrier == nil && stats == nil {
		return
	}
	attrs := metric.WithAttributes(strategy)
	var observables []metric.Observable
	var retries, batches, requests metric.Int64ObservableCounter
	var err error
	if retrier != nil {
		retries, err = meter.Int64ObservableCounter(MetricRetries,
			metric.WithDescription("Retries made inside the strategy (conflicts, lock attempts, deadlocks)."),
			metric.WithUnit("{retry}"))
		handle(err)
		observables = append(observables, retries)
	}
	if stats != nil {
		batches, err = meter.Int64ObservableCounter(MetricBatches,
			metric.WithDescription("Writes made by a combining strategy, one transaction each."),
			metric.WithUnit("{batch}"))
		handle(err)
		requests, err = meter.Int64ObservableCounter(MetricBatchRequests,
			metric.WithDescription("Requests carried by a combining strategy's writes."),
			metric.WithUnit("{request}"))
		handle(err)
		observables = append(observables, batches, requests)
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if retrier != nil {
			o.ObserveInt64(retries, retrier.Retries(), attrs)
		}
		if stats != nil {
			b, r := stats()
			o.ObserveInt64(batches, b, attrs)
			o.ObserveInt64(requests, r, attrs)
		}
		return nil
	}, observables...)
	handle(err)
}

// statsOf returns a reader of v's batch counts when v has a method
// Stats() returning a struct with exported int64 fields Batches and
// Requests, else nil. It goes by shape rather than by type so that this
// package needs no import of a strategy package (and its drivers).
func statsOf(v any) func() (batches, requests int64) {
	m := reflect.ValueOf(v).MethodByName("Stats")
	if !m.IsValid() {
		return nil
	}
	t := m.Type()
	if t.NumIn() != 0 || t.NumOut() != 1 || t.Out(0).Kind() != reflect.Struct {
		return nil
	}
	b, okB := t.Out(0).FieldByName("Batches")
	r, okR := t.Out(0).FieldByName("Requests")
	if !okB || !okR || !b.IsExported() || !r.IsExported() ||
		b.Type.Kind() != reflect.Int64 || r.Type.Kind() != reflect.Int64 {
		return nil
	}
	return func() (int64, int64) {
		s := m.Call(nil)[0]
		return s.FieldByIndex(b.Index).Int(), s.FieldByIndex(r.Index).Int()
	}
}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}
