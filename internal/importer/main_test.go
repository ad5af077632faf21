package importer_test

import (
	"testing"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
