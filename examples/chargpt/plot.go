package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writePlot draws the training loss of every step and the validation loss at each
// evaluation against the step, with the unigram baseline as a dashed line. The PNG is
// small (about 40 KB) so it can live in the repository.
func writePlot(path string, s *summary, title string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("-plot %q: want a .png or .svg file name", path)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "optimizer step"
	p.Y.Label.Text = "loss (nats per character)"
	p.Legend.Top = true
	xy := func(pts []point) plotter.XYs {
		out := make(plotter.XYs, len(pts))
		for i, q := range pts {
			out[i].X, out[i].Y = float64(q.Step), q.Loss
		}
		return out
	}
	train, err := plotter.NewLine(xy(s.TrainCurve))
	if err != nil {
		return err
	}
	train.Color = color.RGBA{R: 90, G: 140, B: 220, A: 255}
	val, err := plotter.NewLine(xy(s.ValCurve))
	if err != nil {
		return err
	}
	val.Color = color.RGBA{R: 220, G: 80, B: 40, A: 255}
	val.Width = vg.Points(2)
	p.Add(train, val)
	p.Legend.Add("train (each step)", train)
	p.Legend.Add("validation", val)
	if len(s.TrainCurve) > 0 && s.UnigramLoss > 0 {
		first, last := s.TrainCurve[0].Step, s.TrainCurve[len(s.TrainCurve)-1].Step
		base, err := plotter.NewLine(plotter.XYs{{X: float64(first), Y: s.UnigramLoss}, {X: float64(last), Y: s.UnigramLoss}})
		if err != nil {
			return err
		}
		base.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		base.Color = color.Gray{Y: 100}
		p.Add(base)
		p.Legend.Add("unigram baseline", base)
	}
	w, h := 6*vg.Inch, 3.5*vg.Inch
	var c vg.CanvasWriterTo
	if ext == ".png" {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))}
	} else {
		c = vgsvg.New(w, h)
	}
	p.Draw(draw.New(c))
	// Write to a temporary file and rename, so a failed write leaves an old plot intact.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plot-*"+ext)
	if err != nil {
		return fmt.Errorf("-plot: %w", err)
	}
	if _, err := c.WriteTo(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("-plot: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("-plot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("-plot: %w", err)
	}
	return nil
}
