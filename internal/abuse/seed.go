package abuse

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// Seeding publishes as many keys, each within the default per-user
// quotas (docs/OPERATIONS.md "Running a public relay"): at most
// seedPerKey notes, one every seedEvery, seedKeysAtOnce keys at a time.
const (
	seedPerKey     = 40
	seedEvery      = 125 * time.Millisecond
	seedKeysAtOnce = 32
)

// Seed stores about rows kind 1 notes of ~300 bytes in the target
// community, for the reads of the read-flood and slow-reader attacks to
// find. It returns how many were accepted and refused; a socket that
// fails ends its key's share.
func Seed(ctx context.Context, t Target, rows int) (stored, refused int) {
	var ok, no atomic.Int64
	words := strings.Repeat("seed words for the read flood ", 10)
	keys := (rows + seedPerKey - 1) / seedPerKey
	sem := make(chan struct{}, seedKeysAtOnce)
	var wg sync.WaitGroup
	for k := range keys {
		n := min(seedPerKey, rows-k*seedPerKey)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sk := event.GenerateKey()
			c, err := t.Dial(ctx, sk)
			if err != nil {
				no.Add(int64(n))
				return
			}
			defer c.Close()
			for i := range n {
				if ctx.Err() != nil {
					return
				}
				ev, err := signed(sk, event.KindNote, words+strconv.Itoa(i), nil)
				if err != nil {
					no.Add(1)
					continue
				}
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				accepted, _, err := c.Publish(octx, ev)
				cancel()
				switch {
				case err != nil:
					no.Add(int64(n - i))
					return
				case accepted:
					ok.Add(1)
				default:
					no.Add(1)
				}
				pause(ctx, seedEvery)
			}
		})
	}
	wg.Wait()
	return int(ok.Load()), int(no.Load())
}
