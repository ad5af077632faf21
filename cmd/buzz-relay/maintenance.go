package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/search"
	"github.com/buzz-relay/buzz/internal/store"
)

// maintenanceCmd is the `maintenance` group: out-of-band jobs an operator
// runs by hand: search-kinds (docs/PROTOCOL.md §12.10), read-state (docs/PROTOCOL.md §14.7) and
// operator-listeners (docs/PROTOCOL.md §15.10).
func maintenanceCmd() *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "maintenance",
		Short: "out-of-band maintenance jobs: operator-listeners, read-state, search-kinds",
		Long: `maintenance holds jobs an operator runs by hand, outside the relay's own
periodic jobs. search-kinds shows or changes the kinds whose content is
searchable (NIP-50). read-state reports NIP-RS read-state retention and
the space its purge freed. operator-listeners reports the registrations
and queued mention notifications of operator listeners, and forgets a
retired listener's.`,
		Example: `  buzz-relay maintenance search-kinds --show
  buzz-relay maintenance search-kinds --set 0,9,40002,40003,45001,45003 --yes
  buzz-relay maintenance read-state --report --text
  buzz-relay maintenance operator-listeners --report`,
	}, searchKindsCmd(), readStateCmd(), operatorListenersCmd())
}

// searchKindsOptions are the flags of maintenance search-kinds.
type searchKindsOptions struct {
	show, json, yes bool
	set             string
}

func searchKindsCmd() *cobra.Command {
	var o searchKindsOptions
	c := &cobra.Command{
		Use:   "search-kinds --show [--json] | --set KINDS [--yes]",
		Short: "show or change which kinds are searchable",
		Long: `search-kinds --show prints the stored search expression, the searchable
kinds it yields and their policy (fresh, "upgraded, maintenance not run"
or custom), the size of every partition of events, and the headroom a
rewrite needs; --json prints the same as one JSON object. A
privacy-excluded kind that is searchable is reported as a PRIVACY
VIOLATION on stderr, exit 1.

search-kinds --set KINDS prints the plan for making exactly KINDS
searchable, and with --yes applies it: one transaction that rewrites the
events table and rebuilds its search index. Every read and write of
events blocks until it commits, so drain or stop relay traffic first. It
refuses (exit 1, nothing changed) privacy-excluded and ephemeral kinds,
pending migrations, and a lock not obtained within 5s.

Exit status: 0 done (or nothing to do), 1 refused, 2 cannot run.`,
		Example: `  buzz-relay maintenance search-kinds --show
  buzz-relay maintenance search-kinds --show --json | jq .searchable_kinds
  buzz-relay maintenance search-kinds --set 0,9,40002,40003,45001,45003
  buzz-relay maintenance search-kinds --set 0,9,40002,40003,45001,45003 --yes`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return searchKinds(c, o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.show, "show", false, "print the stored expression, effective policy, sizes and headroom")
	f.BoolVar(&o.json, "json", false, "with --show: print one JSON object")
	f.StringVar(&o.set, "set", "", "comma-separated kinds to make searchable, e.g. 0,9,40002,40003,45001,45003")
	f.BoolVar(&o.yes, "yes", false, "with --set: apply (every read and write of events blocks until it commits)")
	return c
}

// searchKinds runs --show or --set. Refusals exit 1; a command that cannot
// run exits 2.
func searchKinds(c *cobra.Command, o searchKindsOptions) error {
	if o.show == (o.set != "") {
		return cli.Usagef("%s: give either --show [--json] or --set KINDS [--yes] (see: %s --help)", c.CommandPath(), c.CommandPath())
	}
	var kinds []int
	if o.set != "" {
		var err error
		if kinds, err = search.ParseKinds(o.set); err != nil {
			return exitWith(1, err.Error())
		}
	}
	cfg, db, err := openDatabase(c, pg.MigrateCheck, true)
	if err != nil {
		return err
	}
	defer db.Close()
	m := &maint{cfg: cfg, db: db, out: c.OutOrStdout(), errOut: c.ErrOrStderr()}
	if o.show {
		return m.show(c.Context(), o.json)
	}
	return m.set(c.Context(), kinds, o.yes)
}

// maint is one search-kinds run on an open database.
type maint struct {
	cfg    config.Config
	db     *app.Database
	out    io.Writer
	errOut io.Writer
}

func (m *maint) printf(format string, args ...any) { fmt.Fprintf(m.out, format, args...) }

// state is what --show reports.
type state struct {
	Expression string          `json:"expression"`
	Searchable []int           `json:"searchable_kinds"`
	Policy     string          `json:"policy"`
	Violations []int           `json:"privacy_violations,omitempty"`
	Partitions []partitionSize `json:"partitions"`
	Total      partitionSize   `json:"total"`
	Headroom   int64           `json:"headroom_bytes"`
	FreeSpace  *int64          `json:"free_space_bytes"`
	Migrations string          `json:"migrations"`
}

// partitionSize is search.PartitionSize with the snake_case keys of every
// other operator output, sizes in bytes.
type partitionSize struct {
	Name         string `json:"name"`
	Heap         int64  `json:"heap_bytes"`
	TOAST        int64  `json:"toast_bytes"`
	SearchGIN    int64  `json:"search_gin_bytes"`
	OtherIndexes int64  `json:"other_indexes_bytes"`
	Total        int64  `json:"total_bytes"`
}

func (m *maint) read(ctx context.Context) (*state, error) {
	st := &state{}
	var err error
	if st.Migrations, err = migrationsState(ctx, m.db); err != nil {
		return nil, err
	}
	if st.Expression, err = search.StoredExpression(ctx, m.db.Pool); err != nil {
		return nil, err
	}
	if st.Searchable, err = search.EffectiveKinds(ctx, m.db.Pool, st.Expression, search.ProbeKinds()); err != nil {
		return nil, err
	}
	st.Policy = search.Classify(st.Searchable)
	st.Violations = search.PrivacyViolations(st.Searchable)
	parts, total, err := search.Sizes(ctx, m.db.Pool)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		st.Partitions = append(st.Partitions, partitionSize(p))
	}
	st.Total = partitionSize(total)
	st.Headroom = search.Headroom(total)
	if m.cfg.DatabaseURL == "" {
		var fs syscall.Statfs_t
		if syscall.Statfs(m.cfg.DataDir, &fs) == nil {
			free := int64(fs.Bavail) * int64(fs.Bsize)
			st.FreeSpace = &free
		}
	}
	return st, nil
}

// migrationsState is "current", or a warning naming pending or unknown files.
func migrationsState(ctx context.Context, db *app.Database) (string, error) {
	states, err := pg.MigrationStatus(ctx, db.Pool)
	if err != nil {
		return "", err
	}
	known := map[int]bool{}
	for _, mg := range pg.Migrations() {
		known[mg.Version] = true
	}
	var pending, unknown []string
	for _, s := range states {
		switch {
		case !known[s.Version]:
			unknown = append(unknown, s.Name)
		case s.AppliedAt == nil:
			pending = append(pending, s.Name)
		}
	}
	var w []string
	if len(pending) > 0 {
		w = append(w, "pending: "+strings.Join(pending, ", "))
	}
	if len(unknown) > 0 {
		w = append(w, "unknown to this binary: "+strings.Join(unknown, ", "))
	}
	if len(w) == 0 {
		return "current", nil
	}
	return strings.Join(w, "; "), nil
}

// show prints the state as text or one JSON object; a privacy violation
// is printed on stderr and exits 1.
func (m *maint) show(ctx context.Context, asJSON bool) error {
	st, err := m.read(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		printJSON(m.out, st)
	} else {
		if st.Migrations != "current" {
			m.printf("WARNING: migrations %s\n", st.Migrations)
		}
		m.printf("stored expression: %s\n", st.Expression)
		m.printf("searchable kinds: %s\n", kindList(st.Searchable))
		m.printf("effective policy: %s\n", st.Policy)
		m.printSizes(st)
	}
	for _, k := range st.Violations {
		fmt.Fprintf(m.errOut, "PRIVACY VIOLATION: kind %d is searchable\n", k)
	}
	if len(st.Violations) > 0 {
		return exitWith(1, "")
	}
	return nil
}

func (m *maint) printSizes(st *state) {
	m.printf("%-22s %10s %10s %10s %14s %10s\n", "partition", "heap", "toast", "search_gin", "other_indexes", "total")
	for _, p := range append(slices.Clone(st.Partitions), st.Total) {
		m.printf("%-22s %10s %10s %10s %14s %10s\n", p.Name, size(p.Heap), size(p.TOAST), size(p.SearchGIN), size(p.OtherIndexes), size(p.Total))
	}
	m.printf("headroom for a rewrite: about %s (2 × heap, TOAST and every index of events)\n", size(st.Headroom))
	if st.FreeSpace != nil {
		m.printf("free space: %s on %s\n", size(*st.FreeSpace), m.cfg.DataDir)
	} else {
		m.printf("free space: unknown (check the database volume)\n")
	}
}

// set prints the plan for kinds and, with yes, applies it. Every refusal
// exits 1 with nothing changed.
func (m *maint) set(ctx context.Context, kinds []int, yes bool) error {
	st, err := m.read(ctx)
	if err != nil {
		return err
	}
	if st.Migrations != "current" {
		return exitWith(1, fmt.Sprintf("migrations are not current (%s): run \"buzz-relay migrate\" with this binary first; nothing changed", st.Migrations))
	}
	var added, removed []int
	for _, k := range kinds {
		if !slices.Contains(st.Searchable, k) {
			added = append(added, k)
		}
	}
	for _, k := range st.Searchable {
		if !slices.Contains(kinds, k) {
			removed = append(removed, k)
		}
	}
	m.printf("current kinds: %s (%s)\n", kindList(st.Searchable), st.Policy)
	m.printf("target kinds:  %s\n", kindList(kinds))
	m.printf("added: %s; removed: %s\n", kindList(added), kindList(removed))
	if len(added) == 0 && len(removed) == 0 {
		m.printf("nothing to do\n")
		return nil
	}
	m.printSizes(st)
	m.printf("WARNING: every read and write of events blocks until the command commits; drain or stop relay traffic first\n")
	if !yes {
		m.printf("nothing changed: add --yes to apply\n")
		return nil
	}
	err = search.Rewrite(ctx, search.RewriteConfig{Pool: m.db.Pool, Kinds: kinds, ProgressFunc: func(line string) {
		m.printf("%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
	}})
	if errors.Is(err, search.ErrLockTimeout) {
		return exitWith(1, err.Error())
	}
	if err != nil {
		return exitWith(1, fmt.Sprintf("search-kinds: %v; nothing changed", err))
	}
	// Running relays drop every hot window and cached search page: their
	// pages were ranked over the old column (docs/OPERATIONS.md "Search cache").
	if err := store.New(m.db.Pool).NotifyHotWindow(ctx, store.HotWindowAll); err != nil {
		m.printf("WARNING: %v; restart the relays so that no search page ranked before the change is served again\n", err)
	}
	after, err := m.read(ctx)
	if err != nil {
		return err
	}
	m.printSizes(after)
	m.printf("searchable kinds: %s\n", kindList(after.Searchable))
	m.printf("effective policy: %s\n", after.Policy)
	return nil
}

func kindList(ks []int) string {
	if len(ks) == 0 {
		return "none"
	}
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprint(k)
	}
	return strings.Join(s, ",")
}

func size(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
