// Command buzz-relay is the Buzz relay server and its operator commands.
//
//	buzz-relay [serve]                     run the relay (default)
//	buzz-relay migrate [--status]          apply pending migrations, or list them
//	buzz-relay community add|add-host|list manage communities (tenants)
//	buzz-relay member add|remove|list      manage relay members
//	buzz-relay audit head|verify           export a checkpoint, verify a chain
//	buzz-relay maintenance search-kinds    show or change what is searchable
//
// Configuration comes from the environment (docs/OPERATIONS.md). Operator
// commands print one JSON object per line on stdout; errors go to stderr
// with exit status 2 when the command cannot run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/buzz-relay/buzz/internal/app"
)

// version is the build version, set with -ldflags "-X main.version=…".

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "serve":
		return serve(ctx, stop, args)
	case "migrate":
		return migrateCmd(ctx, args)
	case "community":
		return communityCmd(ctx, args)
	case "member":
		return memberCmd(ctx, args)
	case "maintenance":
		return maintenanceCmd(ctx, args)
	case "audit":
		return auditCmd(ctx, args)
	case "version", "--version":
		fmt.Println(app.Version)
		return 0
	case "help", "-h", "--help":
		usage()
		return 0
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
		usage()
		return 2
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: buzz-relay [command]

commands:
  serve                                   run the relay (default)
  migrate [--status]                      apply pending migrations, or list them as JSON lines
  community add --host H [--owner HEX]    create a community
  community add-host --host ALIAS [--to HOST]
  community list
  member add --host H --pubkey HEX [--role member|admin|owner]
  member remove --host H --pubkey HEX
  member list --host H
  maintenance search-kinds --show [--json] | --set KINDS [--yes]
  audit head --community H                print the chain head as a signed checkpoint
  audit verify --community H [--from N] [--to M] [--checkpoint FILE] [--signer HEX] [--json]
  version

Configuration is read from the environment; see docs/OPERATIONS.md.
`)
}
