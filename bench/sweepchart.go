package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// sweep is one line of a sweep chart: a target's open-loop runs at one
// worker and process count, by offered rate.
type sweep struct {
	target         string
	broken         bool
	needs          []string
	workers, procs int
	peak           float64   // the closed-loop attempt rate at the same counts, 0 if none
	points         []*Result // sorted by offered rate
}

func (s sweep) label() string {
	l := fmt.Sprintf("%s ×%d", s.target, s.workers)
	if s.procs > 1 {
		l += fmt.Sprintf(" in %d procs", s.procs)
	}
	if s.broken {
		l += " [broken]"
	}
	if s.peak > 0 {
		// Three significant digits: the peak is a reference, not a result.
		e := math.Pow(10, math.Floor(math.Log10(s.peak))-2)
		l += " (closed " + compact(math.Round(s.peak/e)*e) + "/s)"
	}
	return l
}

// sweeps groups the open-loop results by target, workers and processes,
// with the closed-loop peak of each group when the results have it.
func sweeps(results []*Result) []sweep {
	var out []sweep
	find := func(r *Result) int {
		return slices.IndexFunc(out, func(s sweep) bool {
			return s.target == r.Target && s.workers == r.Workload.Workers && s.procs == max(r.Procs, 1)
		})
	}
	for _, r := range results {
		if r.Workload.Rate > 0 && find(r) < 0 {
			out = append(out, sweep{target: r.Target, broken: r.Counterexample, needs: r.Needs, workers: r.Workload.Workers, procs: max(r.Procs, 1)})
		}
	}
	for _, r := range results {
		i := find(r)
		switch {
		case i < 0:
		case r.Workload.Rate > 0:
			out[i].points = append(out[i].points, r)
		default:
			out[i].peak = r.AttemptRate
		}
	}
	for _, s := range out {
		slices.SortStableFunc(s.points, func(a, b *Result) int { return cmp.Compare(a.Workload.Rate, b.Workload.Rate) })
	}
	return out
}

// WriteSweepChart draws the open-loop runs among results (a -rate sweep)
// against the offered rate, one line per target and worker count: the
// rate of requests actually sent (on the diagonal while the target keeps
// up) and the p99 latency measured from each request's intended start
// (coordinated omission corrected), with slo drawn across it when above 0.
// Closed-loop runs give each line's peak, in its legend entry. It writes
// the chart as SVG or PNG.
func WriteSweepChart(w io.Writer, results []*Result, slo time.Duration, format ChartFormat) error {
	ss := sweeps(results)
	if len(ss) == 0 {
		return fmt.Errorf("bench: no open-loop results to chart")
	}
	// Lines of one target differ in dashes by their worker and process
	// counts, in rising order.
	type counts struct{ workers, procs int }
	var shapes []counts
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		if c := (counts{s.workers, s.procs}); !slices.Contains(shapes, c) {
			shapes = append(shapes, c)
		}
		for _, r := range s.points {
			lo, hi = min(lo, r.Workload.Rate), max(hi, r.Workload.Rate)
		}
	}
	slices.SortFunc(shapes, func(a, b counts) int { return cmp.Or(cmp.Compare(a.workers, b.workers), cmp.Compare(a.procs, b.procs)) })

	sent := newPanel("Requests/s sent (on the diagonal: kept up)", "sent/s")
	lat := newPanel("p99 latency from the intended start", "ms")
	legend := newLegend()
	labels := make([]string, 0, len(ss)+2)
	var stores []string
	for _, s := range ss {
		style := draw.LineStyle{Color: colourFor(s.target, s.broken), Width: vg.Points(2), Dashes: workerDashes(slices.Index(shapes, counts{s.workers, s.procs}))}
		stores = append(stores, store(s.needs))
		glyph := draw.GlyphStyle{Color: style.Color, Radius: vg.Points(3.5), Shape: markerOf(store(s.needs)).shape}
		var sxy, lxy plotter.XYs
		for _, r := range s.points {
			if r.AttemptRate > 0 {
				sxy = append(sxy, plotter.XY{X: r.Workload.Rate, Y: r.AttemptRate})
			}
			if r.Latency.P99 > 0 {
				lxy = append(lxy, plotter.XY{X: r.Workload.Rate, Y: ms(r.Latency.P99)})
			}
		}
		thumbs, err := drawSeries(style, glyph, panelXYs{sent, sxy}, panelXYs{lat, lxy})
		if err != nil {
			return err
		}
		if thumbs != nil {
			legend.Add(s.label(), thumbs...)
			labels = append(labels, s.label())
		}
	}
	grey := draw.LineStyle{Color: color.RGBA{120, 120, 120, 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	diagonal, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return err
	}
	diagonal.LineStyle = grey
	sent.Add(diagonal)
	legend.Add("offered (sent = offered)", diagonal)
	labels = append(labels, "offered (sent = offered)")
	if slo > 0 {
		bound, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ms(slo)}, {X: hi, Y: ms(slo)}})
		if err != nil {
			return err
		}
		bound.LineStyle = draw.LineStyle{Color: color.RGBA{200, 0, 0, 255}, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
		lat.Add(bound)
		l := "p99 bound (-slo " + slo.String() + ")"
		legend.Add(l, bound)
		labels = append(labels, l)
	}
	for _, p := range []*plot.Plot{sent, lat} {
		p.X.Label.Text = "offered requests/s"
		scaleAxis(&p.X)
		setValueAxis(p)
	}

	notes := markerNotes(stores)
	if len(shapes) > 1 {
		notes = append(notes, "solid, dotted, dash-dotted: worker (then process) counts in rising order")
	}
	wl := ss[0].points[0].Workload
	title := fmt.Sprintf("stockguard — open-loop sweep, %s, qty %s, %v per point, latency coordinated-omission corrected",
		skuText(wl), wl.Qty(), wl.Duration)
	return drawChart(w, format, title, sent, lat, legend, labels, notes)
}

// workerDashes: solid for the sweep chart's first worker and process
// counts, dotted and dash-dotted for the next.
func workerDashes(i int) []vg.Length {
	switch i % 3 {
	case 1:
		return []vg.Length{vg.Points(2), vg.Points(2)}
	case 2:
		return []vg.Length{vg.Points(6), vg.Points(2), vg.Points(2), vg.Points(2)}
	}
	return nil
}
