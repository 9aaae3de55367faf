package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/contextos/ledger/internal/casegen"
)

func main() {
	ramdocs := flag.String("ramdocs", "../shared/data/ramdocs/RAMDocs_test.jsonl", "RAMDocs JSON lines (MIT; see testdata/context-eval/README.md)")
	out := flag.String("out", "testdata/context-eval", "directory to write the cases into")
	flag.Parse()
	if err := run(*ramdocs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "ctxcases:", err)
		os.Exit(1)
	}
}

func run(ramdocs, out string) error {
	f, err := os.Open(ramdocs)
	if err != nil {
		return err
	}
	defer f.Close()
	cases, err := casegen.All(f)
	if err != nil {
		return err
	}
	if err := casegen.Write(out, cases); err != nil {
		return err
	}
	fmt.Printf("%d cases written to %s\n", len(cases), out)
	return nil
}
