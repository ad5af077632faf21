package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/jackc/pgx/v5"
)

// memberCmd runs `member add | remove | list`.
func memberCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return fail(errUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("member "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hostFlag := fs.String("host", "", "host or alias of the community")
	pubkey := fs.String("pubkey", "", "member pubkey (hex)")
	role := fs.String("role", "member", "member, admin or owner")
	if err := fs.Parse(args); err != nil {
		return fail(errUsage)
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	var pk string
	switch sub {
	case "add", "remove":
		if pk, err = parsePubkey(*pubkey); err != nil {
			return fail(err)
		}
		if *role != "member" && *role != "admin" && *role != "owner" {
			return fail(fmt.Errorf("invalid role: %s", *role))
		}
	case "list":
	default:
		return fail(errUsage)
	}
	h := tenant.Normalize(*hostFlag)
	if h == "" {
		return fail(errors.New("invalid host"))
	}
	db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateCheck)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	s := store.New(db.Pool)
	c, err := s.CommunityByHost(ctx, h)
	if errors.Is(err, pg.ErrNotFound) {
		return fail(fmt.Errorf("no community is configured for host %s", h))
	} else if err != nil {
		return fail(err)
	}
	switch sub {
	case "add":
		var m store.RelayMember
		err := pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
			prev, err := s.RelayMemberRole(ctx, tx, c.ID, pk)
			if err != nil {
				return err
			}
			m, err = s.RelayMemberUpsert(ctx, tx, store.RelayMemberUpsertParams{CommunityID: c.ID, Pubkey: pk, Role: *role, AddedBy: "cli"})
			if err != nil || !cfg.AuditEnabled || prev == m.Role {
				return err
			}
			return audit.Append(ctx, tx, audit.NewMemberAdded(c.ID, "", audit.MemberChange{
				Scope: "relay", Member: pk, Role: m.Role, PreviousRole: prev}))
		})
		if err != nil {
			return fail(err)
		}
		printJSON(map[string]string{"community_id": c.ID, "pubkey": pk, "role": m.Role})
	case "remove":
		var removed bool
		err := pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
			var err error
			removed, err = s.RelayMemberRemove(ctx, tx, c.ID, pk)
			if err != nil || !removed || !cfg.AuditEnabled {
				return err
			}
			return audit.Append(ctx, tx, audit.NewMemberRemoved(c.ID, "", audit.MemberChange{
				Scope: "relay", Member: pk, Reason: "removed"}))
		})
		if err != nil {
			return fail(err)
		}
		printJSON(map[string]bool{"removed": removed})
	case "list":
		list, err := s.RelayMemberList(ctx, c.ID)
		if err != nil {
			return fail(err)
		}
		for _, m := range list {
			printJSON(map[string]any{"pubkey": m.Pubkey, "role": m.Role, "added_by": m.AddedBy, "created_at": m.CreatedAt})
		}
	}
	return 0
}

// parsePubkey accepts 64 hex characters of either case and returns them lowercase.
func parsePubkey(s string) (string, error) {
	if !event.IsHexAnyCase64(s) {
		return "", errors.New("invalid pubkey")
	}
	return strings.ToLower(s), nil
}
