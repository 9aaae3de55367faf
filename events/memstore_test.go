package events_test

import (
	"testing"

	"github.com/contextos/ledger/events"
	"github.com/contextos/ledger/events/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store { return events.NewMemStore() })
}
