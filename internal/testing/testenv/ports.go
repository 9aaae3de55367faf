package testenv

import "net"

// FreePorts returns n distinct loopback ports that were free a moment ago.
// They are closed again before the caller binds them, so another process can
// take one in between: whoever starts a server on them must be ready to pick
// new ports when the server cannot listen.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
