package stockotel_test

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// recorder is a MeterProvider and TracerProvider built on the API's no-op
// types that keeps what it is given, so the tests need no SDK (which would
// otherwise land in the main module's go.mod).
type recorder struct {
	metricnoop.MeterProvider
	tracenoop.TracerProvider

	mu        sync.Mutex
	sums      map[string]float64 // instrument + "|" + attribute set → sum
	counts    map[string]int     // histogram instrument + attributes → records
	callbacks []metric.Callback
	spans     []*span
}

func newRecorder() *recorder {
	return &recorder{sums: map[string]float64{}, counts: map[string]int{}}
}

func key(name string, opts []metric.AddOption) string {
	set := metric.NewAddConfig(opts).Attributes()
	return name + "|" + set.Encoded(attribute.DefaultEncoder())
}

// sum returns what instrument name recorded under exactly attrs.
func (r *recorder) sum(name string, attrs ...attribute.KeyValue) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sums[key(name, []metric.AddOption{metric.WithAttributes(attrs...)})]
}

func (r *recorder) count(name string, attrs ...attribute.KeyValue) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key(name, []metric.AddOption{metric.WithAttributes(attrs...)})]
}

// collect runs the registered callbacks, as a reader would.
func (r *recorder) collect() {
	r.mu.Lock()
	cbs := append([]metric.Callback(nil), r.callbacks...)
	r.mu.Unlock()
	for _, cb := range cbs {
		_ = cb(context.Background(), observer{r: r})
	}
}

func (r *recorder) Meter(string, ...metric.MeterOption) metric.Meter { return meter{r: r} }

func (r *recorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{r: r} }

type meter struct {
	metricnoop.Meter
	r *recorder
}

func (m meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return counter{r: m.r, name: name}, nil
}

func (m meter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return histogram{r: m.r, name: name}, nil
}

func (m meter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return observable{name: name}, nil
}

func (m meter) RegisterCallback(cb metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.callbacks = append(m.r.callbacks, cb)
	return metricnoop.Registration{}, nil
}

type counter struct {
	metricnoop.Int64Counter
	r    *recorder
	name string
}

func (c counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.sums[key(c.name, opts)] += float64(v)
}

type histogram struct {
	metricnoop.Float64Histogram
	r    *recorder
	name string
}

func (h histogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	set := metric.NewRecordConfig(opts).Attributes()
	k := h.name + "|" + set.Encoded(attribute.DefaultEncoder())
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.sums[k] += v
	h.r.counts[k]++
}

type observable struct {
	metricnoop.Int64ObservableCounter
	name string
}

type observer struct {
	embedded.Observer
	r *recorder
}

func (o observer) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

func (o observer) ObserveInt64(inst metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	set := metric.NewObserveConfig(opts).Attributes()
	k := inst.(observable).name + "|" + set.Encoded(attribute.DefaultEncoder())
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.sums[k] = float64(v)
}

type tracer struct {
	tracenoop.Tracer
	r *recorder
}

func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &span{name: name, attrs: map[attribute.Key]attribute.Value{}}
	cfg := trace.NewSpanStartConfig(opts...)
	for _, kv := range cfg.Attributes() {
		s.attrs[kv.Key] = kv.Value
	}
	t.r.mu.Lock()
	t.r.spans = append(t.r.spans, s)
	t.r.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

// span records attributes and status; the tests read it after End.
type span struct {
	tracenoop.Span
	mu     sync.Mutex
	name   string
	attrs  map[attribute.Key]attribute.Value
	status codes.Code
	ended  bool
}

func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range kv {
		s.attrs[a.Key] = a.Value
	}
}

func (s *span) SetStatus(c codes.Code, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = c
}

func (s *span) End(...trace.SpanEndOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
}

func (s *span) IsRecording() bool { return true }
