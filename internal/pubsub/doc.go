// Package pubsub is the Redis side of scale-out (docs/PROTOCOL.md §16.1–§16.5): live
// events and control messages between relay processes that share one
// PostgreSQL database, the delivery barrier before EOSE, and the optional
// presence keys.
//
// It owns the Redis connections (one pool for PUBLISH and keys, one
// dedicated connection for every subscription), the topic names
// (buzz:{community}:channel:{channel}, buzz:{community}:global,
// buzz:control, buzz:barrier:{process_id}), the reference-counted wanted
// set with its 500 ms debounced UNSUBSCRIBE, the local-echo set, the
// bounded in-process queue of 4096 messages and the one goroutine that
// drains it, the reconnect backoff (1, 2, 4, 8, 16, then 30 s) and the
// control-message format. A Bus is a service (Start, Stop) that the app
// runs only when REDIS_URL is set:
//
//	Publish(ctx, topic, id, json)   after commit and local fan-out, before OK
//	Retain(topic) / Release(topic)  per subscription scope; wait on Retain before the history query
//	Barrier(ctx)                    before EOSE on a connection with other live subscriptions
//	PublishControl(ctx, control)    after the local effect, for the other processes
//	SetPresence / ClearPresence     kind 20001, and a pubkey's last connection closing
//	Config.DeliverFunc, ControlFunc what comes back, in Redis order, on the consumer goroutine
//	Config.LinkFunc                 gaps in live delivery opening and closing
//
// Redis sits inside the relay's trust boundary: received events are checked
// for shape and id, not signature. Nothing durable lives in Redis; every
// failure here degrades live cross-process delivery and nothing else, so no
// method returns an error a caller must act on, and an OK never depends on
// this package.
//
// It does NOT decide who receives an event (the WebSocket server's fan-out
// re-checks filter, channel access and visibility for every recipient), it
// does NOT apply control messages (the caches and the WebSocket server do,
// through Config.ControlFunc), it does NOT close interrupted subscriptions
// (it reports gaps through Config.LinkFunc; the WebSocket server closes
// them), it does NOT read presence keys, and it does NOT read the
// environment (package config does; the app fills Config).
package pubsub
