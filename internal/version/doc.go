// Package version says which build of the ledger is running: the release
// version `make release` stamps into the binaries, or else what the Go build
// info knows (the module version and the VCS revision), and the toolchain.
//
//	fmt.Println(version.String("contextosd"))
//	// contextosd v0.3.0 (rev 854188d, go1.27.3, linux/amd64)
package version
