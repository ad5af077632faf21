package logtest_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/logtest"
)

func TestBufferConcurrent(t *testing.T) {
	t.Parallel()
	var b logtest.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Equal(t, strings.Repeat("x", 800), b.String())
}
