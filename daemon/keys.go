package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/codec"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// auditWitnesses returns, for the projections, a new client per tenant of
// every configured witness (a client remembers its log's size at the
// witness), and the witnesses' keys for keys.json.
func auditWitnesses(cfg *config.Config) (func(tenant string) []*witness.Client, []string, error) {
	var keys []string
	var cosigners []*audit.Cosigner
	for _, w := range cfg.Runtime.Witnesses {
		c, err := audit.ParseCosignerKey(w.Key)
		if err != nil {
			return nil, nil, err
		}
		keys, cosigners = append(keys, w.Key), append(cosigners, c)
	}
	if len(keys) == 0 {
		return nil, nil, nil
	}
	return func(string) []*witness.Client {
		out := make([]*witness.Client, len(cosigners))
		for i, c := range cosigners {
			out[i] = &witness.Client{URL: cfg.Runtime.Witnesses[i].URL, Key: c}
		}
		return out
	}, keys, nil
}

// KeyPath is where the runtime's signing key is kept: runtime.key_file, or
// <data_dir>/runtime.key for the embedded server alone.
func KeyPath(cfg *config.Config) (string, error) {
	if cfg.Runtime.KeyFile != "" {
		return cfg.Runtime.KeyFile, nil
	}
	if cfg.NATS.URL != "" || cfg.NATS.DataDir == "" {
		return "", errors.New("runtime.key_file is required with an external NATS (every replica shares one key)")
	}
	return filepath.Join(cfg.NATS.DataDir, "runtime.key"), nil
}

// StreamKeys is what the event stream says about the runtime's signing
// identity: the key of its latest event, and its latest key rotation.
type StreamKeys struct {
	Empty     bool
	LastSeq   uint64
	LastKeyID string             // the key the latest event was signed with
	Rotation  *audit.KeyRotation // the latest rotation recorded, if any
	RotatedTo string             // its new key's id
}

// Current returns the id of the key the runtime must sign with now: the
// latest rotation's new key when the latest event was signed by it or by
// the key it retired (the rotation itself), else the latest event's key.
func (sk StreamKeys) Current() string {
	if sk.Rotation != nil {
		if from, _, _, err := sk.Rotation.PublicKeys(); err == nil && (sk.LastKeyID == codec.KeyIDFor(from) || sk.LastKeyID == sk.RotatedTo) {
			return sk.RotatedTo
		}
	}
	return sk.LastKeyID
}

// ReadStreamKeys reads the latest event and the latest key rotation of the
// tenants' logs.
func ReadStreamKeys(ctx context.Context, js jetstream.JetStream, tenants []string) (StreamKeys, error) {
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		return StreamKeys{}, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return StreamKeys{}, err
	}
	if info.State.Msgs == 0 {
		return StreamKeys{Empty: true}, nil
	}
	out := StreamKeys{LastSeq: info.State.LastSeq}
	m, err := st.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		return StreamKeys{}, fmt.Errorf("read the stream's latest event: %w", err)
	}
	env, err := codec.Decode(m.Data)
	if err != nil {
		return StreamKeys{}, fmt.Errorf("the stream's latest message (seq %d) is not an event: %w", m.Sequence, err)
	}
	out.LastKeyID = env.KeyID
	var latest uint64
	for _, t := range tenants {
		m, err := st.GetLastMsgForSubject(ctx, audit.KeyRotationSubject(t))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return StreamKeys{}, err
		}
		if m.Sequence < latest {
			continue
		}
		env, err := codec.Decode(m.Data)
		if err != nil {
			return StreamKeys{}, fmt.Errorf("key rotation at seq %d: %w", m.Sequence, err)
		}
		k, err := audit.ParseKeyRotation(env)
		if err != nil {
			return StreamKeys{}, fmt.Errorf("key rotation at seq %d: %w", m.Sequence, err)
		}
		_, to, _, err := k.PublicKeys()
		if err != nil {
			return StreamKeys{}, err
		}
		latest, out.Rotation, out.RotatedTo = m.Sequence, &k, codec.KeyIDFor(to)
	}
	return out, nil
}

// bootKey loads the runtime's signing key and checks it against the
// stream: a missing key is made only for an empty stream (otherwise the
// events already stored would be signed by a key nobody holds any more);
// a key that differs from the one the latest events were signed with is
// refused unless the stream records a rotation to it (contextosd keys
// rotate). It returns the signer and the retired public keys, which
// audit-keys publishes with the current one.
func bootKey(ctx context.Context, cfg *config.Config, js jetstream.JetStream) (codec.Signer, []ed25519.PublicKey, error) {
	path, err := KeyPath(cfg)
	if err != nil {
		return codec.Signer{}, nil, err
	}
	tenants := cfg.TenantIDs()
	sk, err := ReadStreamKeys(ctx, js, tenants)
	if err != nil {
		return codec.Signer{}, nil, err
	}
	key, err := codec.LoadPrivateKey(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && sk.Empty:
		if key, err = createOrLoadKey(path); err != nil {
			return codec.Signer{}, nil, err
		}
	case errors.Is(err, os.ErrNotExist):
		return codec.Signer{}, nil, fmt.Errorf("runtime key %s is missing, but the event stream holds events (the latest, seq %d, signed by %s): restore the key file, or record a new key with \"contextosd keys rotate\"",
			path, sk.LastSeq, sk.LastKeyID)
	case err != nil:
		return codec.Signer{}, nil, err
	}
	signer := codec.NewSigner(key)
	if !sk.Empty && signer.KeyID != sk.Current() {
		return codec.Signer{}, nil, fmt.Errorf("runtime key %s (%s) is not the stream's signing key %s (its latest event, seq %d, is signed by %s): every replica must share one key file (runtime.key_file), or rotate with \"contextosd keys rotate\"",
			path, signer.KeyID, sk.Current(), sk.LastSeq, sk.LastKeyID)
	}
	var retired []ed25519.PublicKey
	if sk.Rotation != nil {
		if _, _, retired, err = sk.Rotation.PublicKeys(); err != nil {
			return codec.Signer{}, nil, err
		}
	}
	return signer, retired, nil
}

// RotateOptions says how RotateKey hands the signing identity on.
type RotateOptions struct {
	// NewKeyFile, when set, is the new key (made with another tool);
	// otherwise a new key is generated.
	NewKeyFile string
	// LostKey records the rotation without the old key: signed by the new
	// key, with the operator's assertion (Operator, ArtifactRef).
	LostKey     bool
	Operator    string
	ArtifactRef string
	// OldPublicKey is the lost key's public half (from an auditor's
	// keys.json), for the rotation to name it.
	OldPublicKey ed25519.PublicKey
	Clock        aggregates.Clock // default the system clock
}

// RotateKey records a new signing key for a stopped runtime: one
// runtime.key_rotated event per tenant, signed by the old key (or, when it
// is lost, by the new key with an operator's assertion), then the old key
// file kept beside the new one as <key_file>.retired-<key id>. It reaches
// the store as the runtime does (the embedded server over data_dir, which
// must not be running, or nats.url). It returns the new key's id.
func RotateKey(cfg *config.Config, o RotateOptions) (string, error) {
	if o.LostKey && (o.Operator == "" || o.ArtifactRef == "") {
		return "", errors.New("a rotation without the old key needs the operator's name and an artifact reference")
	}
	if o.Clock == nil {
		o.Clock = aggregates.SystemClock{}
	}
	path, err := KeyPath(cfg)
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	var old ed25519.PrivateKey
	if !o.LostKey {
		if old, err = codec.LoadPrivateKey(path); err != nil {
			return "", fmt.Errorf("the old key (use --lost-key with an operator's assertion if it is gone): %w", err)
		}
	}
	var next ed25519.PrivateKey
	if o.NewKeyFile != "" {
		next, err = codec.LoadPrivateKey(o.NewKeyFile)
	} else {
		next, err = codec.GenerateKey(rand.Reader)
	}
	if err != nil {
		return "", err
	}
	js, stop, err := stoppedStore(cfg)
	if err != nil {
		return "", err
	}
	defer stop()
	tenants := cfg.TenantIDs()
	sk, err := ReadStreamKeys(ctx, js, tenants)
	if err != nil {
		return "", err
	}
	if sk.Empty {
		return "", errors.New("the event stream is empty: there is nothing to rotate (boot makes the first key)")
	}
	var oldPub ed25519.PublicKey
	switch cur := sk.Current(); {
	case old != nil:
		oldPub = old.Public().(ed25519.PublicKey)
		if id := codec.KeyIDFor(oldPub); id != cur {
			return "", fmt.Errorf("the key at %s (%s) is not the stream's signing key (%s)", path, id, cur)
		}
	case len(o.OldPublicKey) == ed25519.PublicKeySize && codec.KeyIDFor(o.OldPublicKey) == cur:
		oldPub = o.OldPublicKey
	case sk.Rotation != nil && sk.RotatedTo == cur:
		_, oldPub, _, _ = sk.Rotation.PublicKeys()
	default:
		return "", fmt.Errorf("the old key %s is lost: name its public key (--old-keys keys.json) so that the rotation records which key it retires", cur)
	}
	rot := audit.KeyRotation{From: b64(oldPub), To: b64(next.Public().(ed25519.PublicKey)), Retired: []string{b64(oldPub)}}
	if sk.Rotation != nil {
		for _, r := range sk.Rotation.Retired {
			if r != rot.From {
				rot.Retired = append(rot.Retired, r)
			}
		}
	}
	signer := codec.NewSigner(next)
	if old != nil {
		signer = codec.NewSigner(old)
	} else {
		rot.AssertedBy, rot.ArtifactRef = o.Operator, o.ArtifactRef
	}
	store := events.NewJetStore(js, events.StreamName)
	ids := aggregates.NewIDs(o.Clock, nil)
	for _, t := range tenants {
		env, err := signer.Seal(audit.TypeKeyRotated, audit.KeyRotationVersion, ids.New(), t, codec.FormatTime(o.Clock.Now()), rot)
		if err != nil {
			return "", err
		}
		if _, err := audit.ParseKeyRotation(env); err != nil {
			return "", err
		}
		subject := audit.KeyRotationSubject(t)
		last, err := store.LastSeq(ctx, subject)
		if err != nil {
			return "", err
		}
		if _, err := store.Append(ctx, subject, last, env); err != nil {
			return "", fmt.Errorf("record the rotation for %s: %w", t, err)
		}
	}
	newID := codec.KeyIDFor(next.Public().(ed25519.PublicKey))
	if old != nil {
		if err := os.Rename(path, path+".retired-"+strings.TrimPrefix(codec.KeyIDFor(oldPub), "ed25519:")); err != nil {
			return "", err
		}
	} else if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return newID, codec.SavePrivateKey(path, next)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// stoppedStore opens the store as the runtime would, for a tool run while
// the runtime is stopped: the embedded server over data_dir without a
// listener, or nats.url with the runtime's credentials.
func stoppedStore(cfg *config.Config) (jetstream.JetStream, func(), error) {
	nc, stop, err := storeConn(cfg)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return js, stop, nil
}

func storeConn(cfg *config.Config) (*nats.Conn, func(), error) {
	if cfg.NATS.URL == "" {
		sync := true
		emb, err := events.StartEmbedded(events.EmbeddedConfig{DataDir: cfg.NATS.DataDir, DontListen: true, SyncAlways: &sync})
		if err != nil {
			return nil, nil, fmt.Errorf("open the data dir (is contextosd still running?): %w", err)
		}
		nc, err := emb.InProcessConn()
		if err != nil {
			emb.Shutdown()
			return nil, nil, err
		}
		return nc, func() { nc.Close(); emb.Shutdown() }, nil
	}
	var opts []nats.Option
	switch {
	case cfg.NATS.Creds != "":
		opts = append(opts, nats.UserCredentials(cfg.NATS.Creds))
	case cfg.NATS.User != "":
		opts = append(opts, nats.UserInfo(cfg.NATS.User, cfg.NATS.Password))
	}
	nc, err := events.Connect(cfg.NATS.URL, opts...)
	if err != nil {
		return nil, nil, err
	}
	return nc, nc.Close, nil
}

// StreamSigningKey returns the id of the key a stopped runtime's stream is
// signed with now (StreamKeys.Current).
func StreamSigningKey(cfg *config.Config) (string, error) {
	js, stop, err := stoppedStore(cfg)
	if err != nil {
		return "", err
	}
	defer stop()
	sk, err := ReadStreamKeys(context.Background(), js, cfg.TenantIDs())
	if err != nil {
		return "", err
	}
	return sk.Current(), nil
}

// createOrLoadKey makes the key at path, or loads the one there: replicas
// that share a key file (a shared volume) may start at once, and the one
// that linked first made the key they all use.
func createOrLoadKey(path string) ([]byte, error) {
	key, err := createKey(path)
	if errors.Is(err, os.ErrExist) {
		return codec.LoadPrivateKey(path)
	}
	return key, err
}

// CreateKey makes a new runtime signing key at path (0600) and returns its
// key id; it refuses to replace an existing file (os.ErrExist). It is how a
// key shared by several replicas is made before any of them starts.
func CreateKey(path string) (string, error) {
	key, err := createKey(path)
	if err != nil {
		return "", err
	}
	return codec.NewSigner(key).KeyID, nil
}

// createKey writes a new key whole under a private name and links it into
// place, which fails with os.ErrExist if a file is already there: nobody can
// read a half-written key, and two processes creating one at once cannot
// both win.
func createKey(path string) ([]byte, error) {
	key, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	tmp := path + "." + hex.EncodeToString(suffix) + ".tmp" // a pid repeats across containers
	if err := codec.SavePrivateKey(tmp, key); err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return nil, err
	}
	return key, nil
}
