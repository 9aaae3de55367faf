package gateway

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTelemetryHelpers(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{0, "lt_1m"}, {59 * time.Second, "lt_1m"}, {time.Minute, "1m_10m"}, {30 * time.Minute, "10m_1h"}, {2 * time.Hour, "1h_6h"},
		{12 * time.Hour, "6h_1d"}, {24 * time.Hour, "gt_1d"}, {-time.Second, "lt_1m"}} {
		if got := holdAge(c.d); got != c.want {
			t.Errorf("holdAge(%s) = %s, want %s", c.d, got, c.want)
		}
	}
	long := strings.Repeat("é", maxReasonBytes) // two bytes each
	if got := clip(long); len(got) > maxReasonBytes+3 || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("clip kept %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
}
