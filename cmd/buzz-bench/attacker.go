package main

// The abuse phase's attacker runs in a process of its own: this binary
// again, as the hidden subcommand "abuse-attacker". An attacker on another
// machine shares nothing with the honest clients but the relay; in the
// same process it would also share their Go scheduler and garbage
// collector, and its bursts (dialling 64 sockets at once, reading
// thousand-event answers) would show in the honest latencies as the tool's
// own pauses. A second process still shares the machine's cores, which the
// figures' CPU lines show (docs/PERFORMANCE.md "Abuse benchmark").
//
// The parent writes one attackerSpec line on the child's stdin; the child
// runs the attack's Prepare, writes {"ready":true}, waits for a "go" line,
// runs the attack for the window and writes one attackerResult line.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/abuse"
	"github.com/buzz-relay/buzz/internal/event"
)

// attackerCommand is the name of the hidden subcommand.
const attackerCommand = "abuse-attacker"

// attackerSpec is what the abuse phase hands its attacker process.
type attackerSpec struct {
	Attack string        `json:"attack"`
	URL    string        `json:"url"`
	Host   string        `json:"host"`
	Opts   abuse.Options `json:"opts"`
	Window time.Duration `json:"window"`
}

// attackerResult is what the attacker process answers after its window.
type attackerResult struct {
	Ready  bool           `json:"ready,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
	First  []string       `json:"first,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// newAttackerCommand is "buzz-bench abuse-attacker", which only the abuse
// phase runs.
func newAttackerCommand() *cobra.Command {
	return &cobra.Command{
		Use:     attackerCommand,
		Short:   "one attack of the abuse phase, in a process of its own (run by abuse)",
		Long:    `abuse-attacker reads one attack's spec on stdin and runs it when told; the abuse phase starts it.`,
		Example: `  (the abuse phase runs it; it is not meant to be run by hand)`,
		Hidden:  true,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAttacker(c.Context(), c.InOrStdin(), c.OutOrStdout())
		},
	}
}

// runAttacker is the child's side.
func runAttacker(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	var spec attackerSpec
	if !in.Scan() {
		return errf("abuse-attacker: no spec on stdin")
	}
	if err := json.Unmarshal(in.Bytes(), &spec); err != nil {
		return errf("abuse-attacker: spec: %v", err)
	}
	at, ok := abuse.Lookup(spec.Attack)
	if !ok || spec.Window <= 0 {
		return errf("abuse-attacker: unknown attack %q or no window", spec.Attack)
	}
	env := &abuse.Env{Target: abuse.Target{URL: spec.URL, Host: spec.Host}, Key: event.GenerateKey(),
		Opts: spec.Opts, Outcomes: abuse.NewOutcomes()}
	if at.Prepare != nil { // before the parent's baseline window: its work is in neither
		if err := at.Prepare(env, time.Now().Add(spec.Window), spec.Window); err != nil {
			return errf("prepare %s: %v", at.Name, err)
		}
	}
	writeLine(stdout, attackerResult{Ready: true})
	if !in.Scan() || in.Text() != "go" {
		return errf("abuse-attacker: no go")
	}
	actx, cancel := context.WithTimeout(ctx, spec.Window)
	defer cancel()
	res := attackerResult{}
	if err := at.Run(actx, env); err != nil {
		res.Error = err.Error()
	}
	res.Counts, res.First = env.Outcomes.Counts(), env.Outcomes.First()
	writeLine(stdout, res)
	return nil
}

// attacker is the parent's handle on one attacker process.
type attacker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startAttacker starts this binary as the attacker of spec and returns
// once the attack is prepared.
func startAttacker(ctx context.Context, spec attackerSpec) (*attacker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("abuse: attacker process: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, attackerCommand)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("abuse: attacker process: %w", err)
	}
	a := &attacker{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	a.out.Buffer(nil, 1<<20)
	b, _ := json.Marshal(spec)
	if _, err := stdin.Write(append(b, '\n')); err != nil {
		return nil, a.fail(err)
	}
	r, err := a.read()
	if err == nil && !r.Ready {
		err = errors.New("its first line is not the ready line")
	}
	if err != nil {
		return nil, a.fail(fmt.Errorf("not ready: %w", err))
	}
	return a, nil
}

// begin starts the attack.
func (a *attacker) begin() error {
	_, err := io.WriteString(a.stdin, "go\n")
	return err
}

// finish waits for the attack's answers and for the process to end.
func (a *attacker) finish() (attackerResult, error) {
	r, err := a.read()
	_ = a.stdin.Close()
	if werr := a.cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("abuse: attacker process: %w", werr)
	}
	return r, err
}

func (a *attacker) read() (attackerResult, error) {
	var r attackerResult
	if !a.out.Scan() {
		if err := a.out.Err(); err != nil {
			return r, err
		}
		return r, io.ErrUnexpectedEOF
	}
	return r, json.Unmarshal(a.out.Bytes(), &r)
}

// fail ends the process after a failed start and returns err.
func (a *attacker) fail(err error) error {
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
	return fmt.Errorf("abuse: attacker process: %w", err)
}
