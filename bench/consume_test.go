package bench

import (
	"context"
	"errors"
	"maps"
	"testing"
)

func TestMergeStats_addsCountsTakesTheLargestExtreme(t *testing.T) {
	res := &Result{Stats: map[string]float64{"backlog_max": 7}}
	MergeStats(res,
		map[string]float64{"back_applied": 10, "back_per_s": 100, "lag_p99_ms": 5, "lag_max_ms": 9, "applied_by_consumer-1": 10},
		map[string]float64{"back_applied": 30, "back_per_s": 50, "lag_p99_ms": 8, "lag_max_ms": 6, "applied_by_consumer-2": 30, "backlog_max": 3})
	want := map[string]float64{"backlog_max": 7, "back_applied": 40, "back_per_s": 150, "lag_p99_ms": 8, "lag_max_ms": 9,
		"applied_by_consumer-1": 10, "applied_by_consumer-2": 30}
	if !maps.Equal(res.Stats, want) {
		t.Errorf("merged %v, want %v", res.Stats, want)
	}
}

// TestStock_handsOffTheStoresOwnWork: Stock stops the copy of a store's
// own work that Open started, and a consumer process reaches the store
// through AttachConsumer, whose copy runs until its context ends.
func TestStock_handsOffTheStoresOwnWork(t *testing.T) {
	handedOff := false
	var ran []Consumer
	target := sharedFakeTarget("fake", faultNone)
	withWork := func(open func(context.Context, Servers, string) (*Store, error)) func(context.Context, Servers, string) (*Store, error) {
		return func(ctx context.Context, s Servers, ns string) (*Store, error) {
			st, err := open(ctx, s, ns)
			if err != nil {
				return nil, err
			}
			st.Consume = func(ctx context.Context, c Consumer) (map[string]float64, error) {
				<-ctx.Done()
				ran = append(ran, c)
				return map[string]float64{"applied_by_" + c.Name: 1}, nil
			}
			st.Handoff = func(context.Context) error { handedOff = true; return nil }
			return st, nil
		}
	}
	target.Open, target.Attach = withWork(target.Open), withWork(target.Attach)
	st, err := Stock(t.Context(), target, nil, opsWorkload(2, 10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	if !handedOff || !st.Consumes() {
		t.Fatalf("handed off %v, consumes %v: want both", handedOff, st.Consumes())
	}
	if _, err := AttachConsumer(t.Context(), target, nil, "sb'; DROP", Consumer{Name: "c"}); !errors.Is(err, ErrInvalidShare) {
		t.Errorf("a namespace Stock did not make: %v, want ErrInvalidShare", err)
	}
	if _, err := AttachConsumer(t.Context(), target, nil, st.Namespace(), Consumer{}); !errors.Is(err, ErrInvalidShare) {
		t.Errorf("a consumer without a name: %v, want ErrInvalidShare", err)
	}
	consume, err := AttachConsumer(t.Context(), target, nil, st.Namespace(), Consumer{Name: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	figs, err := consume(ctx)
	if err != nil || figs["applied_by_c1"] != 1 || len(ran) != 1 || ran[0].Name != "c1" {
		t.Errorf("figures %v (%v), ran %v", figs, err, ran)
	}
}
