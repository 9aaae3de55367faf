package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"github.com/contextos/ledger/internal/plot"
)

// Series is one line of a chart: y against concurrency.
type Series struct {
	Name   string
	Color  color.RGBA
	Dashed bool
	X      []int
	Y      []float64
}

// Panel is one chart.
type Panel struct {
	Title  string
	YLabel string
	Series []Series
}

// WriteChart draws the panels side by side (x: concurrency on a log2 axis)
// as a PNG, tall enough for the longest legend.
func WriteChart(w io.Writer, panels []Panel) error {
	const pw, plot = 560, 290
	n := 0
	for _, p := range panels {
		n = max(n, len(p.Series))
	}
	ph := plot + legendHeight(n)
	img := image.NewRGBA(image.Rect(0, 0, pw*len(panels), ph))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	for i, p := range panels {
		drawPanel(img, image.Rect(i*pw, 0, (i+1)*pw, ph), p)
	}
	return png.Encode(w, img)
}

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	left, right, top, bottom := r.Min.X+70, r.Max.X-20, r.Min.Y+40, r.Max.Y-legendHeight(len(p.Series))
	plot.Text(img, r.Min.X+(r.Dx()-7*len(p.Title))/2, r.Min.Y+20, p.Title, plot.Black)
	plot.Text(img, r.Min.X+8, top-10, p.YLabel, plot.Black)
	xs := map[int]bool{}
	ymax := 0.0
	for _, s := range p.Series {
		for k, x := range s.X {
			xs[x] = true
			ymax = math.Max(ymax, s.Y[k])
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	step := plot.NiceStep(ymax / 5)
	ymax = math.Ceil(ymax/step) * step
	xmax := 1
	for x := range xs {
		xmax = max(xmax, x)
	}
	lx := func(x int) int {
		if xmax == 1 {
			return left
		}
		return left + int(math.Log2(float64(x))/math.Log2(float64(xmax))*float64(right-left))
	}
	ly := func(y float64) int { return bottom - int(y/ymax*float64(bottom-top)) }
	for y := 0.0; y <= ymax+step/2; y += step {
		plot.Line(img, left, ly(y), right, ly(y), plot.Grey, false)
		lbl := plot.FmtNum(y)
		plot.Text(img, left-8-7*len(lbl), ly(y)+4, lbl, plot.Black)
	}
	for x := range xs {
		plot.Line(img, lx(x), top, lx(x), bottom, plot.Grey, false)
		lbl := fmt.Sprint(x)
		plot.Text(img, lx(x)-7*len(lbl)/2, bottom+16, lbl, plot.Black)
	}
	plot.Text(img, (left+right)/2-70, bottom+32, "concurrent clients", plot.Black)
	plot.Line(img, left, bottom, right, bottom, plot.Black, false)
	plot.Line(img, left, top, left, bottom, plot.Black, false)
	for k, s := range p.Series {
		for j := 1; j < len(s.X); j++ {
			plot.Thick(img, lx(s.X[j-1]), ly(s.Y[j-1]), lx(s.X[j]), ly(s.Y[j]), s.Color, s.Dashed)
		}
		for j := range s.X {
			plot.Dot(img, lx(s.X[j]), ly(s.Y[j]), s.Color)
		}
		ly := bottom + 50 + 14*k
		plot.Thick(img, left, ly-4, left+30, ly-4, s.Color, s.Dashed)
		plot.Text(img, left+38, ly, s.Name, plot.Black)
	}
}

// legendHeight is the room under a plot for its axis labels and a legend of
// n series, one line each.
func legendHeight(n int) int { return 50 + 14*n + 10 }
