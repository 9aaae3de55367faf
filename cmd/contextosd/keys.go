package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"os"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/daemon"
)

// runKeys is "contextosd keys rotate": hand the runtime's signing identity
// to a new key while the daemon is stopped.
func runKeys(args []string) int {
	if len(args) == 0 || args[0] != "rotate" {
		fmt.Fprintln(os.Stderr, "usage: contextosd keys rotate --config FILE [--new-key FILE] [--lost-key --operator NAME --artifact REF --old-keys keys.json]")
		return 2
	}
	fs := flag.NewFlagSet("contextosd keys rotate", flag.ContinueOnError)
	configFile := fs.String("config", "", "the TOML configuration file of the stopped runtime")
	newKey := fs.String("new-key", "", "the new key file (default: generate one)")
	lost := fs.Bool("lost-key", false, "the old key is lost: sign the rotation with the new key and an operator's assertion")
	operator := fs.String("operator", "", "with --lost-key: who asserts the old key is lost")
	artifact := fs.String("artifact", "", "with --lost-key: the ticket or record of that assertion")
	oldKeys := fs.String("old-keys", "", "with --lost-key: a keys.json holding the lost key's public half")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: contextosd keys rotate --config FILE [flags]

Records a new runtime signing key: one runtime.key_rotated event per tenant,
signed by the old key (or, with --lost-key, by the new key with the
operator's assertion), then writes the new key to runtime.key_file and keeps
the old one beside it as <key_file>.retired-<key id>. Stop every replica
first; give each the new key file before restarting them.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *configFile == "" || fs.NArg() > 0 || (*lost && (*operator == "" || *artifact == "")) {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd:", err)
		return 1
	}
	o := daemon.RotateOptions{NewKeyFile: *newKey, LostKey: *lost, Operator: *operator, ArtifactRef: *artifact}
	if *oldKeys != "" {
		b, err := os.ReadFile(*oldKeys)
		if err != nil {
			fmt.Fprintln(os.Stderr, "contextosd:", err)
			return 1
		}
		k, err := audit.ParseKeys(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, "contextosd:", err)
			return 1
		}
		// RotateKey takes the one whose id is the stream's signing key.
		sk, err := currentKey(cfg, k)
		if err != nil {
			fmt.Fprintln(os.Stderr, "contextosd:", err)
			return 1
		}
		o.OldPublicKey = sk
	}
	id, err := daemon.RotateKey(cfg, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contextosd: keys rotate:", err)
		return 1
	}
	path, _ := daemon.KeyPath(cfg)
	fmt.Printf("rotated: the runtime now signs with %s (%s)\n", id, path)
	return 0
}

// currentKey picks from an auditor's keys the public key the rotation
// retires: the one whose id the stream's events were last signed with.
func currentKey(cfg *config.Config, k audit.Keys) (ed25519.PublicKey, error) {
	ids, err := daemon.StreamSigningKey(cfg)
	if err != nil {
		return nil, err
	}
	pub, ok := k.Keyring[ids]
	if !ok {
		return nil, fmt.Errorf("the keys file does not hold the stream's signing key %s", ids)
	}
	return pub, nil
}
