package main

import (
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

// keyVar is the variable buzz reads its key from, and the one
// keygen --export sets by default.
const keyVar = "BUZZ_PRIVATE_KEY"

// shellName is a variable name a POSIX shell accepts in export NAME=….
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// identity is what whoami prints: the public key, hex and NIP-19.
type identity struct {
	PubKey string `json:"pubkey"`
	NPub   string `json:"npub"`
}

func newIdentity(sk []byte) identity {
	pub := event.PubKey(sk)
	return identity{PubKey: pub, NPub: cli.NPub(pub)}
}

// keyPair is what keygen prints.
type keyPair struct {
	PrivateKey string `json:"private_key"`
	identity
}

// keygenArgs are the flags of keygen.
type keygenArgs struct {
	a      *app
	export string // "" prints JSON; else the variable to export
}

func (o *keygenArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.export, "export", "", "print the shell line export NAME=<hex> instead of JSON; NAME is "+keyVar+" unless --export=NAME")
	fs.Lookup("export").NoOptDefVal = keyVar
}

func (o *keygenArgs) check(fs *pflag.FlagSet, args []string) error {
	if err := noArgs("keygen", args); err != nil {
		if fs.Changed("export") {
			return cli.Usagef("keygen: unexpected argument %q (to name the variable, write --export=%s)", args[0], args[0])
		}
		return err
	}
	if !fs.Changed("export") {
		return nil
	}
	if !shellName.MatchString(o.export) {
		return cli.Usagef("keygen: --export=%q is not a shell variable name (letters, digits and _, not starting with a digit)", o.export)
	}
	if o.a.global.get != "" {
		return cli.Usagef("keygen: --get does not apply to --export, which prints a shell line")
	}
	return nil
}

func newKeygenCmd(a *app) *cobra.Command {
	o := &keygenArgs{a: a}
	return leaf(&cobra.Command{
		Use:   "keygen [--export[=NAME]]",
		Short: "print a new key pair",
		Long: `Keygen makes a new secret key and prints {"private_key","pubkey","npub"}.
It needs no key and no relay.

With --export it prints the shell line export BUZZ_PRIVATE_KEY=<hex>
instead (--export=NAME exports NAME), for eval.`,
		Example: `  eval "$(buzz keygen --export)"
  eval "$(buzz keygen --export=BOB_KEY)"
  buzz keygen --get npub`,
	}, o, func(*cobra.Command) error { return o.run() })
}

func (o *keygenArgs) run() error {
	sk := event.GenerateKey()
	if o.export != "" {
		_, err := fmt.Fprintf(o.a.stdout, "export %s=%s\n", o.export, hex.EncodeToString(sk))
		return err
	}
	return o.a.write(keyPair{PrivateKey: hex.EncodeToString(sk), identity: newIdentity(sk)})
}

func newWhoamiCmd(a *app) *cobra.Command {
	o := &noFlags{cmd: "whoami"}
	return leaf(&cobra.Command{
		Use:   "whoami",
		Short: "print the public key of BUZZ_PRIVATE_KEY",
		Long: `Whoami prints {"pubkey","npub"} of the key in BUZZ_PRIVATE_KEY, without
touching the network: the pubkey others name you by (e.g. in
channels add-member --pubkey).`,
		Example: `  buzz whoami
  buzz channels add-member --channel <channel-uuid> --pubkey "$(BUZZ_PRIVATE_KEY=$BOB_KEY buzz whoami --get pubkey)"`,
	}, o, func(*cobra.Command) error { return a.whoami() })
}

// whoami prints the pubkey of BUZZ_PRIVATE_KEY, hex and npub.
func (a *app) whoami() error {
	sk, err := secretKey(a.getenv, "whoami")
	if err != nil {
		return err
	}
	return a.write(newIdentity(sk))
}
