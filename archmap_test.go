package buzz_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mapEntry is a package line of the map: two spaces under a "cmd/" or
// "internal/" line, four under its parent for a nested directory.
var mapEntry = regexp.MustCompile(`^(  |    )([a-z0-9][a-z0-9-]*)/(\s|$)`)

// packageMap returns the directories the package map of
// docs/ARCHITECTURE.md lists ("cmd/buzz-relay", "internal/pg/migrations").
func packageMap(t *testing.T, doc string) []string {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		dirs            []string
		inMap, inBlock  bool
		root, lastEntry string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inMap = line == "## Package map"
			continue
		case !inMap:
			continue
		case strings.HasPrefix(line, "```"):
			if inBlock {
				return dirs
			}
			inBlock = true
			continue
		case !inBlock:
			continue
		case line == "cmd/" || line == "internal/":
			root = strings.TrimSuffix(line, "/")
			continue
		}
		m := mapEntry.FindStringSubmatch(line)
		if m == nil || root == "" {
			continue
		}
		if len(m[1]) == 2 {
			lastEntry = root + "/" + m[2]
			dirs = append(dirs, lastEntry)
		} else if lastEntry != "" {
			dirs = append(dirs, lastEntry+"/"+m[2])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s: no package map (a ```text block under \"## Package map\")", doc)
	return nil
}

// TestPackageMap: the package map of docs/ARCHITECTURE.md lists every
// package of the module, and nothing that is not a directory of it.
func TestPackageMap(t *testing.T) {
	listed := packageMap(t, "docs/ARCHITECTURE.md")
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(dir, wd), "/")
		if rel == "" {
			continue // the module root holds only these tests
		}
		if !slices.Contains(listed, rel) {
			t.Errorf("package %s is missing from the package map of docs/ARCHITECTURE.md", rel)
		}
	}
	for _, rel := range listed {
		if st, err := os.Stat(rel); err != nil || !st.IsDir() {
			t.Errorf("the package map of docs/ARCHITECTURE.md lists %s, which is not a directory", rel)
		}
	}
}

// TestPackageMapParse: the parser reads entries and nested entries of the
// map's block only.
func TestPackageMapParse(t *testing.T) {
	doc := t.TempDir() + "/A.md"
	text := "# A\n## Package map\n\n```text\ncmd/\n  tool/   does things  ⇢ x\n" +
		"                continued line/ not an entry\ninternal/\n  pg/     pool\n    migrations/ sql\n" +
		"  e2e/\n```\n\n```text\ninternal/\n  later/\n```\n## Other\n```text\ninternal/\n  other/\n```\n"
	if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := packageMap(t, doc)
	want := []string{"cmd/tool", "internal/pg", "internal/pg/migrations", "internal/e2e"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
