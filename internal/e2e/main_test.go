// Package e2e holds the end-to-end tests of the relay: a whole buzz-relay
// in-process on a real PostgreSQL, spoken to over real WebSocket and HTTP
// connections.
package e2e

import (
	"testing"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
