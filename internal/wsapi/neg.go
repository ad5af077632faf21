package wsapi

import (
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/negentropy"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// negSession is one NIP-77 reconciliation of a connection
// (docs/PROTOCOL.md §7.13): the relay's records of the NEG-OPEN's filter,
// held until NEG-CLOSE, a replacing NEG-OPEN, an error, the idle timeout
// or the end of the connection. set is nil while the NEG-OPEN's read runs.
type negSession struct {
	id    string
	set   *negentropy.Set
	last  time.Time // the last NEG-OPEN or NEG-MSG; c.mu guards it
	timer *time.Timer
}

// handleNegOpen starts a session on the read loop: authentication, the
// frame quota, the message's size and hex, and the connection's session
// cap are judged here; the read and the first answer run in a handler.
// A session already open under the id is replaced.
func (c *conn) handleNegOpen(id string, filters []event.Filter, msgHex string) {
	pubkey, raw, ok := c.negFrame(id, msgHex)
	if !ok {
		return
	}
	c.mu.Lock()
	if old := c.negs[id]; old != nil {
		c.dropNegLocked(old)
	}
	if len(c.negs) >= c.srv.set.Neg.MaxSessions {
		c.enqueueLocked(wire.NegErr(id, wire.MsgNegTooManySessions), false)
		c.mu.Unlock()
		return
	}
	s := &negSession{id: id, last: time.Now()}
	c.negs[id] = s
	c.mu.Unlock()
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.failNeg(s, wire.MsgRateLimited)
		return
	}
	c.goHandler(func() { c.openNeg(s, pubkey, filters, raw) })
}

// openNeg reads the session's records through the read door, as a REQ
// with the same filter would be read, and answers the first message.
func (c *conn) openNeg(s *negSession, pubkey string, filters []event.Filter, raw []byte) {
	log := c.log.With(slog.String("pubkey", pubkey), slog.String("sub_id", s.id))
	rd, err := c.srv.cfg.Reader.Open(c.ctx, read.Request{
		Scope:   read.Scope{CommunityID: c.tenant.CommunityID, Reader: pubkey},
		Surface: read.SurfaceNEG, Filters: filters, Log: log, Conn: "ws " + c.id,
	})
	if err != nil {
		c.failNeg(s, c.readFailure(log, err))
		return
	}
	var items []negentropy.Item
	err = rd.Records(c.ctx, c.srv.set.Neg.MaxRecords, func(ts int64, id [32]byte) {
		items = append(items, negentropy.Item{Timestamp: uint64(ts), ID: id})
	})
	rd.Close()
	if err != nil {
		c.failNeg(s, c.readFailure(log, err))
		return
	}
	set := negentropy.NewSet(items)
	answer, msg := c.respondNeg(set, raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.negs[s.id] != s {
		return // closed or replaced meanwhile: nobody waits for this answer
	}
	if msg != "" {
		c.dropNegLocked(s)
		c.enqueueLocked(wire.NegErr(s.id, msg), false)
		return
	}
	s.set, s.last = set, time.Now()
	idle := c.srv.set.Neg.IdleTimeout
	s.timer = time.AfterFunc(idle, func() { c.negIdle(s) })
	c.enqueueLocked(wire.NegMsg(s.id, answer), false)
}

// handleNegMsg answers one message of an open session in a handler.
func (c *conn) handleNegMsg(id, msgHex string) {
	_, raw, ok := c.negFrame(id, msgHex)
	if !ok {
		return
	}
	c.mu.Lock()
	s := c.negs[id]
	if s == nil || s.set == nil {
		c.mu.Unlock()
		c.reply(wire.NegErr(id, wire.MsgNegNoSession))
		return
	}
	s.last = time.Now()
	set := s.set
	c.mu.Unlock()
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.failNeg(s, wire.MsgRateLimited)
		return
	}
	c.goHandler(func() {
		answer, msg := c.respondNeg(set, raw)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.negs[s.id] != s {
			return
		}
		if msg != "" {
			c.dropNegLocked(s)
			c.enqueueLocked(wire.NegErr(s.id, msg), false)
			return
		}
		c.enqueueLocked(wire.NegMsg(s.id, answer), false)
	})
}

// handleNegClose ends a session; NEG-CLOSE has no answer.
func (c *conn) handleNegClose(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.negs[id]; s != nil {
		c.dropNegLocked(s)
	}
}

// negFrame judges what NEG-OPEN and NEG-MSG share, on the read loop:
// authentication, the frame quota, the message's size (before it is
// decoded) and its hex. It answers a refusal itself, ending a session open
// under the id, and reports false.
func (c *conn) negFrame(id, msgHex string) (pubkey string, raw []byte, ok bool) {
	pubkey, authed := c.identity()
	if !authed {
		c.refuseNeg(id, wire.MsgNotAuthenticated)
		return "", nil, false
	}
	if msg := c.chargeFrame(pubkey); msg != "" {
		c.refuseNeg(id, msg)
		return "", nil, false
	}
	if maximum := c.srv.set.Neg.MaxMessageBytes; len(msgHex) > 2*maximum {
		c.refuseNeg(id, wire.NegMessageTooLarge(len(msgHex)/2, maximum))
		return "", nil, false
	}
	raw, err := hex.DecodeString(msgHex)
	if err != nil {
		c.refuseNeg(id, wire.MsgNegBadHex)
		return "", nil, false
	}
	return pubkey, raw, true
}

// respondNeg answers one message from set, or returns the NEG-ERR text.
func (c *conn) respondNeg(set *negentropy.Set, raw []byte) (string, string) {
	answer, err := negentropy.Respond(set, raw, c.srv.set.Neg.MaxMessageBytes)
	switch {
	case errors.Is(err, negentropy.ErrVersion):
		return "", wire.MsgNegVersion
	case err != nil:
		return "", wire.MsgNegMalformed
	}
	return hex.EncodeToString(answer), ""
}

// refuseNeg answers NEG-ERR and ends the session open under the id, so
// that what the client reads is true of its id.
func (c *conn) refuseNeg(id, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.negs[id]; s != nil {
		c.dropNegLocked(s)
	}
	c.enqueueLocked(wire.NegErr(id, msg), false)
}

// failNeg ends s with NEG-ERR if it is still the session of its id.
func (c *conn) failNeg(s *negSession, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.negs[s.id] != s {
		return
	}
	c.dropNegLocked(s)
	c.enqueueLocked(wire.NegErr(s.id, msg), false)
}

// negIdle closes s once it has had no message for the idle timeout.
func (c *conn) negIdle(s *negSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.negs[s.id] != s {
		return
	}
	if left := c.srv.set.Neg.IdleTimeout - time.Since(s.last); left > 0 {
		s.timer.Reset(left)
		return
	}
	c.dropNegLocked(s)
	c.enqueueLocked(wire.NegErr(s.id, wire.MsgNegIdle), false)
}

// dropNegLocked forgets s and frees its records. c.mu must be held.
func (c *conn) dropNegLocked(s *negSession) {
	if s.timer != nil {
		s.timer.Stop()
	}
	delete(c.negs, s.id)
}
