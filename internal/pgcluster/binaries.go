package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrBinariesMissing is returned (wrapped) by Start when the PostgreSQL server
// binaries cannot be found. The wrapping error names the missing binaries,
// where they were looked for, and how to install them.
var ErrBinariesMissing = errors.New("postgresql server binaries not found")

// requiredBinaries are the programs a private cluster needs. pg_ctl starts
// postgres from its own directory, so all three must live side by side.
var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

// debianBinGlob is where Debian and Ubuntu install versioned server binaries.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// findBinDir returns the directory holding initdb, pg_ctl and postgres.
// With override set, only that directory is considered. Otherwise initdb on
// PATH (symlinks resolved) comes first, then the newest /usr/lib/postgresql/*/bin.
func findBinDir(override string) (string, error) {
	if override != "" {
		if missing := missingIn(override); len(missing) > 0 {
			return "", missingError(missing, []string{override})
		}
		return override, nil
	}
	var looked []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		looked = append(looked, dir)
		if len(missingIn(dir)) == 0 {
			return dir, nil
		}
	} else {
		looked = append(looked, "PATH")
	}
	dirs, _ := filepath.Glob(debianBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		looked = append(looked, dir)
		if len(missingIn(dir)) == 0 {
			return dir, nil
		}
	}
	if len(dirs) == 0 {
		looked = append(looked, debianBinGlob)
	}
	return "", missingError(requiredBinaries, looked)
}

// versionOf extracts the major version from /usr/lib/postgresql/<v>/bin.
func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func missingIn(dir string) []string {
	var missing []string
	for _, name := range requiredBinaries {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

func missingError(missing, looked []string) error {
	return fmt.Errorf("%w: %s missing (looked in %s); install the PostgreSQL server "+
		"(15 or newer), e.g. on Debian/Ubuntu: apt-get install -y postgresql, "+
		"or set DATABASE_URL to use an existing server",
		ErrBinariesMissing, strings.Join(missing, ", "), strings.Join(looked, ", "))
}
