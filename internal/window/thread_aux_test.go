package window_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// With include_aux, a reaction to a delivered reply is returned
// and one to the sentinel is not; a deleted reaction is not, its deletion
// is; an edit of the root is. Aux comes after the rows, before the bounds,
// each event once.
func TestThreadAuxClosure(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	sentinel := w.reply(t, ch, root, root, base+1, "the probe row")
	second := w.reply(t, ch, root, root, base+2, "delivered")
	first := w.reply(t, ch, root, root, base+3, "delivered too")

	react := func(target event.Event, ts int64) event.Event {
		return w.publish(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(ts), eventtest.Content("+"),
			eventtest.Tag("e", target.ID), eventtest.Tag("p", target.PubKey))
	}
	liked := react(first, base+10)
	react(sentinel, base+11)
	gone := react(second, base+12)
	deletion := w.publish(t, event.KindDeletion, eventtest.Channel(ch), eventtest.At(base+13), eventtest.Tag("e", gone.ID))
	edit := w.publish(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.At(base+14), eventtest.Content("root, edited"),
		eventtest.Tag("e", root.ID))
	// A deletion naming a reply and a hop-1 event (ingest takes one target
	// only; stored directly) is found in both hops and appears once.
	both := w.owner.Signed(t, event.KindDeletion, eventtest.Channel(ch), eventtest.At(base+15), eventtest.Tag("e", liked.ID),
		eventtest.Tag("e", second.ID))
	w.store(t, both)

	r := req(ch, root)
	r.Limit, r.IncludeAux = 2, true
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{first.ID, second.ID}, ids(pages[0].rows))
	require.True(t, pages[0].hasMore)
	// Discovery order: hop 1 newest first, then hop 2.
	require.Equal(t, []string{both.ID, edit.ID, liked.ID, deletion.ID}, ids(pages[0].aux))

	r.IncludeAux = false
	pages = w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Empty(t, pages[0].aux)
}

// Only a tag whose element 0 is "e" and element 1 is X targets
// X; ["e",B,X] and ["x","e",X] do not, though the containment prefilter
// lets them through. Aux from an inaccessible channel, or channel-less
// aux other than deletions, is not returned either.
func TestAuxPositionalTags(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	secret := w.private(t)
	base := now()
	root := w.root(t, ch, base)
	reply := w.reply(t, ch, root, root, base+1, "reply")
	other := strings.Repeat("cd", 32)

	positional := w.owner.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(base+2), eventtest.Tag("e", other, reply.ID))
	shifted := w.owner.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(base+3), eventtest.Tag("x", "e", reply.ID))
	hidden := w.owner.Signed(t, event.KindReaction, eventtest.Channel(secret), eventtest.At(base+4), eventtest.Tag("e", reply.ID))
	global := w.owner.Signed(t, event.KindReaction, eventtest.At(base+5), eventtest.Tag("e", reply.ID))
	globalDeletion := w.owner.Signed(t, event.KindDeletion, eventtest.At(base+6), eventtest.Tag("e", reply.ID))
	real := w.owner.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(base+7), eventtest.Tag("e", reply.ID, "", "x"))
	w.store(t, positional, shifted, hidden, global, globalDeletion, real)

	r := req(ch, root)
	r.IncludeAux = true
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{reply.ID}, ids(pages[0].rows))
	require.Equal(t, []string{real.ID, globalDeletion.ID}, ids(pages[0].aux))
}
