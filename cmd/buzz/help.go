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
  buzz channels create --name N [--private] [--forum] [--about S] [--id UUID]
  buzz channels list
  buzz channels join|leave --channel ID
  buzz channels add-member --channel ID --pubkey HEX [--role R]
  buzz channels remove-member --channel ID --pubkey HEX
  buzz messages send --channel ID --content S [--reply-to EVENT_ID]
  buzz messages list --channel ID [--limit N] [--since T] [--until T]
  buzz messages react --id EVENT_ID [--emoji E]
  buzz messages edit --id EVENT_ID --channel ID --content S
  buzz messages delete --id EVENT_ID
  buzz messages search --query S [--author HEX|npub|NAME] [--channel ID]
                       [--kinds 9,45001] [--since T] [--until T] [--limit N] [--prefix]
  buzz threads get --root EVENT_ID --channel ID
  buzz help

publish  signs with BUZZ_PRIVATE_KEY and prints {"id","accepted","message"}.
         With "-" a full or partial event is read from stdin; missing fields
         are filled (kind 1, created_at now, empty tags and content) and the
         flags given override it. A complete, validly signed event is sent as is.
query    filters are JSON objects or arrays of objects, as arguments or on
         stdin (no arguments or "-"); prints one event per line.
count    same filters; prints {"count":n}.
keygen   prints {"private_key","pubkey"}.

channels create   kind 9007; the channel id is --id or a new random UUID.
                  Prints {"channel_id","event_id","accepted","message"}.
channels list     reads the relay's kind 39000; one line per channel:
                  {"channel_id","name","visibility","type","about","topic","archived"}.
channels join, leave, add-member, remove-member
                  kinds 9021, 9022, 9000, 9001; print {"channel_id","event_id",
                  "accepted","message"} (plus "pubkey" for add/remove).
messages send     kind 9; --reply-to looks the parent up to find the thread
                  root and adds NIP-10 root/reply e tags. Prints {"event_id",
                  "channel_id","accepted","message"} (plus "root","reply_to").
messages list     kinds 9 and 40002 of the channel, one event per line, oldest
                  first (--limit keeps the newest N; T is unix seconds or RFC 3339).
messages react    kind 7 on the event (emoji default "+").
messages edit     kind 40003 with the new text; the original is kept.
messages delete   kind 5 for one of your events.
messages search   one POST /query (always the HTTP bridge) with one search
                  filter; prints the relay's JSON array in rank order. --kinds
                  default 9,40002,40003,45001,45003; --limit 1..500 (default
                  100); --prefix matches the last word as a prefix. --author
                  NAME is resolved by a kind 0 search: exactly one profile
                  whose display_name or name equals NAME (any case), else
                  exit 1 with the "candidates". Exit 0 ok, 1 bad input (no
                  request sent), 2 relay or network error, 3 auth (401/403),
                  4 other.
threads get       the root event, then its replies oldest first, one per line.

Flags of every relay command (anywhere on the line):
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
  ch=$(buzz channels create --name general | jq -r .channel_id)
  buzz messages send --channel "$ch" --content hi
`

func runHelp(_ context.Context, a *app, _ []string) error {
	_, err := fmt.Fprint(a.stdout, helpText)
	return err
}
