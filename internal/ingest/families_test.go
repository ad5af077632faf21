package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// familyCase is one event through a real Pipeline and the answer it gets.
type familyCase struct {
	name string
	// build makes the fixtures on b (through the pipeline and the store)
	// and returns the author and the event to submit.
	build func(t *testing.T, b *testBundle) (eventtest.Key, event.Event)
	// want is the answer (Code and Message).
	want Result
	// check, when set, asserts what was stored.
	check func(t *testing.T, b *testBundle, ev event.Event)
}

// runFamily submits each case on one bundle. Accepted events must be
// stored and live; refused ones must leave no event row. Every case must be
// handled by family.
func runFamily(t *testing.T, family string, cases []familyCase) {
	t.Helper()
	b := setup(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			author, ev := tc.build(t, b)
			require.Equal(t, family, familyOf(ev.Kind).name)
			res := b.submit(t, author, ev)
			require.Equal(t, tc.want, Result{Code: res.Code, Message: res.Message})
			if res.After != nil {
				res.After()
			}
			switch tc.want.Code {
			case Accepted:
				require.True(t, b.live(t, ev.ID), "accepted event must be stored")
			case Rejected, Conflict, Forbidden, Internal:
				_, found := b.lookup(t, ev.ID)
				require.False(t, found, "refused event must not be stored")
			}
			if tc.check != nil {
				tc.check(t, b, ev)
			}
		})
	}
}

func accepted() Result { return Result{Code: Accepted} }

func refused(msg string) Result { return Result{Code: Rejected, Message: msg} }

// by returns a build that signs kind with a fresh key.
func by(kind int, opts ...eventtest.Option) func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
	return func(t *testing.T, _ *testBundle) (eventtest.Key, event.Event) {
		k := eventtest.NewKey()
		return k, k.Signed(t, kind, opts...)
	}
}

// oneStatementChange reports whether authorize chose the hot path for ev.
func oneStatementChange(t *testing.T, b *testBundle, author eventtest.Key, ev event.Event) bool {
	t.Helper()
	req := b.request(author, ev)
	_, c, err := b.p.authorize(context.Background(), &req)
	require.NoError(t, err)
	_, ok := c.(oneStatement)
	return ok
}

func TestPlainFamily(t *testing.T) {
	t.Parallel()
	bob := eventtest.NewKey()
	runFamily(t, "plain", []familyCase{
		{name: "NoteWithMentions", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				ev := k.Signed(t, event.KindNote, eventtest.Tag("p", bob.PubKey), eventtest.Tag("p", k.PubKey), eventtest.Tag("p", bob.PubKey))
				require.True(t, oneStatementChange(t, b, k, ev), "a plain note takes the one-statement path")
				return k, ev
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, 2, b.mentions(t, ev.ID))
				require.Equal(t, 1, b.intents(t, ev.ID))
				ref, _ := b.lookup(t, ev.ID)
				require.Empty(t, ref.Channel)
			}},
		{name: "NoteIgnoresStrayH", want: accepted(), build: by(event.KindNote, eventtest.Channel("00000000-0000-4000-8000-000000000001")),
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ref, _ := b.lookup(t, ev.ID)
				require.Empty(t, ref.Channel, "kind 1 is global-only (step 11)")
			}},
		{name: "GiftWrapFromAnotherKey", want: accepted(),
			build: func(t *testing.T, _ *testBundle) (eventtest.Key, event.Event) {
				return eventtest.NewKey(), eventtest.NewKey().Signed(t, event.KindGiftWrap, eventtest.Tag("p", bob.PubKey))
			}},
		{name: "Resubmission", want: Result{Code: Duplicate, Message: "duplicate:"},
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				return k, b.mustSubmit(t, k, k.Signed(t, event.KindNote))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) { require.Equal(t, 1, b.intents(t, ev.ID)) }},
		{name: "UnknownKind", want: refused("restricted: unknown event kind"), build: by(41)},
		{name: "ForeignPubkey", want: Result{Code: Forbidden, Message: "invalid: event pubkey does not match authenticated identity"},
			build: func(t *testing.T, _ *testBundle) (eventtest.Key, event.Event) {
				return eventtest.NewKey(), bob.Signed(t, event.KindNote)
			}},
	})
}

func TestReplaceableFamily(t *testing.T) {
	t.Parallel()
	now := time.Now().Unix()
	runFamily(t, "replaceable", []familyCase{
		{name: "AddressableReplacesOlder", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				b.mustSubmit(t, k, k.Signed(t, 30023, eventtest.Tag("d", "post"), eventtest.At(now-10)))
				return k, k.Signed(t, 30023, eventtest.Tag("d", "post"), eventtest.At(now))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, 1, b.count(t, `SELECT count(*) FROM events WHERE community_id = $1 AND pubkey = $2 AND kind = 30023 AND deleted_at IS NULL`,
					b.tenant.CommunityID, unhex(t, ev.PubKey)))
			}},
		{name: "OlderVersionLoses", want: Result{Code: Duplicate, Message: "duplicate:"},
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				b.mustSubmit(t, k, k.Signed(t, event.KindContacts, eventtest.At(now)))
				return k, k.Signed(t, event.KindContacts, eventtest.At(now-10))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				_, found := b.lookup(t, ev.ID)
				require.False(t, found, "a losing version is not stored")
				require.Zero(t, b.intents(t, ev.ID))
			}},
		{name: "OtherDTagIsAnotherKey", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				first := b.mustSubmit(t, k, k.Signed(t, 30023, eventtest.Tag("d", "a"), eventtest.At(now)))
				t.Cleanup(func() { require.True(t, b.live(t, first.ID)) })
				return k, k.Signed(t, 30023, eventtest.Tag("d", "b"), eventtest.At(now-10))
			}},
		{name: "DTagTooLong", want: refused("invalid: d tag too long (1025 bytes, max 1024)"),
			build: by(30023, eventtest.Tag("d", strings.Repeat("d", 1025)))},
		{name: "EmojiWithoutShortcode", want: refused("invalid: emoji tag must include a shortcode"),
			build: by(event.KindEmojiList, eventtest.Tag("emoji", "", "https://x.test/a.png"))},
		{name: "EngramWithoutP", want: refused("invalid: agent-engram event must have exactly one `p` tag (got 0)"),
			build: by(event.KindEngram, eventtest.Tag("d", strings.Repeat("ab", 32)))},
	})
}

func TestProfileFamily(t *testing.T) {
	t.Parallel()
	now := time.Now().Unix()
	nip05 := func(t *testing.T, b *testBundle, pubkey string) string {
		var h *string
		err := b.pool.QueryRow(context.Background(), `SELECT nip05_handle FROM users WHERE community_id = $1 AND pubkey = $2`,
			b.tenant.CommunityID, unhex(t, pubkey)).Scan(&h)
		require.NoError(t, err)
		if h == nil {
			return ""
		}
		return *h
	}
	runFamily(t, "profile", []familyCase{
		{name: "ProfileClaimsHandle", want: accepted(), build: by(event.KindProfile, eventtest.Content(`{"nip05":" Alice@Relay.Test "}`)),
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, "alice@relay.test", nip05(t, b, ev.PubKey))
			}},
		{name: "HandleOfAnotherHostIsNotClaimed", want: accepted(), build: by(event.KindProfile, eventtest.Content(`{"nip05":"alice@elsewhere.test"}`)),
			check: func(t *testing.T, b *testBundle, ev event.Event) { require.Empty(t, nip05(t, b, ev.PubKey)) }},
		// A handle another pubkey holds is not claimed, and the profile is
		// still stored: the unique violation must not abort the event's
		// transaction.
		{name: "TakenHandleIsNotClaimed", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				holder := eventtest.NewKey()
				b.mustSubmit(t, holder, holder.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"taken@relay.test"}`)))
				k := eventtest.NewKey()
				b.mustSubmit(t, k, k.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"mine@relay.test"}`), eventtest.At(now-10)))
				return k, k.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"Taken@relay.test"}`))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, "mine@relay.test", nip05(t, b, ev.PubKey), "the pubkey keeps its own handle")
			}},
		{name: "LosingProfileSetsNothing", want: Result{Code: Duplicate, Message: "duplicate:"},
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				b.mustSubmit(t, k, k.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"new@relay.test"}`), eventtest.At(now)))
				return k, k.Signed(t, event.KindProfile, eventtest.Content(`{"nip05":"old@relay.test"}`), eventtest.At(now-5))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, "new@relay.test", nip05(t, b, ev.PubKey))
			}},
		{name: "AgentPolicy", want: accepted(), build: by(event.KindAgentProfile, eventtest.Content(`{"channel_add_policy":"nobody"}`)),
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				policy, _, err := store.New(b.pool).UserAddPolicy(context.Background(), b.tenant.CommunityID, ev.PubKey)
				require.NoError(t, err)
				require.Equal(t, "nobody", policy)
			}},
		{name: "ProfileNotJSON", want: refused("invalid: kind:0 content must be valid JSON"), build: by(event.KindProfile, eventtest.Content("null"))},
		{name: "AgentPolicyUnknown", want: refused("invalid: kind:10100 content must set channel_add_policy to anyone, owner_only or nobody"),
			build: by(event.KindAgentProfile, eventtest.Content(`{"channel_add_policy":"sometimes"}`))},
	})
}

func TestDeletionFamily(t *testing.T) {
	t.Parallel()
	note := func(t *testing.T, b *testBundle, k eventtest.Key) event.Event {
		return b.mustSubmit(t, k, k.Signed(t, event.KindNote))
	}
	runFamily(t, "deletion", []familyCase{
		{name: "OwnEvent", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				target := note(t, b, k)
				t.Cleanup(func() {
					require.False(t, b.live(t, target.ID), "the target is soft-deleted")
					require.Equal(t, 2, b.intents(t, target.ID), "event_created and event_deleted")
				})
				return k, k.Signed(t, event.KindDeletion, eventtest.Tag("e", strings.ToUpper(target.ID)))
			}},
		{name: "OwnReaction", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				target := note(t, b, eventtest.NewKey())
				react := b.mustSubmit(t, k, k.Signed(t, event.KindReaction, eventtest.Tag("e", target.ID)))
				require.Equal(t, 1, b.reactions(t, target.ID))
				t.Cleanup(func() {
					require.False(t, b.live(t, react.ID))
					require.Zero(t, b.reactions(t, target.ID), "the reaction row is removed with its event")
				})
				return k, k.Signed(t, event.KindDeletion, eventtest.Tag("e", react.ID))
			}},
		{name: "Address", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				post := b.mustSubmit(t, k, k.Signed(t, 30023, eventtest.Tag("d", "x"), eventtest.At(time.Now().Unix()-1)))
				t.Cleanup(func() { require.False(t, b.live(t, post.ID)) })
				return k, k.Signed(t, event.KindDeletion, eventtest.Tag("a", "30023:"+k.PubKey+":x"))
			}},
		{name: "NotAuthor", want: refused("invalid: must be event author"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				target := note(t, b, eventtest.NewKey())
				t.Cleanup(func() { require.True(t, b.live(t, target.ID)) })
				return k, k.Signed(t, event.KindDeletion, eventtest.Tag("e", target.ID))
			}},
		{name: "TargetNotFound", want: refused("invalid: target event not found"), build: by(event.KindDeletion, eventtest.Tag("e", strings.Repeat("cd", 32)))},
		{name: "MalformedTarget", want: refused("invalid: malformed deletion target id"), build: by(event.KindDeletion, eventtest.Tag("e", "zz"))},
		{name: "BadATag", want: refused("invalid: invalid a-tag format"), build: by(event.KindDeletion, eventtest.Tag("a", "30023:x"))},
		{name: "TwoTargets", want: refused("invalid: deletion events must reference exactly one target via e or a tag (got e=1, a=1)"),
			build: by(event.KindDeletion, eventtest.Tag("e", strings.Repeat("01", 32)), eventtest.Tag("a", "30023:x:y"))},
	})
}

func TestReactionFamily(t *testing.T) {
	t.Parallel()
	runFamily(t, "reaction", []familyCase{
		{name: "InTargetChannel", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, k := eventtest.NewKey(), eventtest.NewKey()
				ch := b.channel(t, owner)
				target := b.mustSubmit(t, owner, owner.Signed(t, event.KindStreamMessage, eventtest.Channel(ch)))
				return k, k.Signed(t, event.KindReaction, eventtest.Content("🔥"), eventtest.Tag("e", target.ID))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ref, _ := b.lookup(t, ev.ID)
				target, _ := b.lookup(t, ev.Tags.First("e").Value())
				require.Equal(t, target.Channel, ref.Channel, "a reaction takes its target's channel")
				require.Equal(t, 1, b.reactions(t, target.ID))
			}},
		{name: "SameReactionTwice", want: Result{Code: Conflict, Message: "duplicate: reaction already exists"},
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				target := b.mustSubmit(t, k, k.Signed(t, event.KindNote))
				b.mustSubmit(t, k, k.Signed(t, event.KindReaction, eventtest.Content(""), eventtest.Tag("e", target.ID)))
				return k, k.Signed(t, event.KindReaction, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(time.Now().Unix()+1))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, 1, b.reactions(t, ev.Tags.First("e").Value()))
			}},
		{name: "NoTarget", want: refused("invalid: reaction must reference a target event via e tag"), build: by(event.KindReaction)},
		{name: "TargetMissing", want: refused("invalid: reaction target event not found"),
			build: by(event.KindReaction, eventtest.Tag("e", strings.Repeat("ab", 32)))},
		{name: "PrivateTarget", want: refused("restricted: not a channel member"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, k := eventtest.NewKey(), eventtest.NewKey()
				ch := b.channel(t, owner, eventtest.Tag("visibility", "private"))
				target := b.mustSubmit(t, owner, owner.Signed(t, event.KindStreamMessage, eventtest.Channel(ch)))
				return k, k.Signed(t, event.KindReaction, eventtest.Tag("e", target.ID))
			}},
		{name: "EmojiTooLong", want: refused("invalid: reaction emoji exceeds 64 characters (got 65)"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k := eventtest.NewKey()
				target := b.mustSubmit(t, k, k.Signed(t, event.KindNote))
				return k, k.Signed(t, event.KindReaction, eventtest.Content(strings.Repeat("é", 65)), eventtest.Tag("e", target.ID))
			}},
	})
}
