package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// communityCmd runs `community add | add-host | list`.
func communityCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return fail(errUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("community "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hostFlag := fs.String("host", "", "host")
	owner := fs.String("owner", "", "owner pubkey (hex)")
	to := fs.String("to", "", "target host (default: the deployment community)")
	if err := fs.Parse(args); err != nil {
		return fail(errUsage)
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	var ownerHex string
	if *owner != "" {
		if ownerHex, err = parsePubkey(*owner); err != nil {
			return fail(err)
		}
	}
	switch sub {
	case "add", "add-host":
		if tenant.Normalize(*hostFlag) == "" {
			return fail(errors.New("invalid host"))
		}
	case "list":
	default:
		return fail(errUsage)
	}
	db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateCheck)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	s := store.New(db.Pool)
	switch sub {
	case "add":
		c, err := s.CommunityAdd(ctx, store.CommunityAddParams{Host: tenant.Normalize(*hostFlag), Owner: ownerHex})
		if err != nil {
			return fail(err)
		}
		printJSON(map[string]string{"community_id": c.ID, "host": c.Host})
	case "add-host":
		target := cfg.RelayHost
		if *to != "" {
			target = tenant.Normalize(*to)
		}
		alias := tenant.Normalize(*hostFlag)
		id, err := s.CommunityAddHost(ctx, alias, target)
		if errors.Is(err, pg.ErrNotFound) {
			return fail(fmt.Errorf("no community is configured for host %s", target))
		}
		if err != nil {
			return fail(err)
		}
		printJSON(map[string]string{"community_id": id, "alias": alias})
	case "list":
		list, err := s.CommunityList(ctx)
		if err != nil {
			return fail(err)
		}
		for _, c := range list {
			printJSON(map[string]any{"community_id": c.ID, "host": c.Host, "aliases": c.Aliases, "created_at": c.CreatedAt})
		}
	}
	return 0
}
