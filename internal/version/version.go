package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release version, set at link time by `make release`:
//
//	-ldflags "-X github.com/contextos/ledger/internal/version.Version=v0.3.0"
//
// Empty in a plain `go build`, where Get falls back on the build info.
var Version string

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version, the module version of a `go install
	// module@version`, or "devel".
	Version string `json:"version"`
	// Revision is the VCS revision (abbreviated to 12 digits), with
	// "-dirty" when the tree had changes; empty when the build did not
	// record it.
	Revision string `json:"revision,omitempty"`
	// Go is the toolchain the binary was built with.
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get reads the build's version from Version and runtime/debug.ReadBuildInfo.
func Get() Info {
	in := Info{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if in.Version == "" {
			in.Version = "devel"
		}
		return in
	}
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(in.Revision) > 12 {
		in.Revision = in.Revision[:12]
	}
	if in.Revision != "" && dirty {
		in.Revision += "-dirty"
	}
	return in
}

// String is the one line `--version` prints for the named program.
func String(program string) string {
	in := Get()
	var b strings.Builder
	b.WriteString(program + " " + in.Version + " (")
	if in.Revision != "" {
		b.WriteString("rev " + in.Revision + ", ")
	}
	b.WriteString(in.Go + ", " + in.Platform + ")")
	return b.String()
}
