package main

import (
	"context"
	"encoding/hex"

	"github.com/buzz-relay/buzz/internal/event"
)

// runKeygen prints a new key pair as {"private_key","pubkey"}.
func runKeygen(_ context.Context, a *app, args []string) error {
	fs := newFlagSet("keygen")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("keygen takes no arguments")
	}
	sk := event.GenerateKey()
	return writeJSON(a.stdout, map[string]string{"private_key": hex.EncodeToString(sk), "pubkey": event.PubKey(sk)})
}
