package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// memberCmd is the `member add | remove | list` group (docs/PROTOCOL.md §2.5).
func memberCmd() *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "member",
		Short: "manage relay members: add, remove, list",
		Long: `member manages the relay members of a community: who may use it when
BUZZ_REQUIRE_RELAY_MEMBERSHIP=true, and who is its owner or an admin.
--host takes the community's host or one of its aliases. Every change is
recorded in the community's audit chain (unless BUZZ_AUDIT_ENABLED=false).`,
		Example: `  buzz-relay member add --host team.example --pubkey $(buzz whoami --get pubkey)
  buzz-relay member add --host team.example --pubkey HEX --role admin
  buzz-relay member list --host team.example`,
	}, memberAddCmd(), memberRemoveCmd(), memberListCmd())
}

// memberTarget is what every member subcommand works on.
type memberTarget struct {
	cfg         config.Config
	db          *app.Database
	store       *store.Store
	communityID string
}

// openMember connects and resolves --host through aliases. The caller
// closes t.db.
func openMember(c *cobra.Command, host string) (*memberTarget, error) {
	if err := requireFlag(c, "host", "HOST"); err != nil {
		return nil, err
	}
	h := tenant.Normalize(host)
	if h == "" {
		return nil, errInvalidHost
	}
	cfg, db, err := openDatabase(c, pg.MigrateCheck, false)
	if err != nil {
		return nil, err
	}
	s := store.New(db.Pool)
	com, err := s.CommunityByHost(c.Context(), h)
	if err != nil {
		db.Close()
		if errors.Is(err, pg.ErrNotFound) {
			return nil, noCommunity(h)
		}
		return nil, err
	}
	return &memberTarget{cfg: cfg, db: db, store: s, communityID: com.ID}, nil
}

// pubkeyFlag checks --pubkey: required, and 64 hex characters.
func pubkeyFlag(c *cobra.Command, value string) (string, error) {
	if err := requireFlag(c, "pubkey", "HEX"); err != nil {
		return "", err
	}
	return parsePubkey(value)
}

func memberAddCmd() *cobra.Command {
	var host, pubkey, role string
	c := &cobra.Command{
		Use:   "add --host HOST --pubkey HEX [--role member|admin|owner]",
		Short: "add a relay member, or change its role",
		Long: `member add upserts a relay member of the community of HOST with ROLE
(default member) and prints
  {"community_id":"<uuid>","pubkey":"<hex>","role":"<role>"}
Pubkeys are 64 hex characters, stored lower case; anything else is
"invalid pubkey" (exit 2).`,
		Example: `  buzz-relay member add --host team.example --pubkey 3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d
  buzz-relay member add --host team.example --pubkey $(buzz whoami --get pubkey) --role owner`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			pk, err := pubkeyFlag(c, pubkey)
			if err != nil {
				return err
			}
			if role != "member" && role != "admin" && role != "owner" {
				return fmt.Errorf("invalid role: %s", role)
			}
			t, err := openMember(c, host)
			if err != nil {
				return err
			}
			defer t.db.Close()
			m, err := t.add(c.Context(), pk, role)
			if err != nil {
				return err
			}
			printJSON(c.OutOrStdout(), map[string]string{"community_id": t.communityID, "pubkey": pk, "role": m.Role})
			return nil
		},
	}
	c.Flags().StringVar(&host, "host", "", "host or alias of the community (required)")
	c.Flags().StringVar(&pubkey, "pubkey", "", "the member's pubkey, 64 hex (required)")
	c.Flags().StringVar(&role, "role", "member", "member, admin or owner")
	return c
}

// add upserts the member and, when the role changed, appends the audit
// intent in the same transaction.
func (t *memberTarget) add(ctx context.Context, pk, role string) (store.RelayMember, error) {
	var m store.RelayMember
	err := pg.InTx(ctx, t.db.Pool, func(tx pgx.Tx) error {
		prev, err := store.New(tx).RelayMemberRole(ctx, t.communityID, pk)
		if err != nil {
			return err
		}
		m, err = store.New(tx).RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{CommunityID: t.communityID, Pubkey: pk, Role: role, AddedBy: "cli"})
		if err != nil || !t.cfg.AuditEnabled || prev == m.Role {
			return err
		}
		return audit.Append(ctx, tx, audit.NewMemberAdded(t.communityID, "", audit.MemberChange{
			Scope: "relay", Member: pk, Role: m.Role, PreviousRole: prev}))
	})
	return m, err
}

func memberRemoveCmd() *cobra.Command {
	var host, pubkey string
	c := &cobra.Command{
		Use:   "remove --host HOST --pubkey HEX",
		Short: "remove a relay member",
		Long: `member remove deletes the member's row and prints {"removed":true}, or
{"removed":false} when it was not a member (idempotent). With REDIS_URL
set, running processes disconnect the removed member at once.`,
		Example: `  buzz-relay member remove --host team.example --pubkey 3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			pk, err := pubkeyFlag(c, pubkey)
			if err != nil {
				return err
			}
			t, err := openMember(c, host)
			if err != nil {
				return err
			}
			defer t.db.Close()
			removed, err := t.remove(c.Context(), pk)
			if err != nil {
				return err
			}
			if removed && t.cfg.RedisURL != "" {
				t.announceRemoval(c, pk)
			}
			printJSON(c.OutOrStdout(), map[string]bool{"removed": removed})
			return nil
		},
	}
	c.Flags().StringVar(&host, "host", "", "host or alias of the community (required)")
	c.Flags().StringVar(&pubkey, "pubkey", "", "the member's pubkey, 64 hex (required)")
	return c
}

// announceRemoval tells the running processes to disconnect the removed
// member at once (docs/PROTOCOL.md §16.4 relay_member_removed). The removal is already
// committed: a failure only delays the disconnect to each process's next
// membership revalidation, so it is a warning, not an error.
func (t *memberTarget) announceRemoval(c *cobra.Command, pk string) {
	err := pubsub.SendControl(c.Context(), t.cfg.RedisURL, pubsub.Control{
		Community: t.communityID, Op: pubsub.OpRelayMemberRemoved, Pubkey: pk})
	if err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "%s: removed, but the running relays were not told at once (%v); "+
			"they disconnect the member at their next membership check\n", c.CommandPath(), err)
	}
}

// remove deletes the member and, when there was one, appends the audit
// intent in the same transaction.
func (t *memberTarget) remove(ctx context.Context, pk string) (bool, error) {
	var removed bool
	err := pg.InTx(ctx, t.db.Pool, func(tx pgx.Tx) error {
		var err error
		removed, err = store.New(tx).RelayMemberRemove(ctx, t.communityID, pk)
		if err != nil || !removed || !t.cfg.AuditEnabled {
			return err
		}
		return audit.Append(ctx, tx, audit.NewMemberRemoved(t.communityID, "", audit.MemberChange{
			Scope: "relay", Member: pk, Reason: "removed"}))
	})
	return removed, err
}

func memberListCmd() *cobra.Command {
	var host string
	c := &cobra.Command{
		Use:   "list --host HOST",
		Short: "list relay members",
		Long: `member list prints one line per relay member of the community of HOST:
  {"pubkey":"<hex>","role":"<role>","added_by":"<who>","created_at":"<RFC 3339>"}`,
		Example: `  buzz-relay member list --host team.example
  buzz-relay member list --host team.example | jq -r 'select(.role=="owner") | .pubkey'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			t, err := openMember(c, host)
			if err != nil {
				return err
			}
			defer t.db.Close()
			list, err := t.store.RelayMemberList(c.Context(), t.communityID)
			if err != nil {
				return err
			}
			for _, m := range list {
				printJSON(c.OutOrStdout(), map[string]any{"pubkey": m.Pubkey, "role": m.Role, "added_by": m.AddedBy, "created_at": m.CreatedAt})
			}
			return nil
		},
	}
	c.Flags().StringVar(&host, "host", "", "host or alias of the community (required)")
	return c
}

// parsePubkey accepts 64 hex characters of either case and returns them
// lowercase; anything else is the documented "invalid pubkey" (docs/PROTOCOL.md §2.4).
func parsePubkey(s string) (string, error) {
	if !event.IsHexAnyCase64(s) {
		return "", errors.New("invalid pubkey")
	}
	return strings.ToLower(s), nil
}
