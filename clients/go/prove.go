package cuzk

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// cancelGrace bounds the best-effort Cancel a helper sends when its context ends first.
const cancelGrace = 10 * time.Second

// ProveJob submits a job, waits for its proof and returns the result. Unlike Prove it
// learns the job id first, so when ctx ends before the proof it cancels the job on a fresh
// connection (best effort, within 10 s) instead of leaving the daemon proving for nobody.
// The Client is closed then, like any Client whose context ends mid-call.
func (c *Client) ProveJob(ctx context.Context, s Submit) (*ProofResult, error) {
	acc, err := c.Submit(ctx, s)
	if err != nil {
		return nil, err
	}
	p, err := c.Await(ctx, acc.JobID)
	if err != nil && ctx.Err() != nil {
		cancelDetached(c.socket, c.name, acc.JobID)
	}
	return p, err
}

// cancelDetached cancels a job on a new connection, ignoring the outcome: the job may have
// finished meanwhile, and the caller's own error is what matters to it.
func cancelDetached(socket, name string, jobID uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	c, err := Dial(ctx, socket, name)
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Cancel(ctx, jobID)
}

func (c *Client) proofBytes(ctx context.Context, in ProofInput) ([]byte, error) {
	p, err := c.ProveJob(ctx, Submit{Input: in})
	if err != nil {
		return nil, err
	}
	if len(p.Proof) == 0 || len(p.Proof)%192 != 0 {
		// The daemon verified the proof; a size that is not whole partitions means the two
		// sides disagree on the format, which a caller must not store as a proof.
		return nil, fmt.Errorf("cuzk: %s proof of %d bytes is not a whole number of 192-byte partitions", in.Kind(), len(p.Proof))
	}
	return p.Proof, nil
}

// ProvePoRep proves a PoRep C2: c1 is the C1 output as Lotus and Curio keep it
// (filecoin-proofs-api SealCommitPhase1Output JSON), minerID the actor id (f01234 → 1234).
// The result is 192 bytes per partition (10 partitions for 32 GiB sectors, 1 for 2 KiB),
// verified by the daemon. Priority: Normal.
func (c *Client) ProvePoRep(ctx context.Context, c1 []byte, minerID uint64, sector uint64) ([]byte, error) {
	return c.proofBytes(ctx, PoRepInput{C1: c1, MinerID: minerID, SectorNumber: &sector})
}

// ProveWinningPoSt proves a WinningPoSt from its JSON input (docs/inputs.md). The daemon
// runs it Critical: ahead of everything, on a worker of its own.
func (c *Client) ProveWinningPoSt(ctx context.Context, input []byte) ([]byte, error) {
	return c.proofBytes(ctx, WinningPoStInput{Input: input})
}

// ProveWindowPoSt proves a WindowPoSt from its JSON input (docs/inputs.md): ONE partition
// when the input has a partition_index, the whole deadline when it has none (as
// ProveWindowPoStDeadline). Priority: High.
func (c *Client) ProveWindowPoSt(ctx context.Context, input []byte) ([]byte, error) {
	return c.proofBytes(ctx, WindowPoStInput{Input: input})
}

// ProveWindowPoStDeadline proves a whole deadline, as Lotus's GenerateWindowPoSt does, in
// one job: input is the WindowPoSt JSON without a partition_index, with every sector's
// vanilla proof (docs/inputs.md). The daemon cuts the sectors into partitions, proves them
// concurrently and verifies the whole proof; the result is the partition proofs
// concatenated in partition order (192 bytes each). A daemon that predates whole-deadline
// inputs answers ErrInvalidInput (a missing partition_index); prove the partitions with
// ProveWindowPoStPartitions then. Priority: High.
func (c *Client) ProveWindowPoStDeadline(ctx context.Context, input []byte) ([]byte, error) {
	return c.proofBytes(ctx, WindowPoStInput{Input: input})
}

// ProveSnapDeals proves a SnapDeals (sector update) from its JSON input (docs/inputs.md).
func (c *Client) ProveSnapDeals(ctx context.Context, input []byte) ([]byte, error) {
	return c.proofBytes(ctx, SnapDealsInput{Input: input})
}

// ProveWindowPoStPartitions proves a deadline's WindowPoSt partitions (one JSON input
// each) concurrently, one connection per partition since a connection carries one request
// at a time, and returns their proofs in the order of the inputs. The daemon spreads the
// jobs over its devices. On the first failure the other partitions' jobs are cancelled and
// that error is returned (naming the partition).
func ProveWindowPoStPartitions(ctx context.Context, socketPath, clientName string, partitions [][]byte) ([][]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	proofs := make([][]byte, len(partitions))
	errs := make([]error, len(partitions))
	var wg sync.WaitGroup
	var once sync.Once
	first := -1
	for i, in := range partitions {
		wg.Add(1)
		go func(i int, in []byte) {
			defer wg.Done()
			c, err := Dial(ctx, socketPath, clientName)
			if err == nil {
				proofs[i], err = c.ProveWindowPoSt(ctx, in)
				c.Close()
			}
			if err != nil {
				errs[i] = err
				// The first real failure stops the rest; their ProveJob cancels their jobs.
				once.Do(func() { first = i; cancel() })
			}
		}(i, in)
	}
	wg.Wait()
	if first >= 0 {
		return nil, fmt.Errorf("cuzk: WindowPoSt partition %d of %d: %w", first, len(partitions), errs[first])
	}
	return proofs, nil
}
