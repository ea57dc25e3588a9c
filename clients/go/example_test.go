package cuzk_test

// The snippets of docs/integrating.md, compiled (and vetted) with the package's tests so
// that the document cannot drift from the API. They need a running cuzkd, so they have no
// "Output:" comment: go test compiles them and does not run them. Each snippet in the
// document is the body between a function's "// snippet: NAME" and "// end" lines; the test
// TestIntegratingSnippetsAreTheExamples (integrating_test.go) checks that the document
// carries them verbatim.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	cuzk "github.com/cuzk/cuzk/clients/go"
)

var (
	c1JSON                 []byte // a SealCommitPhase1Output, as Lotus and Curio keep it
	minerID, sectorNumber  uint64 = 1234, 7
	windowInput, snapInput []byte
	progress               = func(string, ...interface{}) {}
	errNotHere             = errors.New("not on this host")
	porepNeedsBytes        = uint64(120 << 30) // see docs/operating.md for a sector's memory
)

func Example_provePoRep() {
	ctx := context.Background()
	// snippet: prove
	c, err := cuzk.Dial(ctx, cuzk.DefaultSocket(), "curio/1.24") // $CUZK_SOCKET or /run/cuzk/cuzk.sock
	if err != nil {
		return // no daemon: fall back to local proving, or fail the task
	}
	defer c.Close()
	proof, err := c.ProvePoRep(ctx, c1JSON, minerID, sectorNumber) // verified; 192 bytes per partition
	// end
	_, _ = proof, err
}

func Example_submitWatchRetry() {
	ctx := context.Background()
	// snippet: submit-watch
	// One request id per sector and proof: a retry after a transport error finds the same
	// job instead of proving twice.
	rid := fmt.Sprintf("porep/%d/%d", minerID, sectorNumber)
	submit := cuzk.Submit{RequestID: &rid, Input: cuzk.PoRepInput{C1: c1JSON, MinerID: minerID, SectorNumber: &sectorNumber}}
	var proof *cuzk.ProofResult
	for attempt, backoff := 0, time.Second; ; attempt++ {
		c, err := cuzk.Dial(ctx, cuzk.DefaultSocket(), "curio/1.24")
		if err == nil {
			var acc *cuzk.Accepted
			if acc, err = c.Submit(ctx, submit); err == nil {
				proof, err = c.Watch(ctx, acc.JobID, func(e cuzk.ProgressEvent) {
					progress("job %d: %s, partition %d/%d done", e.JobID, e.Stage, e.PartitionsDone, e.PartitionsTotal)
				})
				if errors.Is(err, cuzk.ErrMalformedFrame) { // a daemon older than Watch
					proof, err = c.Await(ctx, acc.JobID)
				}
			}
			c.Close()
		}
		if err == nil {
			break
		}
		// QueueFull, ResourceExhausted, Busy, ShuttingDown: the same request later.
		// ErrClosed and other transport errors: the job may still run; the request id
		// finds it. ProvingFailed, InvalidInput, Cancelled: resubmitting gives the same
		// answer (the request id was released, so it would make a new job).
		var daemonErr *cuzk.Error
		if (errors.As(err, &daemonErr) && !cuzk.Retryable(err)) || attempt == 5 || ctx.Err() != nil {
			log.Printf("sector %d: %v", sectorNumber, err)
			return
		}
		time.Sleep(backoff)
		backoff *= 2
	}
	// end
	_ = proof
}

func Example_lookupAfterRestart() {
	ctx := context.Background()
	c, err := cuzk.Dial(ctx, cuzk.DefaultSocket(), "curio/1.24")
	if err != nil {
		return
	}
	defer c.Close()
	// snippet: lookup
	// After a restart of the miner: find the job by its request id, not by sending the
	// input again (an unknown id: the daemon restarted too, or the result expired).
	rid := fmt.Sprintf("porep/%d/%d", minerID, sectorNumber)
	job, err := c.Lookup(ctx, rid)
	switch {
	case errors.Is(err, cuzk.ErrUnknownJob):
		// submit it again (same request id)
	case err == nil && (job.State == cuzk.Queued || job.State == cuzk.Running || job.State == cuzk.Succeeded):
		proof, err := c.Await(ctx, job.JobID)
		_, _ = proof, err
	}
	// end
}

func Example_canTakeTask() {
	ctx := context.Background()
	c, err := cuzk.Dial(ctx, cuzk.DefaultSocket(), "curio-scheduler")
	if err != nil {
		return
	}
	defer c.Close()
	// snippet: capacity
	// Can this host take one more PoRep C2 and start it within `within`? One cheap request:
	// it waits for no proof, and its counts are all users'.
	take := func(within time.Duration) (bool, error) {
		capa, err := c.Capacity(ctx, cuzk.PoRep, nil) // nil: the kind's default class (Normal)
		if err != nil {
			return false, err // ErrMalformedFrame: a daemon older than Capacity
		}
		if capa.QueueRoom == 0 || capa.BudgetFreeBytes < porepNeedsBytes {
			return false, nil // a Submit would get QueueFull, or wait for memory
		}
		if capa.EstimatedStartMs == nil {
			// A kind it waits for has not been proved here yet: no estimate, only counts.
			return capa.QueuedAtOrAbove(capa.Priority) == 0, nil
		}
		return time.Duration(*capa.EstimatedStartMs)*time.Millisecond <= within, nil
	}
	// end
	if ok, err := take(10 * time.Minute); err != nil || !ok {
		_ = errNotHere
	}
}

func Example_windowPoSt() {
	ctx := context.Background()
	c, err := cuzk.Dial(ctx, cuzk.DefaultSocket(), "lotus-miner")
	if err != nil {
		return
	}
	defer c.Close()
	// snippet: preload
	// Before a proving deadline: load the WindowPoSt set by the miner's own proof type id
	// (abi.RegisteredPoStProof; 13 = StackedDrgWindow32GiBV1_1). Admins only.
	if _, err := c.PreloadProof(ctx, cuzk.PoStProof(13)); errors.Is(err, cuzk.ErrAdminRequired) {
		// run the miner as the daemon's user or list its uid in socket.admin_uids
	}
	proof, err := c.ProveWindowPoSt(ctx, windowInput) // one partition's JSON input
	// end
	_, _ = proof, err
	_ = snapInput
}
