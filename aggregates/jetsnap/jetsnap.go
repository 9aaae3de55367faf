package jetsnap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var _ aggregates.SnapshotStore = (*Store)(nil)

// StreamName is the JetStream stream of Store. It has the
// shape of a key-value bucket (KV_<bucket>, subjects $KV.<bucket>.>, one
// message per subject, direct get), so `nats kv get CTX_SNAPSHOTS <key>`
// reads a snapshot, and it lives under $KV.>, which only the runtime's user
// may touch.
const (
	StreamName     = "KV_CTX_SNAPSHOTS"
	snapshotPrefix = "$KV.CTX_SNAPSHOTS."
)

// Store is the JetStream aggregates.SnapshotStore: the latest snapshot of event
// subject ctx.ev.<rest> is the only message on $KV.CTX_SNAPSHOTS.<rest>, read
// with one Direct Get. On a single server the stream persists asynchronously
// (no fsync per snapshot): a snapshot lost in a crash only lengthens the next
// cold load.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// Ensure creates (or updates) the snapshot stream with replicas
// replicas and returns a store on it.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	if replicas <= 0 {
		replicas = 1
	}
	cfg := jetstream.StreamConfig{
		Name:              StreamName,
		Description:       "ContextOS state snapshots (a cache: the events are the truth)",
		Subjects:          []string{snapshotPrefix + ">"},
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		Duplicates:        2 * time.Minute,
		AllowRollup:       true,
		DenyDelete:        true,
		AllowDirect:       true,
	}
	if replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("jetsnap: ensure stream %s: %w", StreamName, err)
	}
	return &Store{js: js, stream: s}, nil
}

func snapshotSubject(subject string) string {
	return snapshotPrefix + strings.TrimPrefix(subject, "ctx.ev.")
}

// Get implements aggregates.SnapshotStore with a Direct Get of the subject's last
// message.
func (s *Store) Get(ctx context.Context, subject string) ([]byte, bool, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, snapshotSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return m.Data, true, nil
}

// Put implements aggregates.SnapshotStore: asynchronous publishes, then it waits for
// every acknowledgement.
func (s *Store) Put(ctx context.Context, snaps []aggregates.Snapshot) error {
	futures := make([]jetstream.PubAckFuture, 0, len(snaps))
	for _, sn := range snaps {
		m := nats.NewMsg(snapshotSubject(sn.Subject))
		m.Data = sn.Data
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}
