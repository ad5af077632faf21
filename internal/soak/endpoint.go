package soak

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Endpoint modes.
const (
	answerOK      = iota // 204
	answer503            // 503, a retryable failure
	answerTimeout        // no answer until the relay gives up
)

// endpoint is the operator listener's HTTPS endpoint: a real TLS server on
// loopback with a self-signed certificate, which records every
// notification it accepted (answered 2xx after reading it whole).
type endpoint struct {
	srv      *http.Server
	url      string // https://127.0.0.1:port/hook
	certFile string

	mu        sync.Mutex
	mode      int
	delivered map[[2]string]int // (target, event id) → times accepted
	refused   int               // notifications answered 503 or left to time out
}

func startEndpoint(dir string) (*endpoint, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("endpoint key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "buzz-soak listener"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("endpoint certificate: %w", err)
	}
	e := &endpoint{certFile: dir + "/listener.pem", delivered: map[[2]string]int{}}
	if err := os.WriteFile(e.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, fmt.Errorf("write endpoint certificate: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("endpoint listen: %w", err)
	}
	e.url = "https://" + l.Addr().String() + "/hook"
	e.srv = &http.Server{
		Handler:           http.HandlerFunc(e.serve),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		ErrorLog:          log.New(io.Discard, "", 0), // handshakes cut by a killed relay are expected
	}
	go func() { _ = e.srv.ServeTLS(l, "", "") }()
	return e, nil
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	e.mu.Lock()
	mode := e.mode
	e.mu.Unlock()
	switch mode {
	case answer503:
		e.count()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case answerTimeout:
		e.count()
		<-r.Context().Done() // the relay gives up first
		return
	}
	var n struct {
		Pubkey  string `json:"pubkey"`
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(body, &n) != nil || n.Pubkey == "" || n.EventID == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.delivered[[2]string{n.Pubkey, n.EventID}]++
	e.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (e *endpoint) count() {
	e.mu.Lock()
	e.refused++
	e.mu.Unlock()
}

func (e *endpoint) setMode(m int) {
	e.mu.Lock()
	e.mode = m
	e.mu.Unlock()
}

// got reports whether the notification of event id for target was accepted.
func (e *endpoint) got(target, id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivered[[2]string{target, id}] > 0
}

func (e *endpoint) close() { _ = e.srv.Close() }

// refusedCount is how many notifications were answered 503 or left to time out.
func (e *endpoint) refusedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refused
}
