package pubsub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// SendControl publishes one control message on buzz:control from a
// process that runs no Bus, such as an operator command (`buzz-relay member
// remove`, docs/PROTOCOL.md §2.4): it connects to url, publishes c with V and a
// fresh Origin filled in, bounded by PublishTimeout, and disconnects. A
// lost message is covered by the receivers' periodic revalidation.
func SendControl(ctx context.Context, url string, c Control) error {
	c.V, c.Origin = ControlVersion, uuid.NewString()
	if _, known := opFields[c.Op]; !known {
		return fmt.Errorf("send control: unknown op %q", c.Op)
	}
	if err := c.check(); err != nil {
		return fmt.Errorf("send control %s: %w", c.Op, err)
	}
	opts, err := redis.ParseURL(url)
	if err != nil { // go-redis's message may quote the URL, password and all
		return fmt.Errorf("send control: REDIS_URL is not a redis:// or rediss:// URL")
	}
	opts.ContextTimeoutEnabled = true // PublishTimeout bounds the whole command
	opts.MaxRetries = -1              // one attempt, as for every PUBLISH
	opts.DialTimeout = PublishTimeout
	payload, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("send control %s: %w", c.Op, err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	if err := publish(ctx, client, ControlTopic, payload); err != nil {
		return fmt.Errorf("send control %s: %w", c.Op, err)
	}
	return nil
}
