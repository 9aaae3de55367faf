package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// FreePorts returns n distinct loopback ports that were free a moment ago,
// for servers that must listen on ports known in advance (a cluster's
// routes) and listen there again after a restart.
//
// They are picked below the kernel's ephemeral range when it leaves room
// (10000 up to net.ipv4.ip_local_port_range's start): a port from that range
// (what a listener on port 0 gets) can meanwhile become the local port of
// any outgoing connection, and a server restarted on it then cannot bind;
// below it only an explicit bind takes a port. The ports are closed again
// before the caller binds them, so another process can still take one in
// between: whoever starts a server on them must be ready to pick new ones.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	low := ephemeralStart()
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if low-minPort >= 1000 && tries < 100*n {
			addr = fmt.Sprintf("127.0.0.1:%d", minPort+rand.IntN(low-minPort))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, err
			}
			continue // taken: try another
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

const minPort = 10000

// ephemeralStart is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var lo, hi int
	if err == nil {
		_, err = fmt.Sscan(string(b), &lo, &hi)
	}
	if err != nil || lo <= 0 {
		return 32768
	}
	return lo
}
