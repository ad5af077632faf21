package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// communityCmd is the `community add | add-host | list | export | import`
// group (docs/PROTOCOL.md §2.4, docs/OPERATIONS.md "Exporting a community",
// "Importing a community").
func communityCmd() *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "community",
		Short: "manage communities (tenants): add, add-host, list, export, import",
		Long: `community manages the communities the relay serves. A community is a
tenant, chosen by the Host a client connects to; hosts are normalised
(lower case, no trailing dot, default ports dropped). The deployment
community, the host of RELAY_URL, is created by serve at every start.
export writes one community's events as a JSON lines file; import loads
such a file into a community.`,
		Example: `  buzz-relay community add --host team.example
  buzz-relay community add-host --host chat.team.example --to team.example
  buzz-relay community list
  buzz-relay community export --host team.example --output team.jsonl.gz
  buzz-relay community import --host new.example --file team.jsonl.gz`,
	}, communityAddCmd(), communityAddHostCmd(), communityListCmd(), communityExportCmd(), communityImportCmd())
}

func communityAddCmd() *cobra.Command {
	var host, owner string
	c := &cobra.Command{
		Use:   "add --host HOST [--owner HEX]",
		Short: "create a community",
		Long: `community add creates a community for HOST and, with --owner, adds that
pubkey to its relay members as owner. It prints
  {"community_id":"<uuid>","host":"<host>"}
and refuses a host that is already a primary host or an alias
("host already configured", exit 2).`,
		Example: `  buzz-relay community add --host team.example
  buzz-relay community add --host team.example --owner 3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "host", "HOST"); err != nil {
				return err
			}
			var ownerHex string
			if owner != "" {
				var err error
				if ownerHex, err = parsePubkey(owner); err != nil {
					return err
				}
			}
			h := tenant.Normalize(host)
			if h == "" {
				return errInvalidHost
			}
			cfg, db, err := openDatabase(c, pg.MigrateCheck, false)
			if err != nil {
				return err
			}
			defer db.Close()
			com, err := store.New(db.Pool).CommunityAdd(c.Context(), store.CommunityAddParams{Host: h, Owner: ownerHex})
			if err != nil {
				return err
			}
			announceHosts(c, cfg.RedisURL, com.ID)
			printJSON(c.OutOrStdout(), map[string]string{"community_id": com.ID, "host": com.Host})
			return nil
		},
	}
	c.Flags().StringVar(&host, "host", "", "host of the new community, e.g. team.example or team.example:8443 (required)")
	c.Flags().StringVar(&owner, "owner", "", "pubkey (64 hex) to add as the community's owner")
	return c
}

func communityAddHostCmd() *cobra.Command {
	var alias, to string
	c := &cobra.Command{
		Use:   "add-host --host ALIAS [--to HOST]",
		Short: "add an alias host to a community",
		Long: `community add-host makes ALIAS another name of the community of HOST (by
default the deployment community, the host of RELAY_URL). Clients that
connect with either host reach the same community. It prints
  {"community_id":"<uuid>","alias":"<alias>"}`,
		Example: `  buzz-relay community add-host --host chat.team.example --to team.example
  buzz-relay community add-host --host 127.0.0.1:3000`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlag(c, "host", "ALIAS"); err != nil {
				return err
			}
			a := tenant.Normalize(alias)
			if a == "" {
				return errInvalidHost
			}
			cfg, db, err := openDatabase(c, pg.MigrateCheck, false)
			if err != nil {
				return err
			}
			defer db.Close()
			target := cfg.RelayHost
			if to != "" {
				target = tenant.Normalize(to)
			}
			id, err := store.New(db.Pool).CommunityAddHost(c.Context(), a, target)
			if errors.Is(err, pg.ErrNotFound) {
				return noCommunity(target)
			}
			if err != nil {
				return err
			}
			announceHosts(c, cfg.RedisURL, id)
			printJSON(c.OutOrStdout(), map[string]string{"community_id": id, "alias": a})
			return nil
		},
	}
	c.Flags().StringVar(&alias, "host", "", "the alias host to add (required)")
	c.Flags().StringVar(&to, "to", "", "host or alias of the community (default: the host of RELAY_URL)")
	return c
}

func communityListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list communities",
		Long: `community list prints one line per community:
  {"community_id":"<uuid>","host":"<host>","aliases":[…],"created_at":"<RFC 3339>"}`,
		Example: `  buzz-relay community list
  buzz-relay community list | jq -r .host`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, db, err := openDatabase(c, pg.MigrateCheck, false)
			if err != nil {
				return err
			}
			defer db.Close()
			list, err := store.New(db.Pool).CommunityList(c.Context())
			if err != nil {
				return err
			}
			for _, com := range list {
				printJSON(c.OutOrStdout(), map[string]any{"community_id": com.ID, "host": com.Host, "aliases": com.Aliases, "created_at": com.CreatedAt})
			}
			return nil
		},
	}
}

// errInvalidHost is the answer to a --host that normalises to nothing.
var errInvalidHost = errors.New("invalid host")

// noCommunity is the documented answer to a host no community has (docs/PROTOCOL.md §2.4).
func noCommunity(host string) error {
	return fmt.Errorf("no community is configured for host %s", host)
}

// announceHosts tells the running processes, with REDIS_URL set, to drop
// their cached host resolutions, so a host they cached as unknown serves
// the new community at once rather than after the 5 s negative TTL. The
// change is committed: a failure is a warning.
func announceHosts(c *cobra.Command, redisURL, communityID string) {
	if redisURL == "" {
		return
	}
	if err := pubsub.SendControl(c.Context(), redisURL, pubsub.Control{Community: communityID, Op: pubsub.OpHosts}); err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "%s: added, but the running relays were not told at once (%v); "+
			"they find the host within 5 s\n", c.CommandPath(), err)
	}
}
