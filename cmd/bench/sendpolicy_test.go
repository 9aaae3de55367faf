package main

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/internal/bench"
)

// TestSendPolicyTable: the send policies' table has a row a concurrency the
// adaptive policy was measured at, each fixed policy's rate with its ratio
// to the adaptive one's, and sits in the report under its caption, its
// points in no other table; no point, no table.
func TestSendPolicyTable(t *testing.T) {
	if got := (&report{}).sendPolicyTable(); got != "" {
		t.Fatalf("a table without points:\n%s", got)
	}
	var pts []bench.Point
	for c, ops := range map[int][4]int{1: {2000, 1800, 2200, 2000}, 64: {16000, 14000, 8000, 12000}} {
		for k, p := range sendPolicies {
			pts = append(pts, bench.Point{Group: gSendPolicy, Name: p.name, Durability: "durable", Concurrency: c, Ops: ops[k], Elapsed: 2 * time.Second, Unit: "reservation"})
		}
	}
	r := &report{points: pts}
	got := r.sendPolicyTable()
	want := "| clients | adaptive /s | always batches /s | always singles /s | no linger /s |\n" +
		"| ---: | ---: | ---: | ---: | ---: |\n" +
		"| 1 | 1000 | 900 (0.90x) | 1100 (1.10x) | 1000 (1.00x) |\n" +
		"| 64 | 8000 | 7000 (0.88x) | 4000 (0.50x) | 6000 (0.75x) |\n"
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	md, _ := r.markdown("chart.png")
	if !strings.Contains(string(md), "## "+gSendPolicy+"\n\n"+sendPolicyCaption+"\n\n"+got) {
		t.Errorf("the report does not hold the table under its caption:\n%s", md)
	}
	if strings.Contains(string(md), "| "+gSendPolicy+" |") {
		t.Errorf("the table's points are also rows of another table:\n%s", md)
	}
}
