package wsapi

import "github.com/buzz-relay/buzz/internal/wire"

// handleClose removes the subscription, then answers ["CLOSED",id,""], also
// for an unknown id. It holds the connection lock across both, so no frame
// of that subscription can be queued after the CLOSED.
func (c *conn) handleClose(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sub := c.subs[id]; sub != nil {
		c.dropLocked(sub)
	}
	c.enqueueLocked(wire.Closed(id, ""), false)
}
