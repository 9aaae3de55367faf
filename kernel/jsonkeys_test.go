package kernel

import (
	"encoding/json"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	cases := map[string]string{
		`{"a":1,"b":2}`:                         "",
		`{"a":1,"a":2}`:                         "a",
		`{"a":{"b":1,"b":2}}`:                   "b",
		`{"a":[{"x":1},{"x":2}],"b":{"x":3}}`:   "",
		`{"a":[{"x":1,"y":[1,{"x":2}]}],"a":1}`: "a",
		`{"a":{},"b":[],"c":{"a":{}}}`:          "",
		`{"order_id":"ord_2","amount_minor":100000,"order_id":"ord_1"}`: "order_id",
		`[{"k":1},{"k":1,"k":2}]`: "k",
		`{"":1,"":2}`:             "",
	}
	for doc, want := range cases {
		got, dup, err := DuplicateKey([]byte(doc))
		if err != nil || got != want || dup != (want != "" || doc == `{"":1,"":2}`) {
			t.Errorf("DuplicateKey(%s) = %q, %v; want %q", doc, got, err, want)
		}
	}
}

type reqInner struct {
	Ref string `json:"ref"`
}

type reqBase struct {
	Shared string `json:"shared"`
	Hidden string `json:"name"`
}

type reqDoc struct {
	reqBase
	Name  string              `json:"name"`
	Inner reqInner            `json:"inner"`
	List  []reqInner          `json:"list"`
	ByKey map[string]reqInner `json:"by_key"`
	Ptr   *reqInner           `json:"ptr,omitempty"`
	Args  json.RawMessage     `json:"args"`
	Any   any                 `json:"any"`
	Skip  string              `json:"-"`
	Plain string
}

// TestDecodeRequest: member names bind only when spelled exactly, at every
// level that binds a struct; inside raw arguments, interfaces and map keys
// the names are free; duplicates, unknown members, trailing data, invalid
// UTF-8 and non-objects are refused.
func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		name, doc string
		ok        bool
	}{
		{"exact", `{"name":"n","shared":"s","inner":{"ref":"r"},"list":[{"ref":"a"}],"by_key":{"Any Key":{"ref":"b"}},"ptr":{"ref":"p"},"Plain":"x"}`, true},
		{"free keys inside raw arguments and interfaces", `{"args":{"Order_ID":1,"x":{"Y":2}},"any":{"Q":1}}`, true},
		{"null and empty", `{"inner":null,"list":null,"ptr":null}`, true},
		{"top-level case variant", `{"Name":"n"}`, false},
		{"long s variant", "{\"\u017fhared\":\"s\"}", false},
		{"nested case variant", `{"inner":{"Ref":"r"}}`, false},
		{"case variant in a list", `{"list":[{"ref":"a"},{"REF":"b"}]}`, false},
		{"case variant in map values", `{"by_key":{"k":{"rEf":"b"}}}`, false},
		{"case variant behind a pointer", `{"ptr":{"Ref":"p"}}`, false},
		{"untagged field by another case", `{"plain":"x"}`, false},
		{"ignored field", `{"Skip":"x"}`, false},
		{"unknown member", `{"other":1}`, false},
		{"duplicate", `{"name":"a","name":"b"}`, false},
		{"duplicate inside arguments", `{"args":{"a":1,"a":2}}`, false},
		{"trailing data", `{"name":"a"} {}`, false},
		{"array", `[{"name":"a"}]`, false},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", false},
		{"empty", ``, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d reqDoc
			err := DecodeRequest([]byte(c.doc), &d)
			if (err == nil) != c.ok {
				t.Fatalf("DecodeRequest(%s) = %v, want ok %v", c.doc, err, c.ok)
			}
		})
	}
	var d reqDoc
	if err := DecodeRequest([]byte(`{"name":"outer","shared":"s"}`), &d); err != nil || d.Name != "outer" || d.Shared != "s" || d.Hidden != "" {
		t.Fatalf("promotion: %+v %v", d, err)
	}
}

// FuzzDecodeRequest: whatever DecodeRequest accepts names only the exact
// member names of the struct at its top level, and decodes the same with
// encoding/json.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"name":"n","inner":{"ref":"r"}}`, `{"Name":"n"}`, `{"args":{"A":1}}`, `{"list":[{"ref":"a"}]}`} {
		f.Add([]byte(s))
	}
	allowed := map[string]bool{"name": true, "shared": true, "inner": true, "list": true, "by_key": true, "ptr": true, "args": true, "any": true, "Plain": true}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d reqDoc
		if DecodeRequest(b, &d) != nil {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("accepted what encoding/json cannot read: %v", err)
		}
		for k := range top {
			if !allowed[k] {
				t.Fatalf("accepted member %q", k)
			}
		}
	})
}
