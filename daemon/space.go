package daemon

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/projections"
)

// storeSpace measures how many bytes the store may still grow by: the least
// of the data_dir volume's free bytes and the embedded server's JetStream
// max_store less what is stored (embedded server), each stream's max_bytes
// less its bytes, and the account's JetStream storage limit less its use. A
// limit that is not set does not count.
func (rt *Runtime) storeSpace(ctx context.Context) (uint64, error) {
	free := uint64(math.MaxUint64)
	room := func(limit int64, used uint64) {
		if limit > 0 {
			free = min(free, uint64(limit)-min(used, uint64(limit)))
		}
	}
	ai, err := rt.js.AccountInfo(ctx)
	if err != nil {
		return 0, err
	}
	room(ai.Limits.MaxStore, ai.Store)
	if rt.Embedded != nil {
		v, err := volumeFree(rt.Config.NATS.DataDir)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			return 0, err
		default:
			free = min(free, v)
		}
		if c := rt.Embedded.Server().JetStreamConfig(); c != nil {
			room(c.MaxStore, ai.Store)
		}
	}
	for _, name := range []string{events.StreamName, projections.AuditStreamName} {
		s, err := rt.js.Stream(ctx, name)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, err
		}
		room(info.Config.MaxBytes, info.State.Bytes)
	}
	return free, nil
}

// measureSpace reports the store's space to the gateway, and logs when it
// crosses runtime.min_free_bytes either way.
func (rt *Runtime) measureSpace(ctx context.Context) {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	before := rt.Gateway.StoreSpaceErr()
	free, err := rt.storeSpace(mctx)
	rt.Gateway.SetStoreSpace(free, err)
	after := rt.Gateway.StoreSpaceErr()
	switch {
	case err != nil && ctx.Err() == nil:
		rt.log.Warn("the store's free space could not be measured", "err", err)
	case before == nil && after != nil:
		rt.log.Error("store space low: new proposals are refused overloaded", "free_bytes", free, "min_free_bytes", rt.Config.Runtime.MinFreeBytes)
	case before != nil && after == nil:
		rt.log.Info("store space recovered: new proposals are taken again", "free_bytes", free, "min_free_bytes", rt.Config.Runtime.MinFreeBytes)
	}
}

// watchSpace measures the store's space every runtime.store_space_interval
// until ctx is done.
func (rt *Runtime) watchSpace(ctx context.Context) {
	t := time.NewTicker(rt.Config.Runtime.StoreSpaceInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rt.measureSpace(ctx)
		}
	}
}
