package gateway

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRules: deploy/prometheus/alerts.yml is a well-formed rules file
// (every rule an alert with an expression, a severity and a summary) whose
// expressions name only metrics the runtime exports.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	exported := exportedMetrics(t)
	name := regexp.MustCompile(`contextos_[a-z_]+`)
	seen := map[string]bool{}
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Expr == "" || r.For == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v lacks alert, expr, for, severity or summary", r)
			}
			if seen[r.Alert] {
				t.Errorf("alert %s twice", r.Alert)
			}
			seen[r.Alert] = true
			for _, m := range name.FindAllString(r.Expr, -1) {
				if !exported[m] {
					t.Errorf("alert %s uses %s, which the runtime does not export", r.Alert, m)
				}
			}
		}
	}
	for _, want := range []string{"ContextOSAuditLag", "ContextOSOpenHoldsOlderThanAnHour", "ContextOSProviderErrorRate", "ContextOSKillSwitchEngaged", "ContextOSAuthFailures", "ContextOSStoreSpaceExhausted"} {
		if !seen[want] {
			t.Errorf("no %s alert", want)
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}
}

// exportedMetrics reads the metric names the telemetry files declare.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("telemetry*.go")
	decl := regexp.MustCompile(`(?:Name: |NewDesc\()"(contextos_[a-z_]+)"`)
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d metric declarations", len(out))
	}
	return out
}
