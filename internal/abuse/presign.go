package abuse

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
)

// maxPresignWindow is the longest attack window tokens signed ahead can
// cover: the relay accepts a NIP-98 created_at within 60 s of its clock,
// and the tokens are dated at the window's middle.
const maxPresignWindow = 110 * time.Second

// tokens are NIP-98 headers signed before an attack's window for one
// request (POST path with body), handed out once each: on the benchmark's
// one machine, signing thousands of tokens inside the window would be the
// tool's load on the honest clients, which an attacker on another machine
// does not impose. Past the last one, or for another request, the client
// signs as it goes.
type tokens struct {
	path string
	body []byte
	mu   sync.Mutex
	left []string
}

// presign signs n tokens for POST path with body as h would send it,
// valid through a window of length window that starts at start; nil when
// the window is too long for one date to cover it.
func presign(h *client.HTTP, path string, body []byte, n int, start time.Time, window time.Duration) (*tokens, error) {
	if window > maxPresignWindow {
		return nil, nil
	}
	at := start.Add(window / 2)
	t := &tokens{path: path, body: body, left: make([]string, 0, n)}
	for range n {
		tok, err := h.Token(path, body, at)
		if err != nil {
			return nil, err
		}
		t.left = append(t.left, tok)
	}
	return t, nil
}

// authorize is client.HTTP's Authorize: the next token for its request,
// "" (sign now) for any other or when none is left.
func (t *tokens) authorize(method, url string, body []byte) string {
	if t == nil || method != http.MethodPost || !strings.HasSuffix(url, t.path) || !bytes.Equal(body, t.body) {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.left) == 0 {
		return ""
	}
	tok := t.left[len(t.left)-1]
	t.left = t.left[:len(t.left)-1]
	return tok
}
