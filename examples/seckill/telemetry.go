package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// telemetry is the process's OpenTelemetry SDK: metrics exported to a
// private Prometheus registry served at /metrics, traces to stderr when
// -trace-stdout is set (and sampled off otherwise, so that the spans cost
// next to nothing under load).
type telemetry struct {
	meters   *sdkmetric.MeterProvider
	tracers  *sdktrace.TracerProvider
	registry *prometheus.Registry
}

func newTelemetry(traceStdout bool, instance string) (*telemetry, error) {
	res := resource.NewSchemaless(
		semconv.ServiceName("seckill"),
		semconv.ServiceInstanceID(instance),
	)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &telemetry{
		meters:   sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res)),
		registry: reg,
	}
	traceOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if traceStdout {
		spans, err := stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
		if err != nil {
			return nil, fmt.Errorf("trace exporter: %w", err)
		}
		traceOpts = append(traceOpts, sdktrace.WithBatcher(spans))
	} else {
		// Honour a caller's sampled trace; start none of our own.
		traceOpts = append(traceOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	}
	t.tracers = sdktrace.NewTracerProvider(traceOpts...)
	otel.SetMeterProvider(t.meters)
	otel.SetTracerProvider(t.tracers)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

func (t *telemetry) handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}

// shutdown flushes spans still batched.
func (t *telemetry) shutdown(ctx context.Context) error {
	return errors.Join(t.tracers.Shutdown(ctx), t.meters.Shutdown(ctx))
}
