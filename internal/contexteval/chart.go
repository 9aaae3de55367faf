package contexteval

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"

	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/internal/plot"
)

var riskColors = map[evalcase.Risk]color.RGBA{
	evalcase.RiskLow:    {46, 139, 87, 255},
	evalcase.RiskMedium: {230, 140, 20, 255},
	evalcase.RiskHigh:   {200, 30, 45, 255},
	"":                  {60, 60, 60, 255},
}

// WriteChart draws the frontier as a PNG: accuracy against coverage, one
// line per risk class (and one, dashed, over all cases) through its levels
// from retrieval to the gate; the points of the line over all cases are
// named after their level.
// A level at which nothing commits has no accuracy and no point.
func (r Report) WriteChart(w io.Writer) error {
	const width, height = 720, 470
	left, right, top, bottom := 70, width-190, 40, height-60
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	title := "Evidence gate: accuracy against coverage, by action risk"
	plot.Text(img, (width-plot.CharWidth*len(title))/2, 22, title, plot.Black)
	lx := func(f float64) int { return left + int(f*float64(right-left)+0.5) }
	ly := func(f float64) int { return bottom - int(f*float64(bottom-top)+0.5) }
	for i := 0; i <= 10; i += 2 {
		f := float64(i) / 10
		plot.Line(img, left, ly(f), right, ly(f), plot.Grey, false)
		plot.Line(img, lx(f), top, lx(f), bottom, plot.Grey, false)
		lbl := fmt.Sprintf("%d%%", i*10)
		plot.Text(img, left-8-plot.CharWidth*len(lbl), ly(f)+4, lbl, plot.Black)
		plot.Text(img, lx(f)-plot.CharWidth*len(lbl)/2, bottom+16, lbl, plot.Black)
	}
	plot.Text(img, (left+right)/2-plot.CharWidth*len("coverage")/2, bottom+34, "coverage", plot.Black)
	plot.Text(img, 8, top-10, "accuracy", plot.Black)
	plot.Line(img, left, bottom, right, bottom, plot.Black, false)
	plot.Line(img, left, top, left, bottom, plot.Black, false)

	type label struct {
		x, y int
		s    string
	}
	var labels []label
	legendY := top + 10
	for _, risk := range append(append([]evalcase.Risk{}, evalcase.Risks...), "") {
		c := riskColors[risk]
		dashed := risk == ""
		var xs, ys []int
		var marks []string
		for _, row := range r.Frontier {
			if row.Risk != risk || row.Accuracy() < 0 {
				continue
			}
			xs = append(xs, lx(row.Coverage()))
			ys = append(ys, ly(row.Accuracy()))
			marks = append(marks, string(row.Level))
		}
		if len(xs) == 0 {
			continue
		}
		for j := 1; j < len(xs); j++ {
			plot.Thick(img, xs[j-1], ys[j-1], xs[j], ys[j], c, dashed)
		}
		for j := range xs {
			plot.Dot(img, xs[j], ys[j], c)
			if risk == "" {
				// Below and left of the point: the frontier falls to the right.
				labels = append(labels, label{xs[j] - 8 - plot.CharWidth*len(marks[j]), ys[j] + 16, marks[j]})
			}
		}
		name := string(risk) + " risk"
		if risk == "" {
			name = "all cases"
		}
		plot.Thick(img, right+20, legendY-4, right+50, legendY-4, c, dashed)
		plot.Text(img, right+58, legendY, name, plot.Black)
		legendY += 18
	}
	for _, l := range labels {
		plot.Text(img, l.x, l.y, l.s, plot.Black)
	}
	return png.Encode(w, img)
}
