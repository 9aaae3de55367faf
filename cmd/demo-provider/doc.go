// Command demo-provider runs the synthetic payment provider on loopback.
package main
