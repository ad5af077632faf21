package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// The flag values below implement pflag.Value, so a bad value is reported
// by pflag as `invalid argument "x" for "--flag" flag: <reason>`.

// timeFlag is a --since/--until bound: unix seconds or RFC 3339. v is nil
// until the flag is given.
type timeFlag struct{ v *int64 }

func (f *timeFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f *timeFlag) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return fmt.Errorf("negative time %d", n)
		}
		f.v = &n
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is neither unix seconds nor RFC 3339", s)
	}
	n := t.Unix()
	f.v = &n
	return nil
}

func (f *timeFlag) Type() string { return "time" }

// kindsFlag is a comma-separated list of kinds, e.g. 9,45001. kinds is nil
// until the flag is given.
type kindsFlag struct{ kinds []int }

func (f *kindsFlag) String() string {
	parts := make([]string, len(f.kinds))
	for i, k := range f.kinds {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ",")
}

func (f *kindsFlag) Set(s string) error {
	kinds, err := parseKindList(s)
	if err != nil {
		return err
	}
	f.kinds = kinds
	return nil
}

func (f *kindsFlag) Type() string { return "kinds" }

// parseKindList parses "9,40002": integers 0..65535, at least one;
// duplicates are dropped.
func parseKindList(s string) ([]int, error) {
	var kinds []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q is not a comma-separated list of kinds (e.g. 9,45001)", s)
		}
		k, err := strconv.Atoi(part)
		if err != nil || k < 0 || k > 65535 {
			return nil, fmt.Errorf("%q is not a kind (an integer 0..65535)", part)
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// tagFlags collects repeated --tag name,value,… flags.
type tagFlags []event.Tag

func (t *tagFlags) String() string {
	if len(*t) == 0 {
		return ""
	}
	return fmt.Sprint([]event.Tag(*t))
}

func (t *tagFlags) Set(s string) error {
	if s == "" {
		return errors.New("empty tag (give name,value,…)")
	}
	*t = append(*t, strings.Split(s, ","))
	return nil
}

func (t *tagFlags) Type() string { return "name,value,…" }
