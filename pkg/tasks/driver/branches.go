package driver

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Fork describes the branches of a parallel step, as the Change that
// starts them carries them (Change.Fork).
type Fork struct {
	// Name is the step's name: the event its join is (Change.Await).
	Name string
	// Number is the task's n-th parallel step, from 1; branch ids carry it.
	Number int
	// Branches is how many branches the step has; Concurrency how many
	// are in flight at once (1 to Branches).
	Branches, Concurrency int
}

// A Brancher is a [Store] that runs the branches of parallel steps (tasks.All)
// in invocations of their own. A queue message for a branch carries a
// branch id ([BranchID]: the task's id, the fork's number and the
// branch's index), which Server.Advance recognises. A Store that is not
// one runs the branches one after another (see All).
//
// Contract (the storetest suite checks it):
//
//   - A Commit whose Change carries a Fork starts it, in the same atomic
//     write as the task's release to await its join (Change.Await = the
//     fork's Name): its first Concurrency branches are dispatched (a
//     Dispatcher enqueues them; else the caller does).
//   - Each branch is claimed, renewed and committed like a task, under a
//     lease and a fencing generation of its own: ClaimBranch refuses a
//     branch another live lease holds, charges an attempt, and takes no
//     finished branch, none not yet dispatched, and none of a task that
//     ended or is gone. A CommitBranch under a stale generation, or after
//     the task ended, fails with ErrFenced and changes nothing.
//   - A branch's final commit (a value or a final error) dispatches the
//     next branch not yet dispatched, if any (BranchCommit.Next), and the
//     last one to finish delivers the join: a task that awaits it is
//     resumed (BranchCommit.Resumed), and one that awaits it later is
//     released to run at once (Change.Await).
//   - A branch's keys, like every key of its task, live in the task's
//     Redis Cluster slot and expire with the task.
type Brancher interface {
	// ClaimBranch takes a lease on the branch id for a worker and charges
	// it an attempt, or says why not (BranchClaim.State). It answers
	// ErrNotFound for a branch that does not exist.
	ClaimBranch(ctx context.Context, id string, now time.Time, lease time.Duration) (*BranchClaim, error)
	// RenewBranch makes the lease of the claim gen of branch id last until
	// now+lease, as LeaseRenewer.RenewLease does for a task.
	RenewBranch(ctx context.Context, id string, gen int64, now time.Time, lease time.Duration) error
	// BranchCancelled reports whether the branch id held under gen must
	// stop: its task was cancelled or ended, or another claim took the
	// branch.
	BranchCancelled(ctx context.Context, id string, gen int64) (bool, error)
	// CommitBranch writes the outcome of the branch id under the claim
	// gen (see BranchChange) and ends its lease.
	CommitBranch(ctx context.Context, id string, gen int64, ch *BranchChange) (*BranchCommit, error)
	// Joined returns the outcomes of the branches of the fork number of
	// task taskID, in order, once every branch has finished; nil while
	// some have not.
	Joined(ctx context.Context, taskID string, fork int) ([]BranchOutcome, error)
	// Stalled returns, for the sweeper, the ids of the branches of task
	// taskID's open fork that were dispatched and are neither finished,
	// leased nor waiting for a retry that is not due at now (their
	// message may be lost: enqueueing them again is harmless), and
	// whether the task has an open fork at all.
	Stalled(ctx context.Context, taskID string, now time.Time) (ids []string, open bool, err error)
}

// BranchState says what ClaimBranch found.
type BranchState int

const (
	// BranchClaimed: the claim holds the branch (BranchClaim.Claim).
	BranchClaimed BranchState = iota
	// BranchLeased: another worker holds it until Until.
	BranchLeased
	// BranchWaiting: it waits for a retry, due at Until.
	BranchWaiting
	// BranchIdle: nothing to run: it finished, its turn has not come, or
	// its task ended.
	BranchIdle
)

// BranchClaim is what ClaimBranch found.
type BranchClaim struct {
	State BranchState
	// Until is the end of the lease (BranchLeased) or the retry's time
	// (BranchWaiting).
	Until time.Time
	// Claim, when State is BranchClaimed, is the branch's claim: the
	// task's record, journal, responses and events as of the claim, and
	// the branch's own fencing generation (Gen), attempts and lost lease.
	Claim *Claim
}

// BranchChange is the outcome of one attempt of a branch.
type BranchChange struct {
	Now time.Time
	// Value is the branch's result; or Err its final error; or Err the
	// error of the attempt and Retry when the branch runs again; or
	// Release: the attempt did not start (the invocation's budget), the
	// branch runs again now and the attempt is not charged.
	Value   json.RawMessage
	Err     string
	Retry   time.Time
	Release bool
	// Attempt and Took describe the attempt, for operators.
	Attempt int
	Took    time.Duration
}

// BranchCommit is what a CommitBranch did besides writing the outcome.
type BranchCommit struct {
	// Next are the branches it dispatched: a store that is not a
	// Dispatcher leaves enqueueing them to the caller.
	Next []string
	// Resumed: it delivered the join and resumed the task (the caller
	// enqueues it, unless the store dispatched it).
	Resumed bool
}

// BranchOutcome is the outcome of a finished branch: its result, or its
// final error.
type BranchOutcome struct {
	Value json.RawMessage `json:"v,omitempty"`
	Err   string          `json:"e,omitempty"`
}

// BranchID is the queue id of branch index of the fork-th parallel step
// of task taskID: "taskID.fork.index".
func BranchID(taskID string, fork, index int) string {
	return taskID + "." + strconv.Itoa(fork) + "." + strconv.Itoa(index)
}

// ParseBranchID splits a branch id made by BranchID; ok is false for
// anything else (a task id among them).
func ParseBranchID(id string) (taskID string, fork, index int, ok bool) {
	task, rest, ok := strings.Cut(id, ".")
	if !ok || !ValidID(task) {
		return "", 0, 0, false
	}
	f, i, ok := strings.Cut(rest, ".")
	fork, okF := decimal(f, 1<<30)
	index, okI := decimal(i, MaxBranches-1)
	if !ok || !okF || !okI || fork < 1 {
		return "", 0, 0, false
	}
	return task, fork, index, true
}

// decimal parses a canonical decimal (no sign, no leading zero) up to max.
func decimal(s string, max int) (int, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= max
}
