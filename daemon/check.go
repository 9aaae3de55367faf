package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/gateway"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStreamUnreachable is CheckConfig's error when the configured NATS
// deployment could not be reached or read: the configuration is valid as a
// file, and its enforcement domain was not checked.
var ErrStreamUnreachable = errors.New("the event stream could not be read")

// checkConnectTimeout bounds how long CheckConfig waits for NATS.
const checkConnectTimeout = 5 * time.Second

// CheckConfig checks a validated configuration against the event stream it
// would run on, writing nothing: the configuration must govern every
// capability it surfaces that a guarantee pinned in the stream governs, as
// Boot requires (gateway.CheckDomain; a *gateway.DomainError otherwise).
// With nats.url it connects as the runtime's user, and an unreachable or
// unreadable deployment is an error wrapping ErrStreamUnreachable. With the
// embedded server it reads data_dir's stream in process when no contextosd
// holds data_dir; one that does checks its stream itself at its next boot.
// The notes say what was and was not checked, and what Boot accepts but
// fails closed on.
func CheckConfig(ctx context.Context, cfg *config.Config) (notes []string, err error) {
	if cfg.NATS.URL == "" {
		return checkEmbedded(ctx, cfg)
	}
	user, err := runtimeUser(cfg)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name("contextosd-check-config"), nats.Timeout(checkConnectTimeout), nats.MaxReconnects(0)}, user...)
	nc, err := events.Connect(cfg.NATS.URL, append(opts, tlsOptions(cfg)...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: connect %s: %v", ErrStreamUnreachable, cfg.NATS.URL, err)
	}
	defer nc.Close()
	return checkStream(ctx, cfg, nc, "the stream at "+cfg.NATS.URL)
}

func checkEmbedded(ctx context.Context, cfg *config.Config) ([]string, error) {
	dir := cfg.NATS.DataDir
	if _, err := os.Stat(filepath.Join(dir, "nats")); errors.Is(err, os.ErrNotExist) {
		return []string{"data_dir " + dir + " holds no event stream yet: nothing is pinned"}, nil
	}
	lock, err := lockDataDir(dir)
	if errors.Is(err, ErrDataDirLocked) {
		return []string{fmt.Sprintf("not checked against the event stream: %v; that contextosd checks its configuration against the stream at each boot", err)}, nil
	}
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	sync := cfg.NATS.Sync != "relaxed"
	emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: dir, DontListen: true, SyncAlways: &sync})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamUnreachable, err)
	}
	defer emb.Shutdown()
	nc, err := emb.InProcessConn()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamUnreachable, err)
	}
	defer nc.Close()
	return checkStream(ctx, cfg, nc, "the embedded stream in "+dir)
}

func checkStream(ctx context.Context, cfg *config.Config, nc *nats.Conn, where string) ([]string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamUnreachable, err)
	}
	if _, err := js.Stream(ctx, events.StreamName); errors.Is(err, jetstream.ErrStreamNotFound) {
		return []string{where + " has no " + events.StreamName + " yet: nothing is pinned"}, nil
	} else if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStreamUnreachable, where, err)
	}
	warnings, err := gateway.CheckDomain(ctx, cfg, events.NewJetStore(js, events.StreamName))
	var de *gateway.DomainError
	if err != nil && !errors.As(err, &de) {
		return warnings, fmt.Errorf("%w: %s: %v", ErrStreamUnreachable, where, err)
	}
	if err == nil {
		warnings = append(warnings, "checked against "+where+": every guarantee pinned there over a configured capability is configured")
	}
	return warnings, err
}
