package abuse

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// Target is the community under attack.
type Target struct {
	// URL is the relay's ws(s) URL the sockets dial.
	URL string
	// Host is the community's host when it is not URL's (client.DialHost);
	// "" means URL's host.
	Host string
	// HTTP sends the bridge requests; nil means a client of the package's
	// own with no idle connection limit.
	HTTP *http.Client
}

// Dial opens an authenticated socket to the community as sk.
func (t Target) Dial(ctx context.Context, sk []byte) (*client.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.DialHost(dctx, t.URL, t.Host, sk)
}

// Bridge is the community's HTTP bridge, signing as sk.
func (t Target) Bridge(sk []byte) *client.HTTP {
	base := "http://" + strings.TrimPrefix(t.URL, "ws://")
	if strings.HasPrefix(t.URL, "wss://") {
		base = "https://" + strings.TrimPrefix(t.URL, "wss://")
	}
	hc := t.HTTP
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	}
	return &client.HTTP{BaseURL: strings.TrimSuffix(base, "/"), SK: sk, Client: hc, Host: t.Host}
}

// Options size the attacks.
type Options struct {
	// Scale multiplies every attack's size (array lengths, tag counts,
	// event counts): 1 is the full attack of docs/PERFORMANCE.md, sized
	// to a 512 KiB frame; a small scale keeps a run against an undefended
	// relay short (at 1 its wide REQ holds a core of that relay for hours).
	Scale float64
	// Concurrency is the attacker's requests in flight in the floods.
	Concurrency int
	// OpTimeout bounds one request.
	OpTimeout time.Duration
	// FrameBytes is the relay's WebSocket frame limit (NIP-11
	// max_message_length), which the big events are sized to.
	FrameBytes int
}

// DefaultOptions is the full attack.
func DefaultOptions() Options {
	return Options{Scale: 1, Concurrency: 64, OpTimeout: 5 * time.Second, FrameBytes: 524288}
}

// n scales a full-size count, at least 1.
func (o Options) n(full int) int { return max(1, int(float64(full)*o.Scale)) }

// Env is what one attack run gets: the target, the attacker's key, the
// sizes and the count of the answers.
type Env struct {
	Target   Target
	Key      []byte
	Opts     Options
	Outcomes *Outcomes

	// tokens, when Prepare made them, are the bridge calls' NIP-98
	// headers signed ahead of the window (presign.go).
	tokens *tokens
}

// op runs one request with the per-request timeout and counts its answer.
func (e *Env) op(ctx context.Context, f func(ctx context.Context) (bool, string, error)) (bool, error) {
	octx, cancel := context.WithTimeout(ctx, e.Opts.OpTimeout)
	defer cancel()
	ok, msg, err := f(octx)
	if ctx.Err() != nil && err != nil {
		return false, err // the attack's window ended: not an answer
	}
	e.Outcomes.Add(octx, ok, msg, err)
	return ok, err
}

// Attack is one named attack. Run returns when its bounded work is done
// or ctx ends; the error is a failure of the tool, not of the relay.
type Attack struct {
	Name string
	// What one line says the attack does.
	What string
	Run  func(ctx context.Context, e *Env) error
	// Prepare, when set, is the work a benchmark may run before the
	// measured windows, for a window of length window starting at start
	// (signing tokens ahead); Run works without it, as the soak runs it.
	Prepare func(e *Env, start time.Time, window time.Duration) error
}

// All lists the attacks in the order the benchmark and the soak run them.
func All() []Attack {
	return []Attack{
		{Name: "wide-req", What: "REQ kinds 1..1000 × 7,000 #p values (460 KB), limit 1, again and again", Run: wideReq},
		{Name: "tags-values", What: "4 live subscriptions × 20,000 #t values, then events with 20,000 t tags", Run: tagsValues},
		{Name: "read-flood", What: "64 concurrent POST /count [{kinds:[1]}] and REQ {kinds:[1],limit:1000} on seeded rows", Run: readFlood, Prepare: prepareReadFlood},
		{Name: "big-events", What: "events near the frame limit with large tag arrays, then REQs for them with limit 1000", Run: bigEvents},
		{Name: "slow-reader", What: "a socket with a 4 KiB receive buffer that asks for history and never reads", Run: slowReader},
		{Name: "publish-flood", What: "one key publishing kind 1 as fast as 64 requests in flight allow", Run: publishFlood},
		{Name: "channel-spam", What: "one key creating open channels (kind 9007) as fast as it can", Run: channelSpam},
		{Name: "p-tags", What: "events with 10,000 p tags over the HTTP bridge", Run: pTags},
		{Name: "role-escalation", What: "kind 9000 self-add as owner to another key's open channel, then 9008 delete", Run: roleEscalation},
	}
}

// Names lists the attacks' names.
func Names() []string {
	var out []string
	for _, a := range All() {
		out = append(out, a.Name)
	}
	return out
}

// Lookup returns the attack called name.
func Lookup(name string) (Attack, bool) {
	for _, a := range All() {
		if a.Name == name {
			return a, true
		}
	}
	return Attack{}, false
}

// signed builds and signs an event of sk.
func signed(sk []byte, kind int, content string, tags event.Tags) (event.Event, error) {
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: kind, Content: content, Tags: tags}
	if err := ev.Sign(sk); err != nil {
		return ev, fmt.Errorf("sign kind %d: %w", kind, err)
	}
	return ev, nil
}

// randomHex returns n random 64-character hex values (pubkeys that
// nobody holds).
func randomHex(n int) []string {
	out := make([]string, n)
	var b [32]byte
	for i := range out {
		_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		out[i] = hex.EncodeToString(b[:])
	}
	return out
}

// newUUID returns a random version 4 UUID, a channel id.
func newUUID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
