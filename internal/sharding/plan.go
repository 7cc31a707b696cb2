package sharding

// State is where this replica stands with one shard.
type State int

const (
	// Idle: not this replica's; nothing of the shard is reconciled or queued.
	Idle State = iota
	// Active: this replica holds the shard's write fence and reconciles its registries.
	Active
	// Draining: the shard belongs to another member now; no new reconcile of it starts, and
	// the fence is released once the running ones have finished.
	Draining
)

func (s State) String() string {
	switch s {
	case Active:
		return "Active"
	case Draining:
		return "Draining"
	default:
		return "Idle"
	}
}

// Action is the next step for one shard.
type Action int

const (
	// Keep: nothing to do.
	Keep Action = iota
	// Acquire: take the shard's fence (only once no other live member holds it), then
	// reconcile every registry of the shard.
	Acquire
	// Drain: stop starting reconciles of the shard.
	Drain
	// Release: give the fence up (no reconcile of the shard is running), so the new owner
	// can take it.
	Release
	// Resume: a draining shard came back to this replica before it was released.
	Resume
	// Drop: the fence was taken by another member (this replica was thought dead): stop at
	// once, release nothing.
	Drop
)

func (a Action) String() string {
	return [...]string{"Keep", "Acquire", "Drain", "Release", "Resume", "Drop"}[a]
}

// ShardView is what Next needs to know of one shard on this replica.
type ShardView struct {
	State State
	// Owner is the shard's owner by the current members ("" when membership is unknown).
	Owner string
	// InFlight is the number of reconciles of the shard running now.
	InFlight int
	// Fenced is true when a write found the fence taken by someone else.
	Fenced bool
}

// Next is the step for one shard: drain-then-acknowledge. An owner that loses a shard first
// stops starting reconciles (Drain), waits for the running ones, then releases the fence
// (Release); the new owner acquires the fence only once it is released or its holder is no
// longer a member (Acquire, checked against the store). Never two writers, and between
// them nobody writes (the store keeps every endpoint meanwhile: nothing is deleted).
func Next(self string, v ShardView) Action {
	mine := v.Owner == self && self != ""
	switch v.State {
	case Active:
		switch {
		case v.Fenced:
			return Drop
		case !mine:
			return Drain
		}
	case Draining:
		switch {
		case v.Fenced:
			return Drop
		case mine:
			return Resume
		case v.InFlight == 0:
			return Release
		}
	case Idle:
		if mine {
			return Acquire
		}
	}
	return Keep
}
