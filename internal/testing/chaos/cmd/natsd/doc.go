// Command natsd runs one nats-server with JetStream (file storage, fsync
// before every acknowledgement) on loopback for the chaos harness: the users
// and permissions are the gateway's (gateway.ServerUsers of the contextosd
// configuration) plus the runtime user with the given password. With
// -cluster-port and -routes it joins a JetStream cluster.
//
//	natsd -config contextos.toml -runtime-password PW -port 4222 -store DIR \
//	      [-name n1 -cluster-port 6222 -routes nats://127.0.0.1:6222,nats://127.0.0.1:6223]
package main
