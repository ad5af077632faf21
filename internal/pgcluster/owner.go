package pgcluster

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// SystemUser is the unprivileged account the cluster runs as when the
// process runs as root (initdb and postgres refuse to run as root).
const SystemUser = "buzz-pg"

// owner is the account that owns the cluster files and runs the server.
// A nil cred means "the current user".
type owner struct {
	uid, gid int
	cred     *syscall.Credential
}

// resolveOwner returns the current user, or SystemUser (created when missing,
// with a log line: it is a change to the machine) when running as root.
func resolveOwner(log *slog.Logger) (owner, error) {
	if os.Geteuid() != 0 {
		return owner{uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup(SystemUser)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return owner{}, fmt.Errorf("look up user %s: %w", SystemUser, err)
		}
		out, addErr := exec.Command("useradd", "--system", "--no-create-home",
			"--shell", "/usr/sbin/nologin", SystemUser).CombinedOutput()
		// Exit status 9 means another process created the user meanwhile.
		if u, err = user.Lookup(SystemUser); err != nil {
			return owner{}, fmt.Errorf("create user %s with useradd: %w: %s", SystemUser, cmp.Or(addErr, err), out)
		}
		if addErr == nil {
			log.Info("created system user "+SystemUser+" to run the private cluster (initdb and postgres refuse to run as root)",
				slog.String("user", SystemUser), slog.String("uid", u.Uid))
		}
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return owner{}, fmt.Errorf("parse uid of %s: %w", SystemUser, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return owner{}, fmt.Errorf("parse gid of %s: %w", SystemUser, err)
	}
	return owner{uid: uid, gid: gid, cred: &syscall.Credential{
		Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true,
	}}, nil
}

// mkdirOwned creates dir (mode perm) if needed and makes o the owner of it
// and, when its owner differs, of everything below it.
func (o owner) mkdirOwned(dir string, perm fs.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	if o.cred == nil {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == o.uid && int(sys.Gid) == o.gid {
		return nil
	}
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, o.uid, o.gid)
	})
	if err != nil {
		return fmt.Errorf("chown %s to %s: %w", dir, SystemUser, err)
	}
	return nil
}

// writeOwned writes a file owned by o.
func (o owner) writeOwned(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.cred != nil {
		if err := os.Lchown(path, o.uid, o.gid); err != nil {
			return fmt.Errorf("chown %s: %w", path, err)
		}
	}
	return nil
}

// makeTraversable adds o+x to dir and each of its ancestors that lack it, so
// the unprivileged cluster user can reach the cluster directory. Read
// permission is never added. It does nothing when not running as root.
func (o owner) makeTraversable(dir string) error {
	if o.cred == nil {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("make %s traversable for %s: %w", d, SystemUser, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
