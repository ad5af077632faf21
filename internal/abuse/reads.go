package abuse

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// wideRepeats is how many times the wide REQ is sent.
const wideRepeats = 20

// wideReq sends REQ {"kinds":[1..1000],"#p":[7,000 values],"limit":1}: 7
// million index keys in one filter, within the 512 KiB frame.
func wideReq(ctx context.Context, e *Env) error {
	kinds := make([]int, e.Opts.n(1000))
	for i := range kinds {
		kinds[i] = i + 1
	}
	one := 1
	f := event.Filter{Kinds: kinds, Tags: map[string][]string{"p": randomHex(e.Opts.n(7000))}, Limit: &one}
	e.repeat(ctx, wideRepeats, 2, query(func(ctx context.Context, c *client.Conn) error {
		_, err := c.Query(ctx, f)
		return err
	}))
	return nil
}

// tagsSubs is how many live subscriptions of tagsValues hold the values.
const tagsSubs = 4

// tagsValues holds live subscriptions with 20,000 #t values each, then
// publishes events carrying 20,000 t tags that all match them: tags ×
// values comparisons per publish on a relay that matches naively.
func tagsValues(ctx context.Context, e *Env) error {
	values := make([]string, e.Opts.n(20000))
	for i := range values {
		values[i] = "tv" + strconv.Itoa(i)
	}
	f := event.Filter{Kinds: []int{event.KindNote}, Tags: map[string][]string{"t": values}}
	sub := &session{e: e}
	defer sub.reset()
	var delivered atomic.Int64
	var drains sync.WaitGroup
	sctx, stop := context.WithCancel(ctx)
	defer func() { stop(); drains.Wait(); e.Outcomes.Note("live-delivered", int(delivered.Load())) }()
	for i := range tagsSubs {
		c, err := sub.conn(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.Outcomes.Add(ctx, false, "", err)
			}
			return nil
		}
		// The REQ first as a query, to count its answer (Subscribe
		// hides a CLOSED), then the same filter held live.
		limit := 1
		g := f
		g.Limit = &limit
		ok, err := e.op(ctx, func(ctx context.Context) (bool, string, error) {
			_, err := c.Query(ctx, g)
			return err == nil, "", err
		})
		if err != nil && !refused(err) {
			sub.reset() // the socket is gone, and its subscriptions with it
		}
		if !ok {
			continue
		}
		ch, err := c.Subscribe(sctx, "tv"+strconv.Itoa(i), f)
		if err != nil {
			if ctx.Err() == nil {
				e.Outcomes.Add(ctx, false, "", err)
			}
			continue
		}
		drains.Go(func() {
			for range ch {
				delivered.Add(1)
			}
		})
	}
	tags := make(event.Tags, len(values))
	for i, v := range values {
		tags[i] = event.Tag{"t", v}
	}
	var published atomic.Int64
	e.repeat(ctx, e.Opts.n(50), 1, func(ctx context.Context, c *client.Conn) (bool, string, error) {
		ev, err := signed(e.Key, event.KindNote, "tags", tags)
		if err != nil {
			return false, "", err
		}
		ok, msg, err := c.Publish(ctx, ev)
		if ok {
			published.Add(1)
		}
		return ok, msg, err
	})
	// The relay queued each delivery before its OK; give the frames still
	// on their way a moment to be read before the subscriptions end.
	if published.Load() > 0 {
		grace := time.Now().Add(time.Second)
		for delivered.Load() == 0 && time.Now().Before(grace) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// readFloodCalls is the bridge half's calls at scale 1, each a POST /count
// of readFloodCount.
const readFloodCalls = 3200

var readFloodCount = event.Filter{Kinds: []int{event.KindNote}}

// prepareReadFlood signs the bridge half's tokens ahead of the window.
func prepareReadFlood(e *Env, start time.Time, window time.Duration) error {
	t, err := presign(e.Target.Bridge(e.Key), "/count", client.FiltersJSON([]event.Filter{readFloodCount}),
		e.Opts.n(readFloodCalls), start, window)
	e.tokens = t
	return err
}

// readFlood keeps Concurrency reads in flight on the community's rows:
// half POST /count [{"kinds":[1]}] on the bridge, half REQ
// {"kinds":[1],"limit":1000} on sockets. The REQs' events are counted, not
// decoded: on the benchmark's one machine, decoding thousands of events a
// second would be the tool's load on the honest clients, which a remote
// attacker does not impose.
func readFlood(ctx context.Context, e *Env) error {
	conc := max(2, e.Opts.Concurrency)
	limit := 1000
	wide := event.Filter{Kinds: []int{event.KindNote}, Limit: &limit}
	var wg sync.WaitGroup
	wg.Go(func() {
		e.repeatHTTP(ctx, e.Opts.n(readFloodCalls), conc/2, func(ctx context.Context, h *client.HTTP) (bool, string, error) {
			_, err := h.Count(ctx, readFloodCount)
			return err == nil, "", err
		})
	})
	wg.Go(func() {
		e.repeat(ctx, e.Opts.n(3200), conc/2, query(func(ctx context.Context, c *client.Conn) error {
			_, err := c.QueryCount(ctx, wide) // counted, not decoded: the tool's CPU is not the relay's
			return err
		}))
	})
	wg.Wait()
	return nil
}

// bigTagBytes is the encoded size of one filler tag of bigEvents.
const bigTagBytes = len(`["x",""],`) + 100

// bigEvents publishes events near the frame limit made of 100-byte tags,
// then asks for them with limit 1000 on 8 sockets at once.
func bigEvents(ctx context.Context, e *Env) error {
	size := int(float64(e.Opts.FrameBytes) * 0.9 * min(e.Opts.Scale, 1))
	filler := strings.Repeat("b", 100)
	tags := make(event.Tags, max(1, size/bigTagBytes))
	for i := range tags {
		tags[i] = event.Tag{"x", filler[:100-len(strconv.Itoa(i))] + strconv.Itoa(i)}
	}
	e.repeat(ctx, e.Opts.n(20), 1, func(ctx context.Context, c *client.Conn) (bool, string, error) {
		ev, err := signed(e.Key, event.KindNote, "big", tags)
		if err != nil {
			return false, "", err
		}
		return c.Publish(ctx, ev)
	})
	limit := 1000
	f := event.Filter{Kinds: []int{event.KindNote}, Authors: []string{event.PubKey(e.Key)}, Limit: &limit}
	e.repeat(ctx, e.Opts.n(400), 8, query(func(ctx context.Context, c *client.Conn) error {
		_, err := c.Query(ctx, f)
		return err
	}))
	return nil
}
