package client

import (
	"testing"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

// TestMain starts the throwaway PostgreSQL cluster the relays of these
// tests run on, stops it afterwards and fails the run on leaked goroutines.
func TestMain(m *testing.M) { dbtest.Main(m) }
