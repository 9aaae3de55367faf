package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
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

var (
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{220, 220, 220, 255}
)

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	left, right, top, bottom := r.Min.X+70, r.Max.X-20, r.Min.Y+40, r.Max.Y-legendHeight(len(p.Series))
	text(img, r.Min.X+(r.Dx()-7*len(p.Title))/2, r.Min.Y+20, p.Title, black)
	text(img, r.Min.X+8, top-10, p.YLabel, black)
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
	step := niceStep(ymax / 5)
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
		line(img, left, ly(y), right, ly(y), grey, false)
		lbl := fmtNum(y)
		text(img, left-8-7*len(lbl), ly(y)+4, lbl, black)
	}
	for x := range xs {
		line(img, lx(x), top, lx(x), bottom, grey, false)
		lbl := fmt.Sprint(x)
		text(img, lx(x)-7*len(lbl)/2, bottom+16, lbl, black)
	}
	text(img, (left+right)/2-70, bottom+32, "concurrent clients", black)
	line(img, left, bottom, right, bottom, black, false)
	line(img, left, top, left, bottom, black, false)
	for k, s := range p.Series {
		for j := 1; j < len(s.X); j++ {
			thick(img, lx(s.X[j-1]), ly(s.Y[j-1]), lx(s.X[j]), ly(s.Y[j]), s.Color, s.Dashed)
		}
		for j := range s.X {
			dot(img, lx(s.X[j]), ly(s.Y[j]), s.Color)
		}
		ly := bottom + 50 + 14*k
		thick(img, left, ly-4, left+30, ly-4, s.Color, s.Dashed)
		text(img, left+38, ly, s.Name, black)
	}
}

// legendHeight is the room under a plot for its axis labels and a legend of
// n series, one line each.
func legendHeight(n int) int { return 50 + 14*n + 10 }

func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	dx, dy := x1-x0, y1-y0
	n := max(abs(dx), abs(dy))
	for i := 0; i <= n; i++ {
		if dashed && (i/6)%2 == 1 {
			continue
		}
		x, y := x0, y0
		if n > 0 {
			x, y = x0+dx*i/n, y0+dy*i/n
		}
		img.SetRGBA(x, y, c)
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	for o := -1; o <= 1; o++ {
		line(img, x0, y0+o, x1, y1+o, c, dashed)
	}
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for i := -3; i <= 3; i++ {
		for j := -3; j <= 3; j++ {
			if i*i+j*j <= 9 {
				img.SetRGBA(x+i, y+j, c)
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
