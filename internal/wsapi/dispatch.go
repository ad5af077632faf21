package wsapi

import (
	"sync"

	"github.com/buzz-relay/buzz/internal/ingest"
)

// Fan-out after the commit, off the publisher's path
// (docs/PROTOCOL.md §1.3). Broadcast serves the publisher's own connection at once, so its
// OK still follows every EVENT frame of that connection, and hands the
// other recipients to the dispatcher: one goroutine per process that
// delivers in the order Broadcast was called. An eviction waits for what
// was handed over before it, so a removal reaches the removed member's
// subscriptions before their channel is taken away, as when fan-out was
// synchronous.

// maxDispatchQueue bounds the jobs waiting for the dispatcher. Past it the
// caller waits for room: the publishers then slow to what fan-out
// sustains, as they did when they delivered themselves.
const maxDispatchQueue = 4096

// dispatchJob is one delivery of d to subs, or one fn to run in order.
type dispatchJob struct {
	d    ingest.Delivery
	subs []*subscription
	// sent is how many subscriptions of the publisher's own connection
	// Broadcast served itself.
	sent int
	fn   func()
}

// dispatcher is the queue and its goroutine, started when a job arrives
// and gone when the queue is empty, so an idle server holds none.
type dispatcher struct {
	mu      sync.Mutex
	room    sync.Cond // signalled when the queue is taken
	jobs    []dispatchJob
	running bool
}

// push queues j, waiting while the queue is full, and starts the
// goroutine if none runs.
func (s *Server) push(j dispatchJob) {
	q := &s.disp
	q.mu.Lock()
	if q.room.L == nil {
		q.room.L = &q.mu
	}
	for len(q.jobs) >= maxDispatchQueue {
		q.room.Wait()
	}
	q.jobs = append(q.jobs, j)
	start := !q.running
	q.running = true
	s.m.FanoutQueued.Set(float64(len(q.jobs)))
	q.mu.Unlock()
	if start {
		go s.dispatch()
	}
}

// dispatch runs the queued jobs in order until the queue is empty.
func (s *Server) dispatch() {
	q := &s.disp
	for {
		q.mu.Lock()
		jobs := q.jobs
		q.jobs = nil
		if len(jobs) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		if q.room.L != nil {
			q.room.Broadcast()
		}
		s.m.FanoutQueued.Set(0)
		q.mu.Unlock()
		for i := range jobs {
			j := &jobs[i]
			if j.fn != nil {
				j.fn()
				continue
			}
			s.deliverAll(j.d, j.subs, j.sent)
		}
	}
}

// inOrder runs fn on the dispatcher after every job queued before it, and
// returns when fn has run.
func (s *Server) inOrder(fn func()) {
	done := make(chan struct{})
	s.push(dispatchJob{fn: func() {
		defer close(done)
		fn()
	}})
	<-done
}

// deliverAll sends d to each of subs that takes it, encoding it once, and
// records the recipients, sent of them served before.
func (s *Server) deliverAll(d ingest.Delivery, subs []*subscription, sent int) {
	js := d.JSON
	for _, sub := range subs {
		if s.deliver(sub, d, &js) {
			sent++
		}
	}
	s.m.FanoutRecipients.Observe(float64(sent))
}
