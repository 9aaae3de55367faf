package kernel

import "testing"

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
	}
	for doc, want := range cases {
		got, err := DuplicateKey([]byte(doc))
		if err != nil || got != want {
			t.Errorf("DuplicateKey(%s) = %q, %v; want %q", doc, got, err, want)
		}
	}
}
