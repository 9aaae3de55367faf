package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Dialer connects operators to one runtime's NATS server.
type Dialer struct {
	// URL is the runtime's NATS URL (or a cluster's comma-separated seeds).
	URL string
	// TLS, when set, is the TLS configuration of the connections: the CA
	// the server's certificate is checked against and a client
	// certificate. Without it a server that requires TLS is checked against
	// the system roots.
	TLS *tls.Config
	// Name is the connection's name the server shows.
	Name string
}

// Login refusals of Dialer.Dial.
var (
	// ErrCredentials is the NATS server refusing the user and password.
	ErrCredentials = errors.New("the NATS server refused these credentials")
	// ErrNotOperator is a user the server accepts that may not publish on
	// the tenant's ops subjects: an agent, or another tenant's user.
	ErrNotOperator = errors.New("these credentials are not an operator's of that tenant")
)

// Dial connects as tenant's operator, with the operator's own inbox prefix,
// and checks that the user is an operator of that tenant by reading the
// kill switch on the operator's own ops subject: the NATS server checks the
// password, and refuses an agent's publish there. The connection reconnects
// for as long as it is open.
func (d Dialer) Dial(ctx context.Context, tenant, operator, password string) (*nats.Conn, error) {
	denied := make(chan struct{}, 1)
	name := d.Name
	if name == "" {
		name = "contextos-operator"
	}
	opts := []nats.Option{nats.Name(name), nats.UserInfo(wire.UserName(tenant, operator), password),
		nats.CustomInboxPrefix(wire.InboxPrefix(tenant, operator)), nats.Timeout(5 * time.Second), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				select {
				case denied <- struct{}{}:
				default:
				}
			}
		})}
	if d.TLS != nil {
		opts = append(opts, nats.Secure(d.TLS.Clone()))
	}
	nc, err := nats.Connect(d.URL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, ErrCredentials
		}
		return nil, fmt.Errorf("the runtime cannot be reached: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-denied: // an agent: the server refuses its publish on an ops subject
			cancel()
		case <-ctx.Done():
		}
	}()
	var reply wire.OpReply
	if err := call(ctx, nc, tenant, operator, "kill-switch", struct{}{}, &reply); err != nil || !reply.OK {
		nc.Close()
		return nil, ErrNotOperator
	}
	return nc, nil
}
