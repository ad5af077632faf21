package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/export"
	"github.com/buzz-relay/buzz/internal/importer"
	"github.com/buzz-relay/buzz/internal/pg"
)

// importOptions are the flags of community import.
type importOptions struct {
	host     string
	file     string
	merge    bool
	quiet    bool
	progress string
}

func communityImportCmd() *cobra.Command {
	var o importOptions
	c := &cobra.Command{
		Use:   "import --host HOST [--file FILE] [--merge] [--quiet] [--progress auto|bar|json|none]",
		Short: "load a community export into a community",
		Long: `community import loads a file written by community export (from --file
FILE, or stdin; gzip is recognised by its first bytes) into the community
of HOST, which community add created and which holds no event unless
--merge is given. The format and what is kept are in docs/OPERATIONS.md
"Importing a community".

It reads the whole file first: a header that is not format
buzz-community-export version 1, an event whose id or signature does not
verify, a trailer whose count or SHA-256 does not match the event lines,
or a file without a trailer is refused, naming the line, and nothing is
imported. It then submits the events in file order through the same
rules as live ones, each as if its author had sent it; the source
relay's signed channel state (39000-39002) is not imported but written
again with BUZZ_RELAY_PRIVATE_KEY, which must be the key of the relay
serving HOST. Events the rules refuse are counted by reason. An import
that stopped midway is continued by running it again with --merge: what
is stored already counts as a duplicate. With BUZZ_AUDIT_ENABLED the
community's audit chain records a community_imported entry with the
source's host, chain head and checkpoint. It prints
  {"host","source_host","events","imported","duplicates",
   "skipped_relay_signed","refused":{reason:count},"first_refused"}
on stdout; progress goes to stderr as for community export.

Exit status: 0 imported, 1 the file is refused, 2 cannot run (usage,
unknown host, a community that is not empty without --merge, no relay
key, database).`,
		Example: `  buzz-relay community add --host new.example
  buzz-relay community import --host new.example --file team.jsonl.gz
  buzz-relay community export --host team.example | buzz-relay community import --host new.example --quiet`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "host", "HOST"); err != nil {
				return err
			}
			if err := checkProgressFlag(c, o.progress); err != nil {
				return err
			}
			err := communityImport(c, o)
			var le *importer.LineError
			if errors.As(err, &le) {
				return exitWith(1, "community import: refused: "+le.Error())
			}
			if err != nil {
				return fmt.Errorf("community import: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.host, "host", "", "host or alias of the target community (required)")
	f.StringVar(&o.file, "file", "", "read FILE instead of stdin (gzip or plain)")
	f.BoolVar(&o.merge, "merge", false, "import into a community that already holds events")
	progressFlags(f, &o.quiet, &o.progress)
	return c
}

// communityImport runs one import (docs/OPERATIONS.md "Importing a community").
func communityImport(c *cobra.Command, o importOptions) error {
	cfg, _, err := loadConfig()
	if err != nil {
		return err
	}
	if cfg.RelayPrivateKey == nil {
		return errors.New("it needs the relay's key to sign the channel state it regenerates: set BUZZ_RELAY_PRIVATE_KEY to the key of the relay serving " + o.host)
	}
	path := o.file
	if path == "" {
		spool, err := spoolStdin(c.InOrStdin())
		if err != nil {
			return err
		}
		defer os.Remove(spool)
		path = spool
	}
	var h export.Header
	var t export.Trailer
	err = withImportFile(path, func(r io.Reader) (err error) {
		h, t, err = importer.Verify(r)
		return err
	})
	if err != nil {
		return err
	}
	tg, err := openTarget(c, cfg, o.host)
	if err != nil {
		return err
	}
	defer tg.db.Close()
	stored, err := importer.Stored(c.Context(), tg.db.Pool, tg.communityID)
	if err != nil {
		return err
	}
	if stored > 0 && !o.merge {
		return fmt.Errorf("community %s already holds %d events: import into an empty community, or pass --merge", tg.host, stored)
	}
	// The events are written one transaction each, in file order, on a
	// pool that does not wait for each commit to reach the disk: the
	// import is re-runnable, so a crash costs a re-run of what the last
	// moments wrote, and FlushCommits makes it all durable at the end, on
	// success or not (docs/OPERATIONS.md "Importing a community").
	fast, err := pg.Open(c.Context(), tg.db.URL, pg.PoolConfig{MaxConns: 4, AsyncCommit: true})
	if err != nil {
		return err
	}
	defer fast.Close()
	stderr := c.ErrOrStderr()
	bar := newProgressOf(stderr, h.Events, "events", progressModeOf(o.quiet, o.progress, stderr))
	p := importer.Params{Pool: fast, CommunityID: tg.communityID, Host: tg.host, RelayKey: cfg.RelayPrivateKey,
		AuditEnabled: cfg.AuditEnabled, Progress: func(done, _ int64) { bar.set(done) }}
	var s importer.Summary
	err = withImportFile(path, func(r io.Reader) (err error) {
		s, err = importer.Run(c.Context(), p, h, t, r)
		return err
	})
	bar.done()
	if ferr := pg.FlushCommits(context.WithoutCancel(c.Context()), tg.db.Pool); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	printJSON(c.OutOrStdout(), s)
	return nil
}

// withImportFile opens path, decompressed when it starts with the gzip
// magic bytes, and runs read on it.
func withImportFile(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read --file: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return &importer.LineError{Line: 1, Msg: "not a gzip stream: " + err.Error()}
		}
		defer zr.Close()
		r = zr
	}
	return read(r)
}

// spoolStdin copies stdin to a temporary file, so that the file can be
// verified whole before anything is imported, and returns its name.
func spoolStdin(in io.Reader) (string, error) {
	f, err := os.CreateTemp("", "buzz-import-*.jsonl")
	if err != nil {
		return "", fmt.Errorf("spool stdin: %w", err)
	}
	if _, err := io.Copy(f, in); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("spool stdin: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("spool stdin: %w", err)
	}
	return f.Name(), nil
}

// progressFlags declares --quiet and --progress, shared by the commands
// that show progress on stderr.
func progressFlags(f *pflag.FlagSet, quiet *bool, progress *string) {
	f.BoolVar(quiet, "quiet", false, "no progress on stderr")
	f.StringVar(progress, "progress", "auto", "progress on stderr: auto (a bar on a terminal), bar, json or none")
}

// checkProgressFlag refuses a --progress other than auto, bar, json or none.
func checkProgressFlag(c *cobra.Command, v string) error {
	switch v {
	case "auto", "bar", "json", "none":
		return nil
	}
	return cli.Usagef("%s: --progress must be auto, bar, json or none, not %q", c.CommandPath(), v)
}

// progressModeOf is the progress display --quiet, --progress and stderr
// ask for.
func progressModeOf(quiet bool, flag string, stderr io.Writer) progressMode {
	switch {
	case quiet || flag == "none":
		return progressOff
	case flag == "json":
		return progressJSON
	case flag == "bar" || isTerminal(stderr):
		return progressBar
	}
	return progressOff
}
