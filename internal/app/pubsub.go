package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/health"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/pubsub"
)

// The app's side of scale-out over Redis (docs/PROTOCOL.md §16): which Bus the relay
// runs, what the pipeline's after-commit dispatch sends to the other
// processes, and what a control message from them does here. Without
// REDIS_URL the Bus is nil and every function below only acts locally.

// newBus returns the Bus of REDIS_URL, or nil when it is unset. Its
// callbacks reach the WebSocket server and the caches through a, which
// Start fills before Run starts the Bus.
func newBus(a *Relay) (*pubsub.Bus, error) {
	if a.Config.RedisURL == "" {
		return nil, nil
	}
	return pubsub.New(pubsub.Config{
		URL: a.Config.RedisURL, PoolSize: a.Config.RedisPoolSize, ProcessID: a.ProcessID,
		Logger: a.Log, Metrics: a.Metrics,
		DeliverFunc: func(m pubsub.Message) { a.Relay.DeliverRemote(m) },
		ControlFunc: a.applyControl,
		LinkFunc:    func(ev pubsub.LinkEvent) { a.Relay.LinkChanged(ev) },
	})
}

// redisStatus is /_status's view of the Bus: nil (disabled) without Redis.
func (a *Relay) redisStatus() func() string {
	if a.Bus == nil {
		return nil
	}
	return func() string {
		if a.Bus.Connected() {
			return health.RedisConnected
		}
		return health.RedisDisconnected
	}
}

// replicaStatus is /_status's view of the read replica.
func (a *Relay) replicaStatus() func() string {
	switch {
	case a.Config.ReadDatabaseURL == "":
		return nil
	case a.Services.Replica == nil:
		return func() string { return health.ReplicaUnused }
	}
	return a.Services.Replica.State
}

// fanout is the pipeline's dispatch after commit: local fan-out, then the
// one PUBLISH to the other processes, before the OK is sent (docs/PROTOCOL.md §16.2). It
// also breaks the construction cycle between the pipeline (which
// broadcasts) and the WebSocket server (which submits).
type fanout struct {
	a *Relay
}

// Broadcast fans d out on this process, then publishes it; a kind 20001
// also writes its presence key. It never fails the request: OK means
// committed, not delivered.
func (f *fanout) Broadcast(d ingest.Delivery) {
	a := f.a
	if a.Relay == nil {
		return
	}
	a.Relay.Broadcast(d)
	if a.Bus == nil {
		return
	}
	topic := pubsub.GlobalTopic(d.CommunityID)
	if d.Channel != "" {
		topic = pubsub.ChannelTopic(d.CommunityID, d.Channel)
	}
	ctx := context.Background()
	if event.IsEphemeral(d.Event.Kind) {
		a.Bus.PublishEphemeral(ctx, topic, d.Event.ID, d.JSON)
	} else {
		a.Bus.Publish(ctx, topic, d.Event.ID, d.JSON)
	}
	if d.Event.Kind == event.KindPresence {
		a.Bus.SetPresence(ctx, d.CommunityID, d.Event.PubKey, presenceStatus(d.Event.Content))
	}
}

// evict is the pipeline's EvictFunc: the eviction runs here, then on every
// other process through a control message (docs/PROTOCOL.md §16.4).
func (f *fanout) evict(communityID, channel, pubkey string, nonMembersOnly func(string) bool) {
	a := f.a
	if a.Relay == nil {
		return
	}
	a.Relay.Evict(communityID, channel, pubkey, nonMembersOnly)
	c := pubsub.Control{Community: communityID, ChannelID: channel}
	switch {
	case pubkey != "":
		c.Op, c.Pubkey = pubsub.OpEvict, pubkey
	case nonMembersOnly != nil:
		c.Op = pubsub.OpEvictNonMembers
	default:
		c.Op = pubsub.OpEvictAll
	}
	f.control(c)
}

// interrupt is the pipeline's InterruptFunc: the community's live
// subscriptions are closed with the live-interrupted reason here, then on
// the other processes through a gap control message, so every client that
// may have missed an event re-reads its history.
func (f *fanout) interrupt(communityID string) {
	a := f.a
	now := time.Now()
	if a.Relay != nil {
		a.Relay.InterruptCommunity(communityID, now)
	}
	f.control(pubsub.Control{Community: communityID, Op: pubsub.OpGap, UntilMS: now.UnixMilli()})
}

// forget is the pipeline's ForgetAccessFunc: cached access of reader in
// the community (every reader when ""), here and on the other processes.
func (f *fanout) forget(communityID, channel, reader string) {
	a := f.a
	a.Reader.Forget(communityID, reader)
	c := pubsub.Control{Community: communityID, Op: pubsub.OpAccessibleAll}
	if reader != "" && channel != "" {
		c = pubsub.Control{Community: communityID, Op: pubsub.OpMembership, ChannelID: channel, Pubkey: reader}
	}
	f.control(c)
}

func (f *fanout) control(c pubsub.Control) {
	if bus := f.a.Bus; bus != nil {
		_ = bus.PublishControl(context.Background(), c) // counted and logged by the Bus
	}
}

// applyControl is what a control message of another process does here
// (docs/PROTOCOL.md §16.4). It runs on the Bus's consumer goroutine, in order with the
// events, so anything that may wait on the database runs apart.
func (a *Relay) applyControl(c pubsub.Control) {
	switch c.Op {
	case pubsub.OpMembership:
		a.Reader.Forget(c.Community, c.Pubkey)
	case pubsub.OpAccessibleAll, pubsub.OpVisibility:
		a.Reader.Forget(c.Community, "")
	case pubsub.OpEvict:
		a.Reader.Forget(c.Community, c.Pubkey)
		a.Relay.Evict(c.Community, c.ChannelID, c.Pubkey, nil)
	case pubsub.OpEvictNonMembers:
		a.Reader.Forget(c.Community, "")
		go a.Relay.Evict(c.Community, c.ChannelID, "", func(pubkey string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			st, err := a.Store.ChannelStateGet(ctx, c.Community, c.ChannelID, pubkey)
			return err != nil || !st.ActiveMember() // checked without cache; doubt evicts
		})
	case pubsub.OpEvictAll:
		a.Reader.Forget(c.Community, "")
		a.Relay.Evict(c.Community, c.ChannelID, "", nil)
	case pubsub.OpRelayMemberRemoved:
		a.Relay.DisconnectMember(c.Community, c.Pubkey)
	case pubsub.OpHosts:
		a.Resolver.Forget()
	case pubsub.OpGap:
		a.Relay.InterruptCommunity(c.Community, time.UnixMilli(c.UntilMS).Add(pubsub.GapClockMargin))
	default:
		a.Log.Warn("control message ignored", slog.String("op", string(c.Op)))
	}
}

// maxPresenceStatus is the longest status a presence key holds (docs/PROTOCOL.md §7.4).
const maxPresenceStatus = 128

// presenceStatus is the status of a kind 20001: its content, or the
// "status" of a legacy {"status":"…"} object, cut to 128 bytes on a
// character boundary.
func presenceStatus(content string) string {
	status := content
	var legacy struct {
		Status *string `json:"status"`
	}
	if strings.HasPrefix(strings.TrimSpace(content), "{") && json.Unmarshal([]byte(content), &legacy) == nil && legacy.Status != nil {
		status = *legacy.Status
	}
	if len(status) <= maxPresenceStatus {
		return status
	}
	cut := maxPresenceStatus
	for cut > 0 && !utf8.RuneStart(status[cut]) {
		cut--
	}
	return status[:cut]
}
