package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/gateway"
	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	configFile := flag.String("config", "", "contextosd configuration whose tenants become users")
	password := flag.String("runtime-password", "", "password of the runtime user "+gateway.RuntimeUser)
	port := flag.Int("port", 4222, "client port on 127.0.0.1")
	store := flag.String("store", "", "JetStream store directory")
	name := flag.String("name", "natsd", "server name")
	clusterPort := flag.Int("cluster-port", 0, "cluster port on 127.0.0.1 (0: no cluster)")
	routes := flag.String("routes", "", "comma-separated cluster routes")
	flag.Parse()
	if *configFile == "" || *password == "" || *store == "" {
		fmt.Fprintln(os.Stderr, "natsd: -config, -runtime-password and -store are required")
		os.Exit(2)
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	so := &server.Options{
		ServerName: *name,
		Host:       "127.0.0.1",
		Port:       *port,
		JetStream:  true,
		StoreDir:   *store,
		SyncAlways: true,
		Users:      gateway.ServerUsers(cfg, *password),
		NoLog:      true,
	}
	if *clusterPort != 0 {
		so.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: *clusterPort}
		so.Routes = server.RoutesFromStr(*routes)
	}
	srv, err := server.NewServer(so)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		fmt.Fprintln(os.Stderr, "natsd: not ready")
		os.Exit(1)
	}
	fmt.Println("natsd ready", srv.ClientURL())
	srv.WaitForShutdown()
}
