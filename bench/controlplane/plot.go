package controlplane

import (
	"fmt"
	"image/color"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// systemColors tell registrar from the EndpointSlice controller in the plot.
var systemColors = map[string]color.Color{
	SystemRegistrar:     color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	SystemEndpointSlice: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// WritePlot draws the sweep's growth curves into a PNG at path: CPU seconds per 1,000
// transitions and peak RSS against pods, registrar and the EndpointSlice controller; the
// median of the runs of each size, with error bars from their min to their max when a size
// has several runs.
func (p *Publication) WritePlot(path string) error {
	sizes := groupBySize(p.Runs)
	if len(sizes) == 0 {
		return fmt.Errorf("plot: no runs")
	}
	cpu, err := curvePlot(sizes, "CPU per 1,000 transitions", "CPU seconds", func(s sizeRuns, sys string) Spread { return s.cpu(sys) })
	if err != nil {
		return err
	}
	rss, err := curvePlot(sizes, "Peak RSS", "MiB", func(s sizeRuns, sys string) Spread { return s.rss(sys) })
	if err != nil {
		return err
	}
	const w, h = 11 * vg.Inch, 4 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, 0.3*vg.Inch, 0) // room for the caption
	pad := vg.Inch / 8
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 3, PadY: pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad}
	plots := [][]*plot.Plot{{cpu, rss}}
	canvases := plot.Align(plots, tiles, top)
	cpu.Draw(canvases[0][0])
	rss.Draw(canvases[0][1])
	// The conditions under the plots: a loaded machine's figures are not quiet ones.
	commit, dirty := strings.CutSuffix(p.Commit, "-dirty")
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if dirty {
		commit += "-dirty"
	}
	runs := make([]string, 0, len(sizes))
	for _, s := range sizes {
		runs = append(runs, fmt.Sprint(len(s.runs)))
	}
	caption := fmt.Sprintf("%s, commit %s, shared %d-core machine, 1-min load %.1f before, %.1f after; offered %.0f transitions/s; "+
		"median of %s run(s) per size, bars min–max",
		p.Date, commit, p.Machine.Cores, p.Machine.LoadBefore[0], p.Machine.LoadAfter[0], p.Runs[0].OfferedRate, strings.Join(runs, "/"))
	font := plot.DefaultFont
	font.Size = vg.Points(9)
	style := draw.TextStyle{Color: color.Black, Font: font, Handler: plot.DefaultTextHandler}
	dc.FillText(style, vg.Point{X: vg.Inch / 4, Y: vg.Inch / 8}, caption)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

// errorPoints are medians with their min–max spread, for plotter.NewYErrorBars.
type errorPoints struct {
	plotter.XYs
	plotter.YErrors
}

func curvePlot(sizes []sizeRuns, title, unit string, get func(sizeRuns, string) Spread) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = "pods (registries = pods / 10)"
	pl.Y.Label.Text = unit
	pl.Y.Min = 0
	pl.Legend.Top = true
	pl.Legend.Left = true
	ticks := make([]plot.Tick, 0, len(sizes))
	for _, s := range sizes {
		ticks = append(ticks, plot.Tick{Value: float64(s.pods), Label: fmt.Sprint(s.pods)})
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	maxY := 0.0
	for _, sys := range []string{SystemRegistrar, SystemEndpointSlice} {
		xs, spreads := sweepPoints(sizes, func(s sizeRuns) Spread { return get(s, sys) })
		if len(xs) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(xs))
		errs := make(plotter.YErrors, len(xs))
		withSpread := false
		for i := range xs {
			sp := spreads[i]
			pts[i].X, pts[i].Y = xs[i], sp.Median
			errs[i].Low, errs[i].High = sp.Median-sp.Min, sp.Max-sp.Median
			withSpread = withSpread || sp.N > 1
			maxY = max(maxY, sp.Max)
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		line.Color, points.Color = systemColors[sys], systemColors[sys]
		line.Width = vg.Points(2)
		points.Shape = draw.CircleGlyph{}
		pl.Add(line, points)
		pl.Legend.Add(sys, line, points)
		if withSpread {
			// The spread over the runs of each size: min to max around the median.
			bars, err := plotter.NewYErrorBars(errorPoints{pts, errs})
			if err != nil {
				return nil, fmt.Errorf("plot %s spread: %w", title, err)
			}
			bars.Color = systemColors[sys]
			bars.Width = vg.Points(1.5)
			bars.CapWidth = vg.Points(8)
			pl.Add(bars)
		}
	}
	pl.Y.Max = maxY * 1.2
	pl.Add(plotter.NewGrid())
	return pl, nil
}
