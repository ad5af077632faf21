package buzz_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// TestReadmeTryIt runs the README's "Try it" section as written, so it can
// never drift from what the binaries do: the binaries are built into bin/
// of a fresh directory, the relay runs there as scripts/run.sh runs it (no
// DATABASE_URL: its own private cluster under ./buzz-data), and the
// section's shell blocks run in order in one bash. The only edit is the
// port: localhost:3000 becomes a free one.
func TestReadmeTryIt(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed: the README's commands are bash")
	}
	script := tryItScript(t)

	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", "./cmd/buzz", "./cmd/buzz-relay")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ports := freePorts(t, 3)
	port := ports[0]
	host := "localhost:" + strconv.Itoa(port)
	env := append(os.Environ(),
		"RELAY_URL=ws://"+host,
		"BUZZ_BIND_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"BUZZ_HEALTH_PORT="+strconv.Itoa(ports[1]),
		"BUZZ_METRICS_PORT="+strconv.Itoa(ports[2]),
	)
	env = withoutVars(env, "DATABASE_URL", "BUZZ_DATA_DIR", "BUZZ_PRIVATE_KEY", "BUZZ_RELAY_PRIVATE_KEY", "BUZZ_RELAY_URL")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgcluster.StopDataDir(ctx, pgcluster.Config{DataDir: filepath.Join(dir, "buzz-data")}); err != nil {
			t.Errorf("stop the private cluster: %v", err)
		}
	})
	relay := exec.Command(filepath.Join(dir, "bin", "buzz-relay"))
	relay.Dir, relay.Env = dir, env
	var relayLog bytes.Buffer
	relay.Stdout, relay.Stderr = &relayLog, &relayLog
	require.NoError(t, relay.Start())
	exited := make(chan error, 1)
	go func() { exited <- relay.Wait() }()
	t.Cleanup(func() {
		_ = relay.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = relay.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("relay log:\n%s", relayLog.String())
		}
	})
	waitReady(t, env, exited)

	sh := exec.Command("bash", "-euo", "pipefail", "-c", strings.ReplaceAll(script, "localhost:3000", host))
	sh.Dir = dir
	// The client finds this relay the way the README's reader does: by default.
	sh.Env = append(env, "BUZZ_RELAY_URL=ws://"+host)
	var stdout, stderr bytes.Buffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	err = sh.Run()
	require.NoError(t, err, "the README's Try it failed\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())

	got := stdout.String()
	for _, want := range []string{
		`"npub":"npub1`,                          // whoami
		`"content":"ship the release tomorrow?"`, // messages list shows the edit
		`"original":"ship the release today?"`,
		`"content":"yes, after the last review"`, // the reply, in the thread and the search
		"verified " + host + ": seq 1..",         // audit verify against the checkpoint
		"checkpoint seq ",
	} {
		require.Contains(t, got, want, "stdout:\n%s\nstderr:\n%s", got, stderr.String())
	}
}

// tryItScript returns the shell blocks of the README's "## Try it"
// section, up to the next heading, in order.
func tryItScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(b)
	start := strings.Index(text, "\n## Try it\n")
	require.NotEqual(t, -1, start, `README.md has no "## Try it" section`)
	section := text[start+len("\n## Try it\n"):]
	if end := strings.Index(section, "\n#"); end >= 0 { // the next heading, of any level
		section = section[:end]
	}
	var blocks []string
	for rest := section; ; {
		i := strings.Index(rest, "```sh\n")
		if i < 0 {
			break
		}
		rest = rest[i+len("```sh\n"):]
		j := strings.Index(rest, "```")
		require.NotEqual(t, -1, j, "unterminated code block in Try it")
		blocks = append(blocks, rest[:j])
		rest = rest[j+3:]
	}
	require.NotEmpty(t, blocks, "Try it has no sh block")
	return strings.Join(blocks, "\n")
}

// freePorts returns n distinct loopback ports that were free a moment ago,
// held open together so that none is handed out twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func withoutVars(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// waitReady waits for the relay's readiness endpoint (a first start runs
// initdb, so it may take a few seconds).
func waitReady(t *testing.T, env []string, exited <-chan error) {
	t.Helper()
	var healthPort string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "BUZZ_HEALTH_PORT="); ok {
			healthPort = v
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("the relay exited before it was ready: %v", err)
		default:
		}
		resp, err := http.Get("http://127.0.0.1:" + healthPort + "/_readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the relay was not ready after 2 minutes")
}
