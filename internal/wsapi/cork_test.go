package wsapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/metrics"
)

// TestDrainCorked: a drained queue goes to the socket in one write per
// corkBytes, over a real TCP connection, and the client reads every
// message whole and in order. Written one by one, each message was a write.
func TestDrainCorked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		messages     int
		size         int
		socketWrites int
	}{
		{"SmallMessagesOneWrite", 100, 300, 1},
		{"PastCorkBytesSplits", 200, 1024, 4}, // 64 messages fill corkBytes: 64+64+64+8
		{"OneMessage", 1, 50, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(prometheus.NewRegistry())
			accepted := make(chan *conn, 1)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				cork := &corkWriter{writes: m.WSSocketWrites}
				ws, err := websocket.Accept(&corkingResponse{ResponseWriter: w, cork: cork}, r, nil)
				if err != nil {
					return
				}
				ws.SetReadLimit(1 << 20)
				c := &conn{srv: &Server{m: m}, ws: ws, cork: cork,
					send: sendQueue{max: 1000, maxBytes: 1 << 30, writing: true}}
				accepted <- c // hijacked: the connection outlives the handler
			}))
			t.Cleanup(ts.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), nil)
			require.NoError(t, err)
			cl.SetReadLimit(1 << 20)
			defer cl.CloseNow()
			c := <-accepted
			defer c.ws.CloseNow()

			msg := func(i int) []byte {
				p := fmt.Sprintf("%06d", i)
				return []byte(p + strings.Repeat("x", tc.size-len(p)))
			}
			for i := 1; i < tc.messages; i++ {
				ok, _ := c.send.push(msg(i))
				require.True(t, ok)
			}
			before := testutil.ToFloat64(m.WSSocketWrites)
			// As writeLoop does: a drain, then another while the queue holds more.
			for next, ok := msg(0), true; ok; next, ok = c.send.pop() {
				require.NoError(t, c.drain(next))
			}
			require.Equal(t, float64(tc.socketWrites), testutil.ToFloat64(m.WSSocketWrites)-before)
			require.Equal(t, float64(tc.messages), testutil.ToFloat64(m.WSMessagesSent))
			for i := range tc.messages {
				typ, got, err := cl.Read(ctx)
				require.NoError(t, err)
				require.Equal(t, websocket.MessageText, typ)
				require.Equal(t, string(msg(i)), string(got), i)
			}
		})
	}
}

// TestCloseDuringDrain: a client's close frame that arrives while the
// writer is corked is answered before the connection ends. The library
// writes its answer into the cork and closes the connection at once; the
// client used to see the connection end with no close frame
// ("failed to read frame header: EOF").
func TestCloseDuringDrain(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	accepted := make(chan *websocket.Conn, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cork := &corkWriter{writes: m.WSSocketWrites}
		ws, err := websocket.Accept(&corkingResponse{ResponseWriter: w, cork: cork}, r, nil)
		if err != nil {
			return
		}
		cork.cork() // a drain in progress, never ended
		accepted <- ws
	}))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	require.NoError(t, err)
	ws := <-accepted
	defer ws.CloseNow()
	read := make(chan error, 1)
	go func() { _, _, err := ws.Read(ctx); read <- err }() // the connection's reader
	require.NoError(t, cl.Close(websocket.StatusNormalClosure, ""), "the client got the close frame back")
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(<-read))
}

// TestFramesSentWithTheUpgrade: frames a client sends in the same write as
// its upgrade request, which net/http has already read into its own buffer,
// are read first, in order, from the connection's smaller read buffer; then
// a frame larger than that buffer arrives whole.
func TestFramesSentWithTheUpgrade(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	accepted := make(chan *websocket.Conn, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(&corkingResponse{ResponseWriter: w, cork: &corkWriter{writes: m.WSSocketWrites}}, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(1 << 20)
		accepted <- ws
	}))
	t.Cleanup(ts.Close)
	nc, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))

	first, second, large := `["REQ","a",{}]`, `["CLOSE","a"]`, strings.Repeat("y", 3*readBufferBytes+17)
	var key [16]byte
	req := fmt.Sprintf("GET / HTTP/1.1\r\nHost: relay.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", base64.StdEncoding.EncodeToString(key[:]))
	_, err = nc.Write(append(append([]byte(req), maskedText(first)...), maskedText(second)...)) // one write
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	ws := <-accepted
	defer ws.CloseNow()
	_, err = nc.Write(maskedText(large))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, want := range []string{first, second, large} {
		_, got, err := ws.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
}

// maskedText is one final, masked text frame of payload, as a client sends it.
func maskedText(payload string) []byte {
	b := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	default:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask[:]...)
	for i := range len(payload) {
		b = append(b, payload[i]^mask[i%4])
	}
	return b
}
