package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotFormat returns "png" or "svg" from the file name, or a usageError.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", usagef("-plot %q: want a .png or .svg file name, got extension %q", path, ext)
	}
}

// spread is the median time per step of each configuration with its min and max as
// error bars.
type spread struct{ med, lo, hi []float64 }

func (s spread) Len() int                        { return len(s.med) }
func (s spread) XY(i int) (float64, float64)     { return float64(i), s.med[i] }
func (s spread) YError(i int) (float64, float64) { return s.med[i] - s.lo[i], s.hi[i] - s.med[i] }

// writePlot draws time per step (median bars, min–max whiskers) and memory (what is
// held between steps and what a step adds, stacked to the peak) side by side, one bar
// per configuration.
func writePlot(path string, r *report) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	n := len(r.Results)
	names := make([]string, n)
	var sp spread
	held, act := make(plotter.Values, n), make(plotter.Values, n)
	var top float64
	for i, s := range r.Results {
		names[i] = s.label
		sp.med, sp.lo, sp.hi = append(sp.med, s.MedianMS), append(sp.lo, s.MinMS), append(sp.hi, s.MaxMS)
		const m = 1 << 20
		held[i] = float64(s.ParamOptimMemory) / m
		act[i] = float64(s.ActivationMemory) / m
		top = max(top, float64(s.PeakMemory)/m)
	}
	width := vg.Points(min(60, 300/float64(max(n, 1))))
	title := fmt.Sprintf("%s, batch %d, %s", r.Model, r.Batch, r.Device)

	pt := plot.New()
	pt.Title.Text = "time per step — " + title
	pt.Y.Label.Text = "ms (median; whiskers: min–max)"
	pt.Y.Min = 0
	bars, err := plotter.NewBarChart(plotter.Values(sp.med), width)
	if err != nil {
		return err
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	whiskers, err := plotter.NewYErrorBars(sp)
	if err != nil {
		return err
	}
	pt.Add(bars, whiskers)
	pt.NominalX(names...)

	pm := plot.New()
	pm.Title.Text = "memory — " + title
	pm.Y.Label.Text = "MiB (stack top: peak)"
	pm.Legend.Top = true
	pm.Legend.Left = true
	pm.Y.Min, pm.Y.Max = 0, top*1.3 // room for the legend above the bars
	var prev *plotter.BarChart
	for i, part := range []struct {
		name string
		v    plotter.Values
	}{{"params + optimizer (held between steps)", held}, {"added during a step (activations, grads, temporaries)", act}} {
		b, err := plotter.NewBarChart(part.v, width)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i + 1)
		b.LineStyle.Width = 0
		if prev != nil {
			b.StackOn(prev)
		}
		prev = b
		pm.Add(b)
		pm.Legend.Add(part.name, b)
	}
	pm.NominalX(names...)

	w, h := 11*vg.Inch, 4.5*vg.Inch
	var c vg.CanvasWriterTo
	if format == "png" {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(120))}
	} else {
		c = vgsvg.New(w, h)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	plots := [][]*plot.Plot{{pt, pm}}
	canvases := plot.Align(plots, tiles, dc)
	pt.Draw(canvases[0][0])
	pm.Draw(canvases[0][1])

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("-plot: writing %s: %w", path, err)
	}
	return f.Close()
}
