package notify_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/notify"
)

// rawListener is a real local TLS server that writes its HTTP/1.1 answer
// by hand, so a test decides the moment the status line goes out. It
// serves one request per connection.
type rawListener struct {
	url   string
	roots *x509.CertPool
}

// newRawListener starts a rawListener. For each request, answer runs once
// the request has been read; it gets the connection and when that
// connection was accepted, and writes the answer itself (or nothing).
func newRawListener(t *testing.T, answer func(conn *tls.Conn, acceptedAt time.Time)) *rawListener {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "listener"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			acceptedAt := time.Now()
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					_ = c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				tc := tls.Server(c, cfg)
				req, err := http.ReadRequest(bufio.NewReader(tc))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				answer(tc, acceptedAt)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return &rawListener{url: "https://" + ln.Addr().String() + "/hook", roots: roots}
}

// answer200 is a complete answer that accepts the notification.
const answer200 = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// holdCPU keeps the calling goroutine running, without blocking, until t.
func holdCPU(t time.Time) {
	for time.Now().Before(t) {
		// busy-wait: blocking would hand the CPU to another goroutine
	}
}

// TestSendAnswerAfterGivingUp: an answer whose status line the listener
// writes only after the request was given up is Retry, not its status.
//
// The client's transport closes the connection when it gives up, but it
// still hands back an answer its read loop parsed before that close took
// effect; which goroutine gets there first is up to the Go scheduler, so no
// real server can force the late answer through on every attempt. Each
// attempt therefore provokes the race: the listener writes the answer right
// after the give-up, then holds its CPU for a moment (holdCPU), which tends
// to leave the client goroutine that would close the connection waiting
// while the read loop reads the answer. On a 2-CPU machine, with or without
// -race, typically one attempt in two to six gets the answer back through
// the transport, which Send reports as "HTTP 200 arrived after …"; each
// subtest stops after a few of those. Every attempt must be Retry: the
// answer began to arrive after the give-up. Without the late-answer check
// Send returns Accepted on the first attempt that wins the race; there each
// subtest failed in all of 30 runs (10 of them under -race).
func TestSendAnswerAfterGivingUp(t *testing.T) {
	t.Parallel()
	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		const hold = 2 * time.Millisecond
		var current atomic.Pointer[context.CancelFunc] // the attempt's cancel
		l := newRawListener(t, func(conn *tls.Conn, _ time.Time) {
			(*current.Load())() // the request is given up before the answer is written
			_, _ = conn.Write([]byte(answer200))
			holdCPU(time.Now().Add(hold))
		})
		c := notify.NewClient(time.Minute, event.GenerateKey(), notify.WithRootCAs(l.roots))
		t.Cleanup(c.CloseIdleConnections)
		requireLateIsRetry(t, "context canceled", func() notify.Outcome {
			ctx, cancel := context.WithCancel(context.Background())
			current.Store(&cancel)
			defer cancel()
			return c.Send(ctx, l.url, golden)
		})
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		const timeout, hold = 20 * time.Millisecond, 10 * time.Millisecond
		l := newRawListener(t, func(conn *tls.Conn, acceptedAt time.Time) {
			// Send starts its timeout before it dials, and each attempt has
			// its own Client, so the connection was dialed by this request
			// and its timeout has passed at acceptedAt+timeout. Sleep most
			// of the way, then hold the CPU so the answer goes out right
			// after that moment.
			at := acceptedAt.Add(timeout)
			time.Sleep(time.Until(at) - hold)
			holdCPU(at)
			_, _ = conn.Write([]byte(answer200))
			holdCPU(time.Now().Add(hold))
		})
		key := event.GenerateKey()
		requireLateIsRetry(t, "Client.Timeout exceeded", func() notify.Outcome {
			// A fresh Client: a connection an earlier attempt dialed too
			// late for itself must not carry this one's request.
			c := notify.NewClient(timeout, key, notify.WithRootCAs(l.roots))
			t.Cleanup(c.CloseIdleConnections)
			return c.Send(context.Background(), l.url, golden)
		})
	})
}

// requireLateIsRetry runs attempt until wantLate answers came back through
// the transport after the request was given up, or attempts ran out. Every
// outcome must be Retry without a status: the late answer's ("HTTP 200
// arrived after <why>") or the transport's own error naming why.
func requireLateIsRetry(t *testing.T, why string, attempt func() notify.Outcome) {
	t.Helper()
	// attempts bounds the run when the race is rarely won; wantLate answers
	// that came back through the transport are enough.
	const attempts, wantLate = 100, 3
	late, i := 0, 0
	for ; i < attempts && late < wantLate; i++ {
		out := attempt()
		require.Equal(t, notify.Retry, out.Kind, "attempt %d: %+v", i, out)
		require.Zero(t, out.Status, "attempt %d: %+v", i, out)
		if strings.HasPrefix(out.Reason, "HTTP ") {
			require.Equal(t, "HTTP 200 arrived after "+why, out.Reason)
			late++
		} else {
			require.Contains(t, out.Reason, why)
		}
	}
	t.Logf("%d of %d attempts got the late answer back through the transport", late, i)
}
