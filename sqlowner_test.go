package buzz_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqlOwners are the packages whose production code may hold SQL text:
// each owns the tables docs/ARCHITECTURE.md "Table ownership" gives it,
// and every statement on those tables lives in it. Test tools follow,
// each with why it may run statements of its own.
var sqlOwners = map[string]string{
	"internal/store":     "the relay's tables",
	"internal/audit":     "audit_log, audit_outbox, audit_intent_groups",
	"internal/search":    "the full-text search over events (search_tsv) and its statistics",
	"internal/replica":   "replica_heartbeat, and the standby's WAL and catalog probes",
	"internal/pg":        "buzz_schema_migrations, partitions, session settings, advisory locks",
	"internal/pgcluster": "the private cluster's catalog (pg_database)",

	// tools: test helpers and benchmarks that set up or inspect a database
	"internal/dbtest":      "test tool: template databases",
	"internal/standbytest": "test tool: pauses and probes a standby",
	"internal/fixture":     "test tool: starting rows",
	"internal/soak":        "benchmark: counts what a soak run left",
	"internal/windowbench": "benchmark: the plans and settings it reports",
}

// sqlLiteral matches a string literal that starts a SQL statement.
var sqlLiteral = regexp.MustCompile(`^\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+(RECURSIVE\s+)?\w+\s+AS)\b`)

// TestSQLOwners fails on a SQL string literal in the production code of a
// package that owns no table (docs/ARCHITECTURE.md "Table ownership"):
// its statement belongs in the owner, as an entity-first method of
// internal/store for the relay's tables.
func TestSQLOwners(t *testing.T) {
	t.Parallel()
	for _, f := range sqlOutsideOwners(t, ".") {
		t.Errorf("%s: SQL outside its owner: %s", f.pos, f.text)
	}
}

// TestSQLOwnersCatches checks the scan itself on a package of its own:
// a statement outside the owners is found, one in a comment or a test
// file is not.
func TestSQLOwnersCatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("internal/door/door.go", "package door\n\n// SELECT in a comment is prose.\nconst q = `\n\tSELECT id FROM events WHERE community_id = $1`\n")
	write("internal/door/door_test.go", "package door\n\nconst fix = `DELETE FROM events`\n")
	write("internal/store/events.go", "package store\n\nconst q = `INSERT INTO events (id) VALUES ($1)`\n")
	found := sqlOutsideOwners(t, root)
	if len(found) != 1 || !strings.HasPrefix(found[0].pos, filepath.Join("internal", "door", "door.go")) {
		t.Fatalf("found %v, want the one statement of internal/door/door.go", found)
	}
}

type sqlFinding struct{ pos, text string }

// sqlOutsideOwners returns the SQL literals of the non-test .go files
// under root whose package directory is not in sqlOwners.
func sqlOutsideOwners(t *testing.T, root string) []sqlFinding {
	t.Helper()
	var out []sqlFinding
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if _, ok := sqlOwners[filepath.ToSlash(filepath.Dir(rel))]; ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && sqlLiteral.MatchString(s) {
				p := fset.Position(lit.Pos())
				p.Filename = rel
				text := strings.Join(strings.Fields(s), " ")
				out = append(out, sqlFinding{pos: p.String(), text: text[:min(len(text), 80)]})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
