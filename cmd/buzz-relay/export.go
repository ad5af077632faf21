package main

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/export"
)

// exportOptions are the flags of community export.
type exportOptions struct {
	host     string
	output   string
	gzip     bool
	quiet    bool
	progress string
}

func communityExportCmd() *cobra.Command {
	var o exportOptions
	c := &cobra.Command{
		Use:   "export --host HOST [--output FILE] [--gzip] [--quiet] [--progress auto|bar|json|none]",
		Short: "write a community's events as JSON lines",
		Long: `community export writes the community of HOST (or one of its aliases) as
JSON lines on stdout, or into --output FILE: a header line (format,
version, host, relay pubkey, event counts, the audit chain head and a
checkpoint of it signed with BUZZ_RELAY_PRIVATE_KEY), then every stored
event as its author signed it (NIP-01 JSON), in commit order, then a
trailer line with the count and the SHA-256 of the event lines. The
format is in docs/OPERATIONS.md "Exporting a community".

It reads one consistent snapshot while the relay keeps serving, and holds
one batch of events in memory at a time. --gzip, or an --output name
ending in .gz, compresses the output. --output FILE is written under a
temporary name beside it and renamed when complete, so an interrupted
export never replaces FILE; it then prints
  {"host","community_id","output","events","deleted","sha256"}
on stdout.

Progress (events, rate, ETA) goes to stderr: a bar when stderr is a
terminal (--progress auto), or one JSON object per line with --progress
json; --quiet silences it. Without BUZZ_RELAY_PRIVATE_KEY the header says
so and carries no checkpoint.

Exit status: 0 written, 2 cannot run (usage, unknown host, an output that
cannot be written, database).`,
		Example: `  buzz-relay community export --host team.example > team.jsonl
  buzz-relay community export --host team.example --output team.jsonl.gz
  buzz-relay community export --host team.example --gzip --progress json > team.jsonl.gz`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "host", "HOST"); err != nil {
				return err
			}
			if err := checkProgressFlag(c, o.progress); err != nil {
				return err
			}
			if err := communityExport(c, o); err != nil {
				return fmt.Errorf("community export: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.host, "host", "", "host or alias of the community (required)")
	f.StringVar(&o.output, "output", "", "write to FILE instead of stdout (.gz compresses)")
	f.BoolVar(&o.gzip, "gzip", false, "compress the output with gzip")
	progressFlags(f, &o.quiet, &o.progress)
	return c
}

// communityExport runs one export (docs/OPERATIONS.md "Exporting a community").
func communityExport(c *cobra.Command, o exportOptions) error {
	cfg, _, err := loadConfig()
	if err != nil {
		return err
	}
	out, err := openExportOutput(c.OutOrStdout(), o.output, o.gzip || strings.HasSuffix(o.output, ".gz"))
	if err != nil {
		return err
	}
	defer out.abort()
	tg, err := openTarget(c, cfg, o.host)
	if err != nil {
		return err
	}
	defer tg.db.Close()
	stderr := c.ErrOrStderr()
	var bar *progress
	h, t, err := export.Run(c.Context(), export.Params{Pool: tg.db.Pool, CommunityID: tg.communityID, Host: tg.host,
		RelayKey: cfg.RelayPrivateKey, Now: time.Now(),
		Progress: func(done, total int64) {
			if bar == nil {
				bar = newProgressOf(stderr, total, "events", progressModeOf(o.quiet, o.progress, stderr))
			}
			bar.set(done)
		}}, out.w)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		return err
	}
	if err := out.commit(); err != nil {
		return err
	}
	if o.output != "" {
		printJSON(c.OutOrStdout(), map[string]any{"host": h.Host, "community_id": h.CommunityID, "output": o.output,
			"events": t.Events, "deleted": h.Deleted, "sha256": t.SHA256})
	}
	return nil
}

// exportOutput is where an export goes: stdout, or a temporary file
// beside --output that commit renames into place; gzip when asked.
type exportOutput struct {
	w    io.Writer
	gz   *gzip.Writer
	file *os.File // the temporary file; nil for stdout
	path string   // --output
	done bool
}

// openExportOutput checks --output before anything is read: its directory
// must take a new file, and it must not be a directory.
func openExportOutput(stdout io.Writer, path string, compress bool) (*exportOutput, error) {
	out := &exportOutput{w: stdout, path: path}
	if path != "" {
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			return nil, fmt.Errorf("cannot write --output %s: is a directory", path)
		}
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("cannot write --output %s: %w", path, err)
		}
		out.file, out.w = f, f
	}
	if compress {
		out.gz = gzip.NewWriter(out.w)
		out.w = out.gz
	}
	return out, nil
}

// commit finishes the output: the gzip stream closed, the file synced and
// renamed to --output.
func (o *exportOutput) commit() error {
	if o.gz != nil {
		if err := o.gz.Close(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if o.file == nil {
		o.done = true
		return nil
	}
	if err := o.file.Sync(); err != nil {
		return fmt.Errorf("write --output %s: %w", o.path, err)
	}
	if err := o.file.Close(); err != nil {
		return fmt.Errorf("write --output %s: %w", o.path, err)
	}
	if err := os.Rename(o.file.Name(), o.path); err != nil {
		return fmt.Errorf("write --output %s: %w", o.path, err)
	}
	o.done = true
	return nil
}

// abort removes the temporary file of an export that did not complete.
func (o *exportOutput) abort() {
	if o.done || o.file == nil {
		return
	}
	_ = o.file.Close()
	_ = os.Remove(o.file.Name())
}
