package stockotel

import (
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/stockguard"
)

// Option configures Wrap and WrapOrders.
type Option func(*options)

type options struct {
	meters   metric.MeterProvider
	tracers  trace.TracerProvider
	strategy string
	err      error
}

// WithMeterProvider records metrics with mp. Default: otel.GetMeterProvider()
// at the time of Wrap. A nil mp is a bad option.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp == nil {
			o.fail("nil MeterProvider")
			return
		}
		o.meters = mp
	}
}

// WithTracerProvider records spans with tp. Default:
// otel.GetTracerProvider() at the time of Wrap. A nil tp is a bad option.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp == nil {
			o.fail("nil TracerProvider")
			return
		}
		o.tracers = tp
	}
}

// WithStrategy sets AttrStrategy on every metric and span, so that two
// wrapped inventories in one process are told apart. Default: the wrapped
// value's Go type, e.g. "*redislock.Atomic". An empty name is a bad option.
func WithStrategy(name string) Option {
	return func(o *options) {
		if name == "" {
			o.fail("empty strategy name")
			return
		}
		o.strategy = name
	}
}

func (o *options) fail(why string) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: stockotel: %s", stockguard.ErrInvalidRequest, why)
	}
}

func newOptions(inner any, opts []Option) options {
	o := options{strategy: fmt.Sprintf("%T", inner)}
	for _, opt := range opts {
		if opt == nil {
			o.fail("nil option")
			continue
		}
		opt(&o)
	}
	if o.meters == nil {
		o.meters = otel.GetMeterProvider()
	}
	if o.tracers == nil {
		o.tracers = otel.GetTracerProvider()
	}
	return o
}
