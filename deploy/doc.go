// Package deploy holds the deployment files (the Dockerfile, the compose
// cluster, the Kubernetes manifests, the systemd unit); its tests check that
// each parses, that the configurations in them are ones contextosd accepts,
// and that the Dockerfile's build makes a static binary. Nothing here runs
// docker or kubectl.
package deploy
