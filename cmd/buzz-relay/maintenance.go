package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/search"
)

// maintenanceCmd runs out-of-band maintenance jobs. The only one today is
// search-kinds (20-search.md §9.2): show or change the kinds whose content
// is searchable. Refusals exit 1; a command that cannot run exits 2.
func maintenanceCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "search-kinds" {
		fmt.Fprintln(os.Stderr, "usage: buzz-relay maintenance search-kinds --show [--json] | --set KINDS [--yes]")
		return 2
	}
	fs := flag.NewFlagSet("search-kinds", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	show := fs.Bool("show", false, "print the stored expression, effective policy, sizes and headroom")
	asJSON := fs.Bool("json", false, "with --show: one JSON object")
	set := fs.String("set", "", "comma-separated kinds to make searchable")
	yes := fs.Bool("yes", false, "with --set: apply (every read and write of events blocks until it commits)")
	if err := fs.Parse(args[1:]); err != nil || *show == (*set != "") {
		fmt.Fprintln(os.Stderr, "usage: buzz-relay maintenance search-kinds --show [--json] | --set KINDS [--yes]")
		return 2
	}
	var kinds []int
	if *set != "" {
		var err error
		if kinds, err = search.ParseKinds(*set); err != nil {
			fmt.Fprintln(os.Stderr, err.Error())
			return 1
		}
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateCheck, true)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	m := &maint{cfg: cfg, db: db, out: os.Stdout}
	if *show {
		return m.show(ctx, *asJSON)
	}
	return m.set(ctx, kinds, *yes)
}

type maint struct {
	cfg config.Config
	db  *app.Database
	out io.Writer
}

func (m *maint) printf(format string, args ...any) { fmt.Fprintf(m.out, format, args...) }

// state is what --show reports.
type state struct {
	Expression string                 `json:"expression"`
	Searchable []int                  `json:"searchable_kinds"`
	Policy     string                 `json:"policy"`
	Violations []int                  `json:"privacy_violations,omitempty"`
	Partitions []search.PartitionSize `json:"partitions"`
	Total      search.PartitionSize   `json:"total"`
	Headroom   int64                  `json:"headroom_bytes"`
	FreeSpace  *int64                 `json:"free_space_bytes"`
	Migrations string                 `json:"migrations"`
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
	if st.Partitions, st.Total, err = search.Sizes(ctx, m.db.Pool); err != nil {
		return nil, err
	}
	st.Headroom = search.Headroom(st.Total)
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

func (m *maint) show(ctx context.Context, asJSON bool) int {
	st, err := m.read(ctx)
	if err != nil {
		return fail(err)
	}
	if asJSON {
		printJSON(st)
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
		fmt.Fprintf(os.Stderr, "PRIVACY VIOLATION: kind %d is searchable\n", k)
	}
	if len(st.Violations) > 0 {
		return 1
	}
	return 0
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

func (m *maint) set(ctx context.Context, kinds []int, yes bool) int {
	st, err := m.read(ctx)
	if err != nil {
		return fail(err)
	}
	if st.Migrations != "current" {
		fmt.Fprintf(os.Stderr, "migrations are not current (%s): run \"buzz-relay migrate\" with this binary first; nothing changed\n", st.Migrations)
		return 1
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
		return 0
	}
	m.printSizes(st)
	m.printf("WARNING: every read and write of events blocks until the command commits; drain or stop relay traffic first\n")
	if !yes {
		m.printf("nothing changed: add --yes to apply\n")
		return 0
	}
	err = search.Rewrite(ctx, search.RewriteConfig{Pool: m.db.Pool, Kinds: kinds, ProgressFunc: func(line string) {
		m.printf("%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
	}})
	if errors.Is(err, search.ErrLockTimeout) {
		fmt.Fprintln(os.Stderr, err.Error())
		return 1
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "search-kinds: %v; nothing changed\n", err)
		return 1
	}
	after, err := m.read(ctx)
	if err != nil {
		return fail(err)
	}
	m.printSizes(after)
	m.printf("searchable kinds: %s\n", kindList(after.Searchable))
	m.printf("effective policy: %s\n", after.Policy)
	return 0
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
