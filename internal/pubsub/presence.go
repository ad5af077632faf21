package pubsub

import (
	"context"
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/buzz-relay/buzz/internal/event"
)

// StatusOffline is the presence status that deletes the key.
const StatusOffline = "offline"

// SetPresence records a kind 20001 status (docs/PROTOCOL.md §16.5): SET
// buzz:{community}:presence:{pubkey} status EX 180, or DEL for "offline".
// status is the event's status as the relay cut it (docs/PROTOCOL.md §7.4). Failures and
// skips (the link is down) are counted in buzz_pubsub_presence_errors_total
// and warned about at most once per 10 s; they never affect the OK.
func (b *Bus) SetPresence(ctx context.Context, community, pubkey, status string) {
	if status == StatusOffline {
		b.ClearPresence(ctx, community, pubkey)
		return
	}
	b.presence(ctx, "set", community, pubkey, func(ctx context.Context, c *redis.Client, key string) error {
		return c.Set(ctx, key, status, PresenceTTL).Err()
	})
}

// ClearPresence deletes a pubkey's presence key in community: on an
// "offline" status, and when the pubkey's last connection on this process
// closes. Failures are handled as in SetPresence.
func (b *Bus) ClearPresence(ctx context.Context, community, pubkey string) {
	b.presence(ctx, "delete", community, pubkey, func(ctx context.Context, c *redis.Client, key string) error {
		return c.Del(ctx, key).Err()
	})
}

// presence runs one presence write bounded by PublishTimeout.
func (b *Bus) presence(ctx context.Context, what, community, pubkey string,
	write func(ctx context.Context, c *redis.Client, key string) error) {
	var err error
	switch client := b.pool(); {
	case !isUUID(community) || !event.IsHex64(pubkey):
		err = errors.New("community must be a UUID and pubkey 64 hex characters")
	case client == nil:
		err = ErrDisconnected
	default:
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PublishTimeout)
		err = write(wctx, client, PresenceKey(community, pubkey))
		cancel()
	}
	if err != nil {
		b.m.PresenceErrors.Inc()
		b.warnPresence.Warn(slog.String("op", what), slog.String("err", err.Error()))
	}
}
