package kernel

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// scenarioRunner answers one command of a script; a fresh runner serves
// each file, so scripts share no state.
type scenarioRunner func(t *testing.T, d *datadriven.TestData) string

// scenarioDirs names, for each directory of scripts under testdata, the
// world its scripts run in:
//
//	story      the whole governed step (admission, approvals, run budgets,
//	           reservation, dispatch, settlement, reconciliation, release,
//	           the kill switch, fencing) as a runtime runs it (ProposeStep,
//	           SettleStep, ReleaseStep over what their reads name), with the
//	           real action digest
//	ledger     one guarantee's pin and ledger: reservations, imports,
//	           transitions
//	ceilings   long-lived ledgers and several ceilings on one call
//	domain     the enforcement domain of one tenant (pins enrolled on the
//	           control subject, the configuration checked against them,
//	           proposals refused when they leave it) and replacements that
//	           carry exposure forward
//	fence      the same-action fence of effectful capabilities, in the
//	           world of the domain scripts
//	guardrails a tenant's control subject with guardrails and waivers, and
//	           proposals checked against it (CheckControl)
//	operators  operators with their scopes, the two-person rule, requests
//	           and confirmations
//	packs      a tenant's catalog of context pack versions: published,
//	           promoted through the release gate, rolled back, pinned
//	attempts   the steps on one reserved attempt, settle (SettleStep) and
//	           release (ReleaseStep), over its operation and the ledgers of
//	           its holds: every event appended, by subject, and the reply
var scenarioDirs = map[string]func() scenarioRunner{
	"story": func() scenarioRunner { return newWorld().run },
	"ledger": func() scenarioRunner {
		h := &scenario{def: demoDefinition()}
		return h.run
	},
	"ceilings": func() scenarioRunner {
		h := &ceilingScenario{ledgers: map[string]*Ledger{}, window: map[string]string{}, next: 1}
		return h.run
	},
	"domain": func() scenarioRunner { return newDomainWorld(false).run },
	"fence":  func() scenarioRunner { return newDomainWorld(true).run },
	"guardrails": func() scenarioRunner {
		g := &guardrailWorld{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
		return g.run
	},
	"operators": func() scenarioRunner {
		w := &operatorWorld{scopes: map[string][]Scope{}, requests: map[string]*OperatorRequest{},
			now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
		return w.run
	},
	"attempts": func() scenarioRunner { return newAttemptWorld().run },
	"packs": func() scenarioRunner {
		c := &PackCatalog{}
		return func(t *testing.T, d *datadriven.TestData) string { return packCommand(t, c, d) }
	},
}

// TestScenarios replays every script under testdata/<dir> for each
// directory of scenarioDirs; an output that differs from the script's
// expected output fails. Regenerate the expected output of one directory
// with:
//
//	go test ./kernel -run 'TestScenarios/guardrails' -rewrite
func TestScenarios(t *testing.T) {
	for dir, world := range scenarioDirs {
		t.Run(dir, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
			if len(files) == 0 {
				t.Fatalf("testdata/%s holds no scripts", dir)
			}
			datadriven.Walk(t, filepath.Join("testdata", dir), func(t *testing.T, path string) {
				datadriven.RunTest(t, path, world())
			})
		})
	}
}

// TestScenarioDirsComplete fails when a directory of scripts under testdata
// has no world in scenarioDirs, so no script is silently skipped.
func TestScenarioDirsComplete(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		scripts, _ := filepath.Glob(filepath.Join("testdata", e.Name(), "*.txt"))
		if _, ok := scenarioDirs[e.Name()]; len(scripts) > 0 && !ok {
			t.Errorf("testdata/%s holds %d script(s) that no scenario world runs", e.Name(), len(scripts))
		}
	}
}

// scenarioArg is the value of key=V (several values joined by commas) on
// the command, or def when the command does not name key.
func scenarioArg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return strings.Join(a.Vals, ",")
		}
	}
	return def
}

// scenarioNum is scenarioArg as an integer; a value that is not one fails
// the script.
func scenarioNum(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	n, err := strconv.ParseInt(scenarioArg(d, key, strconv.FormatInt(def, 10)), 10, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}
