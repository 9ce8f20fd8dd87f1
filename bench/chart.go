package bench

import (
	"fmt"
	"hash/fnv"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ChartFormat is an image format WriteChart can produce.
type ChartFormat string

// The chart formats.
const (
	SVG ChartFormat = "svg"
	PNG ChartFormat = "png"
)

// chart size: two panels side by side and a legend column at least
// legendW wide, wider (and the chart taller) when the legend needs it.
const (
	panelsW = 9.6 * vg.Inch
	chartH  = 5.5 * vg.Inch
	legendW = 3.4 * vg.Inch
	pngDPI  = 110
)

// palette holds 20 colours that stay apart on white, the first 16 — as
// many lines as a default run draws — the most distinct. A target keeps
// its colour from chart to chart: it is picked by the target's place in
// the registry (colourIndex).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 128, 255}, {128, 0, 0, 255},
	{0, 0, 0, 255}, {240, 50, 230, 255}, {70, 153, 144, 255}, {230, 171, 2, 255},
	{107, 110, 207, 255}, {255, 152, 150, 255}, {102, 194, 165, 255}, {166, 118, 29, 255},
}

// colourFor returns the colour of a target, by its place among the
// strategies (or, apart, among the counterexamples, which are dashed),
// else by a hash of its name, so that it does not depend on which other
// targets a chart shows.
func colourFor(target string, counterexample bool) color.RGBA {
	if i := colourIndex(target, counterexample); i >= 0 {
		return palette[i]
	}
	h := fnv.New32a()
	h.Write([]byte(target))
	return palette[h.Sum32()%uint32(len(palette))]
}

// colourIndex picks target's colour, or -1 for a target not registered.
// The targets of a default run take the palette in registration order, so
// that their lines differ; those that run on request take, in
// registration order, first the colours no default has, then those of the
// defaults last in line — so that neighbours in the registry, which are
// charted together (mysql-* beside tidb-*), differ too.
func colourIndex(target string, counterexample bool) int {
	list := Targets()
	if counterexample {
		list = Counterexamples()
	}
	var defaults, onRequest []string
	for _, t := range list {
		if t.OnRequest {
			onRequest = append(onRequest, t.Name)
		} else {
			defaults = append(defaults, t.Name)
		}
	}
	n := len(palette)
	if i := slices.Index(defaults, target); i >= 0 {
		return i % n
	}
	k := slices.Index(onRequest, target)
	if k < 0 {
		return -1
	}
	d := min(len(defaults), n)
	if k %= n; k < n-d {
		return d + k
	}
	return d - 1 - (k - (n - d))
}

// series is one line: a target's results by worker count.
type series struct {
	target string
	label  string
	broken bool
	skus   int // index of its SKU count among the chart's, for the dashes
	needs  []string
	points []*Result // sorted by workers
}

func chartSeries(results []*Result) []series {
	var out []series
	var skuCounts []int
	for _, r := range results {
		if !slices.Contains(skuCounts, r.Workload.SKUs) {
			skuCounts = append(skuCounts, r.Workload.SKUs)
		}
	}
	for _, r := range results {
		label := r.Target
		if len(skuCounts) > 1 {
			label += fmt.Sprintf(" (%d SKUs)", r.Workload.SKUs)
		}
		if r.Counterexample {
			label += " [broken]"
		} else if !r.Sound() {
			label += " [UNSOUND]"
		}
		i := slices.IndexFunc(out, func(s series) bool { return s.label == label })
		if i < 0 {
			out = append(out, series{target: r.Target, label: label, broken: r.Counterexample, needs: r.Needs,
				skus: slices.Index(skuCounts, r.Workload.SKUs)})
			i = len(out) - 1
		}
		out[i].points = append(out[i].points, r)
	}
	for _, s := range out {
		slices.SortStableFunc(s.points, func(a, b *Result) int { return a.Workload.Workers - b.Workload.Workers })
	}
	return out
}

// dashes: solid for a strategy at the chart's first SKU count, dotted and
// dash-dotted for the next; long dashes for a counterexample.
func (s series) dashes() []vg.Length {
	switch {
	case s.broken:
		return []vg.Length{vg.Points(6), vg.Points(3)}
	case s.skus%3 == 1:
		return []vg.Length{vg.Points(2), vg.Points(2)}
	case s.skus%3 == 2:
		return []vg.Length{vg.Points(6), vg.Points(2), vg.Points(2), vg.Points(2)}
	}
	return nil
}

// WriteChart draws, against the number of workers, one line per target:
// throughput (for a flash sale, the time to sell out) and p99 latency. It
// writes the chart as SVG or PNG.
func WriteChart(w io.Writer, results []*Result, format ChartFormat) error {
	if len(results) == 0 {
		return fmt.Errorf("bench: no results to chart")
	}
	ss := chartSeries(results)
	wl := results[0].Workload
	flash := !slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.Shape != Flash })
	desc := fmt.Sprintf("%s, %s, qty %s, %v per point, workers spread over %d app instances",
		wl.Shape, skuText(wl), wl.Qty(), wl.Duration, wl.Instances)
	checkout := !slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.Shape != Checkout })
	if checkout {
		m := wl.Orders
		desc = fmt.Sprintf("checkout, %s, %s of qty %s, %.0f%% held, %v per point, %d app instances",
			skuText(wl), wl.LinesText(), wl.Qty(), 100*m.HoldShare, wl.Duration, wl.Instances)
	}
	if flash {
		desc = fmt.Sprintf("flash sale, %s, %d units each, qty %s, workers spread over %d app instances",
			skuText(wl), wl.InitialStock(), wl.Qty(), wl.Instances)
	}

	// Axis labels stay short: gonum reserves a long label's length as padding
	// on both axes, squeezing the data area. Titles stay short too: an SVG
	// viewer without the Liberation fonts substitutes wider ones.
	first := newPanel("Successful decrements/s (higher is better)", "decrements/s")
	firstY := func(r *Result) (float64, bool) { return r.Throughput, r.Throughput > 0 }
	if checkout {
		first = newPanel("Successful orders/s (higher is better)", "orders/s")
	}
	if flash {
		first = newPanel("Time to sell out (lower is better)", "ms")
		firstY = func(r *Result) (float64, bool) { return ms(r.SellOut), r.SoldOut && r.SellOut > 0 }
	}
	lat := newPanel("p99 latency (lower is better)", "ms")
	legend := newLegend()
	var workers []int
	var stores []string
	for _, s := range ss {
		style := draw.LineStyle{Color: colourFor(s.target, s.broken), Width: vg.Points(2), Dashes: s.dashes()}
		stores = append(stores, store(s.needs))
		glyph := draw.GlyphStyle{Color: style.Color, Radius: vg.Points(3.5), Shape: markerOf(store(s.needs)).shape}
		var fxy, lxy plotter.XYs
		for _, r := range s.points {
			x := float64(r.Workload.Workers)
			if !slices.Contains(workers, r.Workload.Workers) {
				workers = append(workers, r.Workload.Workers)
			}
			if y, ok := firstY(r); ok {
				fxy = append(fxy, plotter.XY{X: x, Y: y})
			}
			if r.Latency.P99 > 0 {
				lxy = append(lxy, plotter.XY{X: x, Y: ms(r.Latency.P99)})
			}
		}
		thumbs, err := drawSeries(style, glyph, panelXYs{first, fxy}, panelXYs{lat, lxy})
		if err != nil {
			return err
		}
		if thumbs != nil {
			legend.Add(s.label, thumbs...)
		}
	}
	slices.Sort(workers)
	for _, p := range []*plot.Plot{first, lat} {
		p.X.Label.Text = "workers"
		setWorkerAxis(p, workers)
		setValueAxis(p)
	}

	// The notes under the legend: which marker is which store, and what
	// the colours and dashes mean.
	notes := markerNotes(stores)
	if slices.ContainsFunc(ss, func(s series) bool { return s.broken }) {
		notes = append(notes, "dashed: known-broken counterexample")
	}
	labels := make([]string, len(ss))
	for i, s := range ss {
		labels[i] = s.label
	}
	return drawChart(w, format, "stockguard — "+desc, first, lat, legend, labels, notes)
}

// newLegend returns a legend in the charts' style.
func newLegend() *plot.Legend {
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(12)
	legend.Padding = vg.Points(5)
	legend.ThumbnailWidth = vg.Points(30)
	return &legend
}

// markerNotes says which marker is which store, for the stores charted,
// and that a colour is a strategy.
func markerNotes(stores []string) []string {
	var signs []string
	for _, m := range markers {
		var names []string
		for _, st := range stores {
			if markerOf(st).sign == m.sign && !slices.Contains(names, st) {
				names = append(names, st)
			}
		}
		if len(names) > 0 {
			signs = append(signs, m.sign+": "+strings.Join(names, ", "))
		}
	}
	if len(signs) == 0 {
		return nil
	}
	return []string{"one colour per strategy; marker = store holding the stock", strings.Join(signs, "   ")}
}

// drawChart writes a chart: the title, the two panels side by side, and the
// legend, whose entries are labels, with the notes under it.
func drawChart(w io.Writer, format ChartFormat, title string, left, right *plot.Plot, legend *plot.Legend, labels, notes []string) error {
	note := legend.TextStyle
	note.Font.Size = vg.Points(10)

	// Size the legend column to its longest label — with room for an SVG
	// viewer's wider substitute font — and the chart to the legend's rows.
	lw := legendW
	for _, l := range labels {
		lw = max(lw, legend.ThumbnailWidth+legend.Padding+legend.TextStyle.Width(l)*1.15+vg.Points(30))
	}
	for _, n := range notes {
		lw = max(lw, note.Width(n)*1.15+vg.Points(30))
	}
	ts := left.Title.TextStyle
	ts.Font.Size = vg.Points(15)
	ts.XAlign, ts.YAlign = draw.XLeft, draw.YTop
	titleH := ts.Height(title) + vg.Points(20)
	rows := vg.Length(len(labels)) * (legend.TextStyle.Height("Xg") + legend.Padding)
	noteH := vg.Length(len(notes))*vg.Points(14) + vg.Points(30)
	chartW, h := panelsW+lw, max(chartH, titleH+vg.Points(30)+rows+noteH)
	chartW = max(chartW, ts.Width(title)+vg.Points(20))

	var canvas vg.CanvasWriterTo
	switch format {
	case SVG:
		canvas = vgsvg.New(chartW, h)
	case PNG:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartW, h), vgimg.UseDPI(pngDPI))}
	default:
		return fmt.Errorf("bench: chart format %q: want svg or png", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	dc.FillText(ts, vg.Point{X: dc.Min.X + vg.Points(10), Y: dc.Max.Y - vg.Points(8)}, title)

	panels := draw.Crop(dc, 0, -(chartW - panelsW), 0, -titleH)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(30), PadLeft: vg.Points(10), PadBottom: vg.Points(10)}
	left.Draw(tiles.At(panels, 0, 0))
	right.Draw(tiles.At(panels, 1, 0))
	legend.Draw(draw.Crop(dc, panelsW+vg.Points(20), -vg.Points(10), noteH, -titleH-vg.Points(30)))
	for i, line := range notes {
		dc.FillText(note, vg.Point{X: panelsW + vg.Points(20), Y: vg.Points(float64(14*(len(notes)-1-i)) + 22)}, line)
	}

	_, err := canvas.WriteTo(w)
	return err
}

// marker is the point shape of the targets whose stock a kind of store
// holds.
type marker struct {
	shape    draw.GlyphDrawer
	sign     string   // for the note under the legend
	backends []string // the bench backends of that kind
}

// markers tell the stores apart at a glance, by the backend that holds a
// target's stock (its first need): filled dots for MySQL and what speaks
// its protocol, triangles for PostgreSQL, open rings for Redis and what
// speaks its protocol; squares for any other (an in-memory reference). The
// signs are words, not symbols: an SVG viewer's substitute font lacks most
// of the outlined shapes.
var markers = []marker{
	{draw.CircleGlyph{}, "filled dots", []string{"mysql", "tidb"}},
	{draw.TriangleGlyph{}, "triangles", []string{"postgres"}},
	{draw.RingGlyph{}, "rings", []string{"redis", "redlock", "redis-sentinel", "redis-cluster", "valkey", "valkey-redlock"}},
	{draw.SquareGlyph{}, "squares", nil},
}

// markerOf returns the marker of the targets whose stock backend holds.
func markerOf(backend string) marker {
	for _, m := range markers {
		if slices.Contains(m.backends, backend) {
			return m
		}
	}
	return markers[len(markers)-1]
}

// store names the backend holding a target's stock: its first need, or
// "memory" for a target that needs none.
func store(needs []string) string {
	if len(needs) == 0 {
		return "memory"
	}
	return needs[0]
}

// panelXYs is one series' points on one panel.
type panelXYs struct {
	p   *plot.Plot
	xys plotter.XYs
}

// drawSeries draws one series as a line with points, in style and glyph,
// on each panel that has points of it, and returns its legend thumbnails
// (nil when it drew nothing).
func drawSeries(style draw.LineStyle, glyph draw.GlyphStyle, panels ...panelXYs) ([]plot.Thumbnailer, error) {
	var thumbs []plot.Thumbnailer
	for _, pp := range panels {
		if len(pp.xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(pp.xys)
		if err != nil {
			return nil, err
		}
		points, err := plotter.NewScatter(pp.xys)
		if err != nil {
			return nil, err
		}
		line.LineStyle, points.GlyphStyle = style, glyph
		pp.p.Add(line, points)
		thumbs = []plot.Thumbnailer{line, points}
	}
	return thumbs, nil
}

func newPanel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return p
}

// setWorkerAxis puts the worker counts on a log2 scale, labelled exactly.
func setWorkerAxis(p *plot.Plot, workers []int) {
	if len(workers) == 0 {
		return
	}
	ticks := make(plot.ConstantTicks, len(workers))
	for i, w := range workers {
		ticks[i] = plot.Tick{Value: float64(w), Label: strconv.Itoa(w)}
	}
	p.X.Tick.Marker = ticks
	lo, hi := float64(workers[0]), float64(workers[len(workers)-1])
	if hi > lo {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = lo/1.25, hi*1.25
	} else {
		p.X.Min, p.X.Max = lo-1, hi+1
	}
}

// setValueAxis uses a log scale when the values span more than a factor of
// 20, so that slow strategies stay visible beside fast ones.
func setValueAxis(p *plot.Plot) { scaleAxis(&p.Y) }

// scaleAxis makes a a log scale when its values span more than a factor of
// 20, else a linear one from 0.
func scaleAxis(a *plot.Axis) {
	if math.IsInf(a.Min, 0) || math.IsInf(a.Max, 0) { // no data
		a.Min, a.Max = 0, 1
		return
	}
	if a.Max/a.Min > 20 {
		a.Scale = plot.LogScale{}
		a.Tick.Marker = niceLogTicks{}
		a.Min, a.Max = a.Min/1.5, a.Max*1.5
		return
	}
	a.Min = 0
	a.Max *= 1.1
}

// niceLogTicks labels 1, 2 and 5 times each power of ten, compactly ("20k").
type niceLogTicks struct{}

func (niceLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = compact(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// compact formats v briefly: 0.05, 2, 500, 20k, 1.5M.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(strconv.FormatFloat(v/1e6, 'f', -1, 64), ".0") + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func skuText(w Workload) string {
	if w.SKUs == 1 {
		return "1 hot SKU"
	}
	return fmt.Sprintf("%d SKUs (%s)", w.SKUs, w.Skew)
}
