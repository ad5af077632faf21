package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/health"
	"github.com/buzz-relay/buzz/internal/hot"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wsapi"
)

// The app's side of scale-out over Redis (docs/PROTOCOL.md §16): which Bus the relay
// runs, what the pipeline's after-commit dispatch sends to the other
// processes, and what a control message from them does here. Without
// REDIS_URL the Bus is nil and every function below only acts locally.

// newBus returns the Bus of REDIS_URL, or nil when it is unset. What it
// receives from the other processes goes to fan: remote events to the
// WebSocket server, control messages to applyControl.
func newBus(cfg config.Config, processID string, m *metrics.Metrics, log *slog.Logger, fan *fanout) (*pubsub.Bus, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	return pubsub.New(pubsub.Config{
		URL: cfg.RedisURL, PoolSize: cfg.RedisPoolSize, ProcessID: processID,
		Logger: log, Metrics: m,
		DeliverFunc: fan.deliverRemote,
		ControlFunc: fan.applyControl,
		LinkFunc:    fan.linkChanged,
	})
}

// redisStatus is /_status's view of the Bus: nil (disabled) without Redis.
func redisStatus(bus *pubsub.Bus) func() string {
	if bus == nil {
		return nil
	}
	return func() string {
		if bus.Connected() {
			return health.RedisConnected
		}
		return health.RedisDisconnected
	}
}

// replicaStatus is /_status's view of the read replica.
func replicaStatus(cfg config.Config, rep *replica.Replica) func() string {
	switch {
	case cfg.ReadDatabaseURL == "":
		return nil
	case rep == nil:
		return func() string { return health.ReplicaUnused }
	}
	return rep.State
}

// fanout is the live side of the relay, the pipeline's ingest.Live: its
// dispatch after commit (local fan-out, then the one PUBLISH to the other processes,
// before the OK is sent, docs/PROTOCOL.md §16.2), and what the Bus brings
// from the other processes. It also breaks the construction cycle between
// the pipeline (which broadcasts) and the WebSocket server (which
// submits): Start sets ws once the server exists, before anything runs.
type fanout struct {
	reader   *read.Engine
	resolver *tenant.Resolver
	store    *store.Store
	pool     *pgxpool.Pool
	log      *slog.Logger
	// bus is nil without REDIS_URL.
	bus *pubsub.Bus
	// hot is the hot window (nil when off), fed here from the committed
	// stream: this process's commits and the bus's window topics.
	hot *hot.Window
	// ws is nil until Start has built the server.
	ws *wsapi.Server
}

// crossProcess is the WebSocket server's link to the other processes: the
// Bus, or a nil interface without Redis (a nil *pubsub.Bus in a non-nil
// interface would pass the server's nil checks).
func (f *fanout) crossProcess() wsapi.CrossProcess {
	if f.bus == nil {
		return nil
	}
	return f.bus
}

// deliverRemote is the Bus's DeliverFunc: an event another process
// committed, fanned out here, or, from a window topic, given to the hot
// window.
func (f *fanout) deliverRemote(m pubsub.Message) {
	if m.Topic.Window {
		f.hot.Committed(m.Topic.Community, m.Channel, m.Event, m.JSON)
		return
	}
	f.ws.DeliverRemote(m)
}

// linkChanged is the Bus's LinkFunc: the link to Redis went down or up.
// A gap drops every hot window, which may have missed a commit.
func (f *fanout) linkChanged(ev pubsub.LinkEvent) {
	f.hot.SetLinked(ev.Up)
	f.ws.LinkChanged(ev)
}

// Broadcast fans d out on this process, then publishes it; a kind 20001
// also writes its presence key. It never fails the request: OK means
// committed, not delivered.
func (f *fanout) Broadcast(d ingest.Delivery) {
	if f.ws == nil {
		return
	}
	if d.JSON == nil && (f.bus != nil || f.hot.Holds(d.CommunityID, d.Event.Kind)) {
		d.JSON = d.Event.AppendJSON(nil) // once, for the window or the bus, and this process
	}
	// The window first: the OK follows this call, and a REQ that starts
	// after it must find the event (docs/ARCHITECTURE.md "Hot window").
	f.hot.Committed(d.CommunityID, d.Channel, d.Event, d.JSON)
	f.ws.Broadcast(d)
	if f.bus == nil {
		return
	}
	topic := pubsub.GlobalTopic(d.CommunityID)
	if d.Channel != "" {
		topic = pubsub.ChannelTopic(d.CommunityID, d.Channel)
	}
	ctx := context.Background()
	if event.IsEphemeral(d.Event.Kind) {
		f.bus.PublishEphemeral(ctx, topic, d.Event.ID, d.JSON)
	} else if !f.bus.Publish(ctx, topic, d.Event.ID, d.JSON) && f.hot != nil {
		// The other processes' windows may not see this commit: tell them
		// through PostgreSQL, before the OK, as an import does. (The gap
		// announcement comes only once Redis is back.)
		f.notifyHotWindow(d.CommunityID)
	}
	if d.Event.Kind == event.KindPresence {
		f.bus.SetPresence(ctx, d.CommunityID, d.Event.PubKey, presenceStatus(d.Event.Content))
	}
}

// notifyHotWindow sends the hot window notification of communityID
// (store.NotifyHotWindow), bounded like a PUBLISH; a failure is logged,
// and the processes' LISTEN connections are then likely broken too, which
// turns their windows off.
func (f *fanout) notifyHotWindow(communityID string) {
	ctx, cancel := context.WithTimeout(context.Background(), pubsub.PublishTimeout)
	defer cancel()
	if err := f.store.NotifyHotWindow(ctx, communityID); err != nil {
		f.log.Warn("hot window notification failed", slog.String("community_id", communityID), slog.String("error", err.Error()))
	}
}

// Evict runs the pipeline's eviction here, then on every other process
// through a control message (docs/PROTOCOL.md §16.4).
func (f *fanout) Evict(communityID, channel, pubkey string, nonMembersOnly func(string) bool) {
	if f.ws == nil {
		return
	}
	f.ws.Evict(communityID, channel, pubkey, nonMembersOnly)
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

// Interrupt follows an ambiguous commit: the community's live subscriptions
// are closed with the live-interrupted reason here, then on the other
// processes through a gap control message, so every client that
// may have missed an event re-reads its history.
func (f *fanout) Interrupt(communityID string) {
	now := time.Now()
	f.hot.Reset(communityID, "ambiguous")
	if f.ws != nil {
		f.ws.InterruptCommunity(communityID, now)
	}
	f.control(pubsub.Control{Community: communityID, Op: pubsub.OpGap, UntilMS: now.UnixMilli()})
}

// Unsettled follows a commit that may have stored an event the stream has
// not carried (ingest.Live): the community's hot window goes cold until
// warmed again from PostgreSQL, which holds the answer.
func (f *fanout) Unsettled(communityID string) { f.hot.Reset(communityID, "ambiguous") }

// Forget drops the cached access of reader in the community (every reader
// when ""), here and on the other processes.
func (f *fanout) Forget(communityID, channel, reader string) {
	f.reader.Forget(communityID, reader)
	c := pubsub.Control{Community: communityID, Op: pubsub.OpAccessibleAll}
	if reader != "" && channel != "" {
		c = pubsub.Control{Community: communityID, Op: pubsub.OpMembership, ChannelID: channel, Pubkey: reader}
	}
	f.control(c)
}

func (f *fanout) control(c pubsub.Control) {
	if bus := f.bus; bus != nil {
		_ = bus.PublishControl(context.Background(), c) // counted and logged by the Bus
	}
}

// applyControl is what a control message of another process does here
// (docs/PROTOCOL.md §16.4). It runs on the Bus's consumer goroutine, in order with the
// events, so anything that may wait on the database runs apart.
func (f *fanout) applyControl(c pubsub.Control) {
	switch c.Op {
	case pubsub.OpMembership:
		f.reader.Forget(c.Community, c.Pubkey)
	case pubsub.OpAccessibleAll, pubsub.OpVisibility:
		f.reader.Forget(c.Community, "")
	case pubsub.OpEvict:
		f.reader.Forget(c.Community, c.Pubkey)
		f.ws.Evict(c.Community, c.ChannelID, c.Pubkey, nil)
	case pubsub.OpEvictNonMembers:
		f.reader.Forget(c.Community, "")
		go f.ws.Evict(c.Community, c.ChannelID, "", func(pubkey string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			st, err := f.store.ChannelStateGet(ctx, c.Community, c.ChannelID, pubkey)
			return err != nil || !st.ActiveMember() // checked without cache; doubt evicts
		})
	case pubsub.OpEvictAll:
		f.reader.Forget(c.Community, "")
		f.ws.Evict(c.Community, c.ChannelID, "", nil)
	case pubsub.OpRelayMemberRemoved:
		f.ws.DisconnectMember(c.Community, c.Pubkey)
	case pubsub.OpHosts:
		f.resolver.Forget()
	case pubsub.OpGap:
		f.hot.Reset(c.Community, "bus_gap")
		f.ws.InterruptCommunity(c.Community, time.UnixMilli(c.UntilMS).Add(pubsub.GapClockMargin))
	default:
		f.log.Warn("control message ignored", slog.String("op", string(c.Op)))
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
