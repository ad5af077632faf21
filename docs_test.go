package buzz_test

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The repository documents its own contract: code, scripts and documents
// cite docs/NAME.md §N, never a document the repository does not hold.
//
// A section number is the number that opens a Markdown heading, outside
// fenced code blocks: "## 7. Wire protocol" is §7 and "### 7.5 REQ" is
// §7.5 (the dot after the last number is optional). A citation is
// "docs/NAME.md" followed by a list of sections joined by ", ", " and ",
// " or " or a dash: "docs/PROTOCOL.md §2.5, §4.1" and
// "docs/PROTOCOL.md §16.1–§16.5" cite two sections each, of the one file.
//
// SQL migrations are not scanned: an applied file never changes (its
// checksum is recorded), so its comments stay as they were written.

var (
	// sectionHeading is a heading that opens with a section number.
	sectionHeading = regexp.MustCompile(`^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s`)
	// citation is one docs citation with its optional list of sections.
	citation = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)((?:\s?§\s?\d+(?:\.\d+)*)(?:(?:,\s*|\s+and\s+|\s+or\s+|\s*[–-]\s*)§\s?\d+(?:\.\d+)*)*)?`)
	// citedSection is one section number inside a citation's list.
	citedSection = regexp.MustCompile(`§\s?(\d+(?:\.\d+)*)`)
	// outside are the ways of citing the specification documents the
	// repository does not contain: "spec 10 §7.5", "20-search.md §3.4",
	// "10 §7.5", "[10] §7.5".
	outside = regexp.MustCompile(`(?i)\bspec [0-9]{2}\b|\b[1-8]0-(?:relay-core|search|audit|read-state|windows|operator-listeners|scale-out|performance)\b|\b[1-8]0 §|\[[1-8]0\] §`)
)

// docSections returns the section numbers of a Markdown document.
func docSections(markdown string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for line := range strings.Lines(markdown) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if m := sectionHeading.FindStringSubmatch(line); m != nil && !fenced {
			out[m[1]] = true
		}
	}
	return out
}

// citationProblems returns what is wrong with the citations of one file:
// a cited document or section that docs does not hold (docs maps a file
// name under docs/ to its sections), a citation of the outside
// specification, and, in code (Go, shell, Makefile), a "§" that belongs to
// no docs citation: a section of which document?
func citationProblems(name, text string, code bool, docs map[string]map[string]bool) []string {
	var out []string
	lineNo := 0
	for line := range strings.Lines(text) {
		lineNo++
		where := name + ":" + strconv.Itoa(lineNo)
		if m := outside.FindString(line); m != "" {
			out = append(out, where+": cites the outside specification ("+m+"): cite docs/ instead")
		}
		for _, m := range citation.FindAllStringSubmatch(line, -1) {
			secs, ok := docs[m[1]]
			if !ok {
				out = append(out, where+": docs/"+m[1]+" does not exist")
				continue
			}
			for _, s := range citedSection.FindAllStringSubmatch(m[2], -1) {
				if !secs[s[1]] {
					out = append(out, where+": docs/"+m[1]+" has no §"+s[1])
				}
			}
		}
		if code && strings.Contains(citation.ReplaceAllString(line, ""), "§") {
			out = append(out, where+": a § outside a docs/NAME.md citation")
		}
	}
	return out
}

// TestDocCitations checks every tracked Go, shell, Makefile and Markdown
// file (docs_test.go aside: its samples are wrong on purpose).
func TestDocCitations(t *testing.T) {
	t.Parallel()
	names, err := os.ReadDir("docs")
	require.NoError(t, err)
	docs := map[string]map[string]bool{}
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".md") {
			b, err := os.ReadFile(path.Join("docs", e.Name()))
			require.NoError(t, err)
			docs[e.Name()] = docSections(string(b))
		}
	}
	require.NotEmpty(t, docs["PROTOCOL.md"], "docs/PROTOCOL.md has numbered sections")

	listed, err := exec.Command("git", "ls-files", "-co", "--exclude-standard").Output()
	require.NoError(t, err)
	var problems []string
	scanned := 0
	for _, f := range strings.Fields(string(listed)) {
		base := path.Base(f)
		code := strings.HasSuffix(f, ".go") || strings.HasSuffix(f, ".sh") || base == "Makefile"
		if f == "docs_test.go" || (!code && !strings.HasSuffix(f, ".md")) {
			continue
		}
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		require.NoError(t, err)
		scanned++
		problems = append(problems, citationProblems(f, string(b), code, docs)...)
	}
	require.Greater(t, scanned, 100, "the scan found the repository's files")
	require.Empty(t, problems, "citations that point nowhere:\n%s", strings.Join(problems, "\n"))
}

// TestCitationProblems shows what the scan accepts and what it refuses.
func TestCitationProblems(t *testing.T) {
	t.Parallel()
	docs := map[string]map[string]bool{
		"PROTOCOL.md": docSections("# Title\n## 1. Writes\n### 1.2 Steps\n```\n## 9. in a fence\n```\n## 16. Scale\n### 16.1 Topics\n#### 16.1.2 Deep\n### 16.5 Presence\n"),
		"NIP-CW.md":   docSections("## 3. Channel mode\n### 3.3 Aux\n"),
	}
	require.Equal(t, map[string]bool{"1": true, "1.2": true, "16": true, "16.1": true, "16.1.2": true, "16.5": true}, docs["PROTOCOL.md"])

	tests := []struct {
		name string
		text string
		code bool
		want []string
	}{
		{"one section", "// Limits (docs/PROTOCOL.md §1.2).", true, nil},
		{"top section, full stop after", "// See docs/PROTOCOL.md §16.", true, nil},
		{"list and range", "// docs/PROTOCOL.md §1, §1.2 and §16.1–§16.5; docs/NIP-CW.md §3.3", true, nil},
		{"deep section", "// docs/PROTOCOL.md §16.1.2", true, nil},
		{"document only", "// see docs/NIP-CW.md", true, nil},
		{"missing section", "// docs/PROTOCOL.md §1.3", true, []string{"f:1: docs/PROTOCOL.md has no §1.3"}},
		{"missing in a list", "// docs/PROTOCOL.md §1.2, §7", true, []string{"f:1: docs/PROTOCOL.md has no §7"}},
		{"heading inside a fence", "// docs/PROTOCOL.md §9", true, []string{"f:1: docs/PROTOCOL.md has no §9"}},
		{"missing document", "// docs/SPEC.md §1", true, []string{"f:1: docs/SPEC.md does not exist"}},
		{"spec citation", "x\n// Limits of the parser (spec 10 §7.11).", true, []string{
			"f:2: cites the outside specification (spec 10): cite docs/ instead",
			"f:2: a § outside a docs/NAME.md citation"}},
		{"spec citation in a document", "as Spec 40 requires", false, []string{
			"f:1: cites the outside specification (Spec 40): cite docs/ instead"}},
		{"spec file name", "see 20-search.md for the ranking", false, []string{
			"f:1: cites the outside specification (20-search): cite docs/ instead"}},
		{"bare spec section", "an extension of 70 §5", false, []string{
			"f:1: cites the outside specification (70 §): cite docs/ instead"}},
		{"bare section in code", "// the steps of §7.5", true, []string{"f:1: a § outside a docs/NAME.md citation"}},
		{"bare section in a document", "NIP-CW.md itself says §3.3", false, nil},
		{"citation cut at the line end", "// docs/PROTOCOL.md\n// §1.2 says", true, []string{"f:2: a § outside a docs/NAME.md citation"}},
		{"numbers that are not citations", "// a 30-second soak, 10-minute timeout, P3 on 1M events", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, citationProblems("f", tt.text, tt.code, docs))
		})
	}
}
