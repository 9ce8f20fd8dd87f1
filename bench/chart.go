package bench

import (
	"fmt"
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

// chart size: two panels side by side and a legend column.
const (
	chartW  = 13 * vg.Inch
	chartH  = 5.5 * vg.Inch
	legendW = 3.4 * vg.Inch
	pngDPI  = 110
)

// palette holds colours that stay apart for up to a dozen lines (Tableau's
// 10 plus two).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 0, 128, 255}, {128, 128, 0, 255},
}

// series is one line: a target's results by worker count.
type series struct {
	label  string
	broken bool
	needs  Need
	points []*Result // sorted by workers
}

func chartSeries(results []*Result) []series {
	var out []series
	multiSKU := slices.ContainsFunc(results, func(r *Result) bool { return r.Workload.SKUs != results[0].Workload.SKUs })
	for _, r := range results {
		label := r.Target
		if multiSKU {
			label += fmt.Sprintf(" (%d SKUs)", r.Workload.SKUs)
		}
		if r.Counterexample {
			label += " [broken]"
		} else if !r.Sound() {
			label += " [UNSOUND]"
		}
		i := slices.IndexFunc(out, func(s series) bool { return s.label == label })
		if i < 0 {
			out = append(out, series{label: label, broken: r.Counterexample, needs: r.Needs})
			i = len(out) - 1
		}
		out[i].points = append(out[i].points, r)
	}
	for _, s := range out {
		slices.SortStableFunc(s.points, func(a, b *Result) int { return a.Workload.Workers - b.Workload.Workers })
	}
	return out
}

// WriteChart draws throughput and p99 latency against the number of
// workers, one line per target, and writes it as SVG or PNG.
func WriteChart(w io.Writer, results []*Result, format ChartFormat) error {
	if len(results) == 0 {
		return fmt.Errorf("bench: no results to chart")
	}
	ss := chartSeries(results)
	wl := results[0].Workload
	desc := fmt.Sprintf("%s, %s, qty %s, %v per point, workers spread over %d app instances",
		wl.Shape, skuText(wl), wl.Qty(), wl.Duration, wl.Instances)

	// Axis labels stay short: gonum reserves a long label's length as padding
	// on both axes, squeezing the data area. Titles stay short too: an SVG
	// viewer without the Liberation fonts substitutes wider ones.
	thr := newPanel("Successful decrements/s (higher is better)", "decrements/s")
	lat := newPanel("p99 latency (lower is better)", "ms")
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(12)
	legend.Padding = vg.Points(5)
	legend.ThumbnailWidth = vg.Points(30)
	var workers []int
	for i, s := range ss {
		style := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(2)}
		glyph := draw.GlyphStyle{Color: style.Color, Radius: vg.Points(3.5), Shape: glyphFor(s.needs)}
		if s.broken {
			style.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		var txy, lxy plotter.XYs
		for _, r := range s.points {
			x := float64(r.Workload.Workers)
			if !slices.Contains(workers, r.Workload.Workers) {
				workers = append(workers, r.Workload.Workers)
			}
			if r.Throughput > 0 {
				txy = append(txy, plotter.XY{X: x, Y: r.Throughput})
			}
			if r.Latency.P99 > 0 {
				lxy = append(lxy, plotter.XY{X: x, Y: ms(r.Latency.P99)})
			}
		}
		var thumbs []plot.Thumbnailer
		for _, pp := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{thr, txy}, {lat, lxy}} {
			if len(pp.xys) == 0 {
				continue
			}
			line, points, err := plotterLinePoints(pp.xys)
			if err != nil {
				return err
			}
			line.LineStyle, points.GlyphStyle = style, glyph
			pp.p.Add(line, points)
			thumbs = []plot.Thumbnailer{line, points}
		}
		if thumbs != nil {
			legend.Add(s.label, thumbs...)
		}
	}
	slices.Sort(workers)
	for _, p := range []*plot.Plot{thr, lat} {
		p.X.Label.Text = "workers"
		setWorkerAxis(p, workers)
		setValueAxis(p)
	}

	var canvas vg.CanvasWriterTo
	switch format {
	case SVG:
		canvas = vgsvg.New(chartW, chartH)
	case PNG:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartW, chartH), vgimg.UseDPI(pngDPI))}
	default:
		return fmt.Errorf("bench: chart format %q: want svg or png", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	title := "stockguard — " + desc
	ts := thr.Title.TextStyle
	ts.Font.Size = vg.Points(15)
	ts.XAlign, ts.YAlign = draw.XLeft, draw.YTop
	dc.FillText(ts, vg.Point{X: dc.Min.X + vg.Points(10), Y: dc.Max.Y - vg.Points(8)}, title)
	titleH := ts.Height(title) + vg.Points(20)

	panels := draw.Crop(dc, 0, -legendW, 0, -titleH)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(30), PadLeft: vg.Points(10), PadBottom: vg.Points(10)}
	thr.Draw(tiles.At(panels, 0, 0))
	lat.Draw(tiles.At(panels, 1, 0))
	legend.Draw(draw.Crop(dc, chartW-legendW+vg.Points(20), -vg.Points(10), 0, -titleH-vg.Points(30)))
	note := legend.TextStyle
	note.Font.Size = vg.Points(10)
	for i, line := range []string{"● MySQL   ■ Redis", "dashed: known-broken counterexample"} {
		dc.FillText(note, vg.Point{X: chartW - legendW + vg.Points(20), Y: vg.Points(36 - 14*float64(i))}, line)
	}

	_, err := canvas.WriteTo(w)
	return err
}

// glyphFor tells the backends apart: circles for MySQL, squares for Redis,
// triangles for anything else (all filled).
func glyphFor(n Need) draw.GlyphDrawer {
	switch n {
	case NeedMySQL:
		return draw.CircleGlyph{}
	case NeedRedis:
		return draw.BoxGlyph{}
	}
	return draw.TriangleGlyph{}
}

func plotterLinePoints(xys plotter.XYs) (*plotter.Line, *plotter.Scatter, error) {
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, nil, err
	}
	points, err := plotter.NewScatter(xys)
	return line, points, err
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
func setValueAxis(p *plot.Plot) {
	if math.IsInf(p.Y.Min, 0) || math.IsInf(p.Y.Max, 0) { // no data
		p.Y.Min, p.Y.Max = 0, 1
		return
	}
	if p.Y.Max/p.Y.Min > 20 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = niceLogTicks{}
		p.Y.Min, p.Y.Max = p.Y.Min/1.5, p.Y.Max*1.5
		return
	}
	p.Y.Min = 0
	p.Y.Max *= 1.1
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
