package main

import "context"

func runCount(ctx context.Context, a *app, args []string) error {
	c, filters, sk, err := filterCommand(a, "count", args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rc, release, err := connect(ctx, c, sk)
	if err != nil {
		return err
	}
	defer release()
	n, err := rc.Count(ctx, filters...)
	if err != nil {
		return err
	}
	return writeJSON(a.stdout, map[string]int64{"count": n})
}
