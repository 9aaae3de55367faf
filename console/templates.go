package console

import (
	"html/template"
	"slices"
)

// pageFiles maps each page to its template file; every page is parsed with
// layout.html.
var pageFiles = map[string]string{
	"login":       "templates/login.html",
	"exposure":    "templates/exposure.html",
	"confirm":     "templates/confirm.html",
	"kill-switch": "templates/killswitch.html",
	"approvals":   "templates/approvals.html",
	"incidents":   "templates/incidents.html",
	"decisions":   "templates/decisions.html",
	"outcomes":    "templates/outcomes.html",
	"authority":   "templates/authority.html",
	"audit":       "templates/audit.html",
}

var funcs = template.FuncMap{
	"group": group,
	"query": exposureQuery,
	"has":   slices.Contains[[]string],
	"actionLabel": func(name string) string {
		if a := actions[name]; a != nil {
			return a.Label + "…"
		}
		return name
	},
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for name, file := range pageFiles {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", file)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}
