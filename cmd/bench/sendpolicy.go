package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/internal/bench"
)

// gSendPolicy is the group commit's send policies measured side by side.
const gSendPolicy = "Group commit: the adaptive send policy and fixed ones, same run"

// sendPolicies are the engine's send policies the table compares: the
// adaptive one, as configured by default, first, then each fixed
// alternative to one of its adaptive parts.
var sendPolicies = []struct {
	name    string
	linger  time.Duration
	appends aggregates.AppendMode
}{
	{"adaptive", 0, aggregates.AppendMeasured},
	{"always batches", 0, aggregates.AppendBatches},
	{"always singles", 0, aggregates.AppendSingles},
	{"no linger", -1, aggregates.AppendMeasured},
}

// sendPolicyCell, sendPolicyRounds and sendPolicyWarmup shape the table:
// each policy measures sendPolicyCell at each concurrency, in
// sendPolicyRounds slices taking turns with the other policies
// (bench.InterleaveAll), each after sendPolicyWarmup unmeasured. Many short
// slices spread the machine's drift over every policy; an engine keeps its
// cost averages from one slice to the next, so a short warm-up suffices.
const (
	sendPolicyCell   = 2500 * time.Millisecond
	sendPolicyRounds = 8
	sendPolicyWarmup = 150 * time.Millisecond
)

// sendPolicyResources is the size of each policy's resource set: small
// enough to fill in a second, large enough that 64 clients rarely meet on
// one resource.
const sendPolicyResources = 1000

// sendPolicy measures reservations over sendPolicyResources resources at
// 1, 8 and 64 clients through one engine per send policy, all on n, the
// policies taking turns (each on its own resources, each reserved once
// first, so that no engine's warm state goes stale under another's appends
// and no point pays cold loads).
func sendPolicy(ctx context.Context, r *report, n *bench.NATS, d string, progress bench.Progress) {
	engs := make([]*aggregates.Engine, len(sendPolicies))
	for k, p := range sendPolicies {
		engs[k] = n.Engine()
		engs[k].Linger, engs[k].Appends = p.linger, p.appends
		progress("  %s: one reservation on each resource first, %s", gSendPolicy, p.name)
		every := func(w, i int) string { return fmt.Sprintf("ord-sp%d-%s-%d", k, d, i) }
		if err := bench.Fill(ctx, 64, sendPolicyResources, bench.Reservations(engs[k], every)); err != nil {
			fail(err)
		}
	}
	// One unmeasured pass first: the slice right after the fills would
	// otherwise pay for the server settling them, and it is always the
	// adaptive policy's.
	settle := make([]bench.Leg, len(sendPolicies))
	for k, p := range sendPolicies {
		settle[k] = bench.Leg{Point: bench.Point{Name: p.name, Concurrency: 8}, Op: bench.Reservations(engs[k], func(w, i int) string { return fmt.Sprintf("ord-sp%d-%s-%d", k, d, rand.IntN(sendPolicyResources)) })}
	}
	bench.InterleaveAll(ctx, bench.Config{Warmup: sendPolicyWarmup, Duration: 2 * sendPolicyWarmup}, 1, settle, nil)
	for _, c := range []int{1, 8, 64} {
		legs := make([]bench.Leg, len(sendPolicies))
		before := make([]aggregates.EngineStats, len(engs))
		for k, p := range sendPolicies {
			legs[k] = bench.Leg{Point: bench.Point{Group: gSendPolicy, Name: p.name, Durability: d, Concurrency: c, Unit: "reservation"},
				Op: bench.Reservations(engs[k], func(w, i int) string { return fmt.Sprintf("ord-sp%d-%s-%d", k, d, rand.IntN(sendPolicyResources)) })}
			before[k] = engs[k].Stats()
		}
		pts := bench.InterleaveAll(ctx, bench.Config{Warmup: sendPolicyWarmup, Duration: sendPolicyCell}, sendPolicyRounds, legs, progress)
		for k, p := range pts {
			after := engs[k].Stats()
			if b := after.Batches - before[k].Batches; b > 0 {
				p.Note = fmt.Sprintf("%.1f tx/append", float64(after.BatchedTxs-before[k].BatchedTxs)/float64(b))
				if g := after.SingleGroups - before[k].SingleGroups; g > 0 {
					p.Note += fmt.Sprintf(", %d groups as single appends", g)
				}
			}
			r.add(p)
		}
	}
}

// sendPolicyTable is the send policies' table (reservations a second at
// each concurrency, and each fixed policy's ratio to the adaptive one), or
// "" when it was not measured.
func (r *report) sendPolicyTable() string {
	var b strings.Builder
	b.WriteString("| clients |")
	for _, p := range sendPolicies {
		fmt.Fprintf(&b, " %s /s |", p.name)
	}
	b.WriteString("\n| ---: |" + strings.Repeat(" ---: |", len(sendPolicies)) + "\n")
	rows := 0
	for _, c := range []int{1, 8, 64} {
		base, ok := r.find(gSendPolicy, sendPolicies[0].name, "durable", c)
		if !ok {
			continue
		}
		rows++
		fmt.Fprintf(&b, "| %d | %.0f |", c, base.Rate())
		for _, p := range sendPolicies[1:] {
			pt, _ := r.find(gSendPolicy, p.name, "durable", c)
			ratio := "-"
			if base.Rate() > 0 {
				ratio = fmt.Sprintf("%.2fx", pt.Rate()/base.Rate())
			}
			fmt.Fprintf(&b, " %.0f (%s) |", pt.Rate(), ratio)
		}
		b.WriteString("\n")
	}
	if rows == 0 {
		return ""
	}
	return b.String()
}

// sendPolicyCaption says what the send policies' table compares.
var sendPolicyCaption = fmt.Sprintf("Reservations over %d resources a policy (durable), through one engine per send policy on one server, the policies taking turns: %d rounds, in each of which each policy runs alone for %s unmeasured and then %s measured, the order rotated every round. *adaptive* is the engine as configured (aggregates.AppendMeasured, the default linger); *always batches* and *always singles* fix the way a group is appended (aggregates.AppendBatches, AppendSingles); *no linger* sends whatever is ready the moment an append returns (Linger -1). In parentheses: the rate over the adaptive one's.",
	sendPolicyResources, sendPolicyRounds, sendPolicyWarmup, sendPolicyCell/sendPolicyRounds)
