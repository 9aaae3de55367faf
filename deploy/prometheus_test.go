package deploy

import (
	"log/slog"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestAlertRulesParseAsPrometheus loads prometheus/alerts.yml with
// Prometheus's own rule loader (the code behind rule_files and promtool
// check rules): the YAML layout, every PromQL expression and every
// annotation template, with Prometheus's template functions.
func TestAlertRulesParseAsPrometheus(t *testing.T) {
	groups, errs := rulefmt.ParseFile("prometheus/alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
		}
	}
	for _, want := range []string{"ContextOSAuditHistoryRewritten", "ContextOSAuditUnwitnessed", "ContextOSKillSwitchEngaged", "ContextOSStoreSpaceLow", "ContextOSStoreSpaceExhausted"} {
		if !alerts[want] {
			t.Errorf("no %s rule", want)
		}
	}
}
