package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
)

// faultClass names and colours a fault window's class: network faults
// orange, process faults blue, leadership and membership changes green.
func faultClass(k nemesis.Kind) (string, color.NRGBA) {
	switch k {
	case nemesis.IsolateLeader, nemesis.SplitMajority, nemesis.OneWay, nemesis.Flapping, nemesis.DelayLinks, nemesis.ClientCut:
		return "network fault", color.NRGBA{R: 255, G: 160, B: 60, A: 70}
	case nemesis.Transfer, nemesis.RemoveAdd:
		return "leadership/membership", color.NRGBA{R: 80, G: 190, B: 80, A: 70}
	default:
		return "process fault", color.NRGBA{R: 80, G: 130, B: 255, A: 70}
	}
}

// Plot draws latency (top, log scale) and throughput (bottom) over time,
// with every fault window shaded and labelled.
func Plot(path, title string, ops []history.Op, windows []nemesis.Window) error {
	var okPts, infoPts plotter.XYs
	minLat, maxLat := math.Inf(1), 0.0
	var end float64
	for _, o := range ops {
		x := float64(o.Complete) / 1e9
		y := math.Max(float64(o.Latency())/1e6, 0.01) // ms
		end = math.Max(end, x)
		switch o.Type {
		case history.Ok:
			okPts = append(okPts, plotter.XY{X: x, Y: y})
		default:
			infoPts = append(infoPts, plotter.XY{X: x, Y: y})
		}
		minLat, maxLat = math.Min(minLat, y), math.Max(maxLat, y)
	}
	for _, w := range windows {
		end = math.Max(end, float64(w.End)/1e9)
	}
	if len(ops) == 0 {
		minLat, maxLat = 0.1, 1
	}

	lat := plot.New()
	lat.Title.Text = title + ": latency per operation (ms, log) — shaded: faults"
	lat.X.Label.Text = "time since start (s)"
	lat.Y.Label.Text = "latency (ms)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.X.Min, lat.X.Max = 0, end
	lat.Y.Min, lat.Y.Max = minLat*0.8, maxLat*1.25

	// Throughput per 250 ms bucket.
	const bucket = 0.25
	nb := int(end/bucket) + 1
	okN, infoN := make([]float64, nb), make([]float64, nb)
	for _, o := range ops {
		b := int(float64(o.Complete) / 1e9 / bucket)
		if b < 0 || b >= nb {
			continue
		}
		if o.Type == history.Ok {
			okN[b]++
		} else {
			infoN[b]++
		}
	}
	var okLine, infoLine plotter.XYs
	maxTP := 1.0
	for b := 0; b < nb; b++ {
		x := float64(b) * bucket
		okLine = append(okLine, plotter.XY{X: x, Y: okN[b] / bucket})
		infoLine = append(infoLine, plotter.XY{X: x, Y: infoN[b] / bucket})
		maxTP = math.Max(maxTP, math.Max(okN[b], infoN[b])/bucket)
	}
	tp := plot.New()
	tp.Title.Text = "throughput (ops/s, 250 ms buckets)"
	tp.X.Label.Text = "time since start (s)"
	tp.Y.Label.Text = "ops/s"
	tp.X.Min, tp.X.Max = 0, end
	tp.Y.Min, tp.Y.Max = 0, maxTP*1.15

	// Fault windows first, so the data is drawn over them.
	sorted := append([]nemesis.Window(nil), windows...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	legendDone := map[string]bool{}
	for _, w := range sorted {
		x0, x1 := float64(w.Start)/1e9, float64(w.End)/1e9
		if x1-x0 < 0.05 {
			x1 = x0 + 0.05 // point events stay visible
		}
		name, c := faultClass(w.Kind)
		for _, pl := range []struct {
			p      *plot.Plot
			y0, y1 float64
		}{{lat, lat.Y.Min, lat.Y.Max}, {tp, 0, tp.Y.Max}} {
			poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: pl.y0}, {X: x1, Y: pl.y0}, {X: x1, Y: pl.y1}, {X: x0, Y: pl.y1}})
			if err != nil {
				return err
			}
			poly.Color = c
			poly.LineStyle.Width = 0
			pl.p.Add(poly)
			if pl.p == tp && !legendDone[name] {
				legendDone[name] = true
				tp.Legend.Add(name, poly)
			}
		}
		label, err := plotter.NewLabels(plotter.XYLabels{
			XYs:    plotter.XYs{{X: x0, Y: lat.Y.Max / 1.1}},
			Labels: []string{fmt.Sprintf("%d:%s", w.Seq, w.Kind)},
		})
		if err == nil {
			for i := range label.TextStyle {
				label.TextStyle[i].Font.Size = vg.Points(7)
				label.TextStyle[i].Rotation = -math.Pi / 2
			}
			lat.Add(label)
		}
	}

	if len(okPts) > 0 {
		s, err := plotter.NewScatter(okPts)
		if err != nil {
			return err
		}
		s.GlyphStyle.Radius = vg.Points(0.8)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Color = color.NRGBA{R: 30, G: 30, B: 120, A: 160}
		lat.Add(s)
		lat.Legend.Add("ok", s)
	}
	if len(infoPts) > 0 {
		s, err := plotter.NewScatter(infoPts)
		if err != nil {
			return err
		}
		s.GlyphStyle.Radius = vg.Points(2)
		s.GlyphStyle.Shape = draw.CrossGlyph{}
		s.GlyphStyle.Color = color.NRGBA{R: 220, G: 20, B: 20, A: 255}
		lat.Add(s)
		lat.Legend.Add("info/fail", s)
	}
	lat.Legend.Top = true

	l1, err := plotter.NewLine(okLine)
	if err != nil {
		return err
	}
	l1.LineStyle.Color = color.NRGBA{R: 30, G: 30, B: 120, A: 255}
	l2, err := plotter.NewLine(infoLine)
	if err != nil {
		return err
	}
	l2.LineStyle.Color = color.NRGBA{R: 220, G: 20, B: 20, A: 255}
	tp.Add(l1, l2)
	tp.Legend.Add("ok", l1)
	tp.Legend.Add("info/fail", l2)
	tp.Legend.Top = true

	img := vgimg.New(vg.Points(1100), vg.Points(700))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{lat}, {tp}}, tiles, dc)
	lat.Draw(canvases[0][0])
	tp.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
