package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"

	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/tiered"
)

// The tiered strategy's consumer applies the orders Redis accepted to
// MySQL. It runs in the service (-consume, the default: one binary, one
// process, enough for a copy or two) or as processes of their own
// (-role consumer): then the consumers scale with the database, not with
// the HTTP traffic, a deploy of the service does not stop them mid-batch,
// and their CPU is not the buyers'. Every copy of either kind shares the
// stream's consumer group.

// newConsumer returns the consumer of the tiered strategy's stream, with
// its metrics registered.
func newConsumer(db *sqlx.DB, rdb *redis.Client, cfg config) (*tiered.Consumer, error) {
	// On SIGTERM the batch in hand is applied and acknowledged before
	// the process exits, within -grace.
	opts := []tiered.Option{tiered.WithPrefix(cfg.prefix), tiered.WithStopGrace(cfg.grace)}
	if cfg.consumerName != "" {
		opts = append(opts, tiered.WithConsumerName(cfg.consumerName))
	}
	if cfg.claimIdle > 0 {
		opts = append(opts, tiered.WithClaimIdle(cfg.claimIdle))
	}
	// The back carries a whole batch of entries in one transaction.
	back, err := mysqllock.NewBatched(db, mysqllock.WithTable(cfg.table), mysqllock.WithBatchSize(tiered.DefaultBatch))
	if err != nil {
		return nil, err
	}
	c, err := tiered.NewConsumer(rdb, back, opts...)
	if err != nil {
		return nil, err
	}
	return c, consumerMetrics(c)
}

// consume runs c until ctx ends; then the Step in hand finishes — its
// batch applied to the back and acknowledged — within the consumer's stop
// grace (-grace), and consume returns. Entries it has not read are left to
// the group's other consumers (or to itself, restarted under the same
// name).
func consume(ctx context.Context, c *tiered.Consumer, log *slog.Logger) error {
	log.Info("consuming", "consumer", c.Name())
	err := c.Run(ctx)
	s := c.Stats()
	log.Info("consumer stopped", "consumer", c.Name(), "applied", s.Applied, "claimed", s.Claimed,
		"pending", s.Pending, "lag_p99", s.LagP99.String())
	return err
}

// consumerMetrics publishes c's Stats as OpenTelemetry instruments,
// read at each collection (Prometheus: tiered_consumer_*).
func consumerMetrics(c *tiered.Consumer) error {
	m := otel.Meter("github.com/stockguard/stockguard/examples/seckill")
	applied, err1 := m.Int64ObservableCounter("tiered.consumer.applied", otelmetric.WithDescription("entries applied to the back and acknowledged"))
	claimed, err2 := m.Int64ObservableCounter("tiered.consumer.claimed", otelmetric.WithDescription("entries claimed from an idle consumer"))
	deferred, err3 := m.Int64ObservableCounter("tiered.consumer.deferred", otelmetric.WithDescription("times the back refused an entry for now"))
	pending, err4 := m.Int64ObservableGauge("tiered.consumer.pending", otelmetric.WithDescription("entries this consumer holds unacknowledged"))
	stuck, err5 := m.Int64ObservableGauge("tiered.consumer.stuck", otelmetric.WithDescription("entries the back refuses for good"))
	lag, err6 := m.Float64ObservableGauge("tiered.consumer.lag", otelmetric.WithUnit("s"),
		otelmetric.WithDescription("from the front's append to the back's commit, by quantile (1: the maximum)"))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return err
	}
	name := otelmetric.WithAttributes(attribute.String("consumer", c.Name()))
	_, err := m.RegisterCallback(func(_ context.Context, o otelmetric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(applied, s.Applied, name)
		o.ObserveInt64(claimed, s.Claimed, name)
		o.ObserveInt64(deferred, s.Deferred, name)
		o.ObserveInt64(pending, s.Pending, name)
		o.ObserveInt64(stuck, s.Stuck, name)
		for q, d := range map[string]time.Duration{"0.5": s.LagP50, "0.99": s.LagP99, "1": s.LagMax} {
			o.ObserveFloat64(lag, d.Seconds(), otelmetric.WithAttributes(attribute.String("consumer", c.Name()), attribute.String("quantile", q)))
		}
		return nil
	}, applied, claimed, deferred, pending, stuck, lag)
	return err
}
