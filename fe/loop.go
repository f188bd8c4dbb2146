package fe

import "context"

// The FE's mutable state (the table, the open transaction, the programmer
// with the datapath handle, the ports' state, the heartbeat policy) has one
// owner at a time, and while the agent runs that owner is its loop: the
// applier, the resolver, the link watcher, Status and queries send it
// requests instead of taking a lock, so nothing ever waits for a lock held
// across a netlink call or a BPF write, and the loop itself never makes a
// netlink call (the resolver looks gateways up before sending it the
// answers).
//
// Ownership is a token in a.owner: the loop holds it while it runs. Before
// Run starts the loop, or after it has stopped, a request takes the token
// and runs on its caller's goroutine, so an agent that is not running (a
// test's, or one being set up) answers the same requests without a
// goroutine of its own.

// newOwner returns the ownership token's channel, holding the token.
func newOwner() chan struct{} {
	c := make(chan struct{}, 1)
	c <- struct{}{}
	return c
}

// loop owns the agent's state until ctx ends, running the requests sent on
// a.reqs one at a time.
func (a *Agent) loop(ctx context.Context) {
	<-a.owner
	defer func() { a.owner <- struct{}{} }()
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-a.reqs:
			req()
		}
	}
}

// do runs fn as the owner of the agent's state and returns when it has run:
// in the loop if it runs, else on the caller's goroutine. fn must not call
// do itself (the loop would wait for itself).
func (a *Agent) do(fn func()) {
	done := make(chan struct{})
	select {
	case a.reqs <- func() { defer close(done); fn() }:
		<-done
	case <-a.owner:
		defer func() { a.owner <- struct{}{} }()
		fn()
	}
}

// startLoop starts the loop on a goroutine of its own; the function it
// returns stops it and waits until it has handed ownership back.
func (a *Agent) startLoop() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.loop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
