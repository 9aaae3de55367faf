package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/contextos/ledger/internal/testing/provider"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	portFile := flag.String("port-file", "", "write the chosen address here once listening")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Fatalf("demo-provider listens on loopback only, not %s", ip)
	}
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Fprintln(os.Stderr, "demo-provider listening on", ln.Addr())
	log.Fatal(http.Serve(ln, provider.New().Handler()))
}
