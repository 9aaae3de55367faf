package plot

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Common colours.
var (
	Black = color.RGBA{0, 0, 0, 255}
	Grey  = color.RGBA{220, 220, 220, 255}
)

// CharWidth is the advance of one character of the face Text draws.
const CharWidth = 7

// Text draws s with its baseline at (x, y).
func Text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// Line draws a one-pixel line, dashed in runs of six pixels when asked.
func Line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
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

// Thick draws a three-pixel line.
func Thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	for o := -1; o <= 1; o++ {
		Line(img, x0, y0+o, x1, y1+o, c, dashed)
	}
}

// Dot draws a filled disc of radius 3.
func Dot(img *image.RGBA, x, y int, c color.RGBA) {
	for i := -3; i <= 3; i++ {
		for j := -3; j <= 3; j++ {
			if i*i+j*j <= 9 {
				img.SetRGBA(x+i, y+j, c)
			}
		}
	}
}

// NiceStep returns the smallest of 1, 2, 2.5, 5 times a power of ten that
// is at least x: a readable axis step.
func NiceStep(x float64) float64 {
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

// FmtNum formats an axis value, with k and M for thousands and millions.
func FmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
