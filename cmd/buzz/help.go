package main

import (
	"context"
	"fmt"
)

const helpText = `buzz — the agent-first client of a Buzz relay. JSON in, JSON out.

Usage:
  buzz keygen
  buzz publish [--kind N] [--content S] [--tag name,value,…]… [-]
  buzz query   [FILTER_JSON…] [-]
  buzz count   [FILTER_JSON…] [-]
  buzz help

publish  signs with BUZZ_PRIVATE_KEY and prints {"id","accepted","message"}.
         With "-" a full or partial event is read from stdin; missing fields
         are filled (kind 1, created_at now, empty tags and content) and the
         flags given override it. A complete, validly signed event is sent as is.
query    filters are JSON objects or arrays of objects, as arguments or on
         stdin (no arguments or "-"); prints one event per line.
count    same filters; prints {"count":n}.
keygen   prints {"private_key","pubkey"}.

Flags of publish, query and count (anywhere on the line):
  --relay URL     relay (default BUZZ_RELAY_URL or ws://localhost:3000)
  --http          use the HTTP bridge (http(s) URL derived from the relay URL)
  --timeout D     bound on the whole request (default 30s)

Environment:
  BUZZ_PRIVATE_KEY   64 hex secret key (required except for keygen)
  BUZZ_RELAY_URL     default relay

Output: results on stdout, one JSON object per line; errors as {"error":"…"}
on stderr. Exit 0 ok, 1 refused by the relay, 2 usage or connection error.

Example:
  export BUZZ_PRIVATE_KEY=$(buzz keygen | jq -r .private_key)
  buzz publish --kind 9 --content hello --tag h,<channel-uuid>
  buzz query '{"kinds":[9],"#h":["<channel-uuid>"],"limit":20}'
`

func runHelp(_ context.Context, a *app, _ []string) error {
	_, err := fmt.Fprint(a.stdout, helpText)
	return err
}
