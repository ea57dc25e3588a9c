// Package ffi proves through cuzkd with filecoin-ffi's calls: the functions Lotus and Curio
// call (SealCommitPhase2, GenerateWinningPoStWithVanilla,
// GenerateSinglePartitionWindowPoStWithVanilla, GenerateWindowPoStWithVanilla,
// GenerateUpdateProofWithVanilla), with Curio's ffiselect signatures: the context first,
// then filecoin-ffi's arguments in filecoin-ffi's order, raw bytes in and out.
//
// The types mirror go-state-types' (abi.RegisteredPoStProof is an int64 with the same
// values, abi.ActorID a uint64, proof.PoStProof the same two fields) without importing it:
// this package needs the standard library and the cuzk client package only. An adapter in
// Curio converts each argument (RegisteredPoStProof(pt), ActorID(miner), cid.Bytes()) and
// the result back, one line per function; docs/integrating.md has it.
//
// Every proof was verified by cuzkd before it is returned. Inputs travel as the binary
// inputs of docs/inputs.md (no base64); those of DefaultFileThreshold bytes or more are passed to the
// daemon as an unlinked temporary file's descriptor rather than in a frame.
package ffi

import (
	"context"
	"fmt"

	cuzk "github.com/cuzk/cuzk/clients/go"
)

// Filecoin's integer proof types and ids (go-state-types' abi), same values.
type (
	RegisteredSealProof   int64
	RegisteredPoStProof   int64
	RegisteredUpdateProof int64
	ActorID               uint64
	SectorNumber          uint64
)

// PoStProof is a PoSt proof as go-state-types' proof.PoStProof holds it.
type PoStProof struct {
	PoStProof  RegisteredPoStProof
	ProofBytes []byte
}

// PartitionProof is one WindowPoSt partition's proof (filecoin-ffi's PartitionProof).
type PartitionProof PoStProof

// DefaultFileThreshold is the input size from which a Prover passes the input as a file
// descriptor (SubmitFd) instead of in a frame, unless its FileThreshold says otherwise.
const DefaultFileThreshold = 32 << 20

// Prover proves through the cuzkd at Socket. Each call dials its own connection, since a
// connection carries one request at a time and a proof holds it until it ends; calls may
// run concurrently. When a call's context ends first, its job is cancelled.
type Prover struct {
	Socket string // the daemon's socket (cuzk.DefaultSocket())
	Name   string // the client's name in the daemon's logs ("curio/1.24")
	// FileThreshold: inputs of at least this many bytes go as a file descriptor; 0 means
	// DefaultFileThreshold.
	FileThreshold int
}

// New is a Prover of the daemon at socket.
func New(socket, name string) *Prover { return &Prover{Socket: socket, Name: name} }

// prove submits in (payload given separately, so that a large one goes as a file) and
// waits for its proof, cancelling the job if ctx ends first.
func (p *Prover) prove(ctx context.Context, in cuzk.ProofInput, payload []byte) ([]byte, error) {
	c, err := cuzk.Dial(ctx, p.Socket, p.Name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := cuzk.Submit{Input: withPayload(in, payload)}
	var acc *cuzk.Accepted
	threshold := p.FileThreshold
	if threshold <= 0 {
		threshold = DefaultFileThreshold
	}
	if len(payload) >= threshold {
		f, ferr := cuzk.InputFile(payload)
		if ferr != nil {
			return nil, fmt.Errorf("cuzk/ffi: writing the input file: %w", ferr)
		}
		s.Input = withPayload(in, []byte{})
		acc, err = c.SubmitFile(ctx, s, f)
		f.Close()
	} else {
		acc, err = c.Submit(ctx, s)
	}
	if err != nil {
		return nil, err
	}
	proof, err := c.Await(ctx, acc.JobID)
	if err != nil {
		if ctx.Err() != nil {
			cancelJob(p.Socket, p.Name, acc.JobID)
		}
		return nil, err
	}
	if len(proof.Proof) == 0 || len(proof.Proof)%192 != 0 {
		return nil, fmt.Errorf("cuzk/ffi: %s proof of %d bytes is not whole 192-byte partitions", in.Kind(), len(proof.Proof))
	}
	return proof.Proof, nil
}

func withPayload(in cuzk.ProofInput, payload []byte) cuzk.ProofInput {
	switch v := in.(type) {
	case cuzk.PoRepInput:
		v.C1 = payload
		return v
	case cuzk.SnapDealsInput:
		return cuzk.SnapDealsInput{Input: payload}
	case cuzk.WindowPoStInput:
		return cuzk.WindowPoStInput{Input: payload}
	case cuzk.WinningPoStInput:
		return cuzk.WinningPoStInput{Input: payload}
	}
	return in
}

// SealCommitPhase2 proves a PoRep C2 from the C1 output (filecoin-ffi's SealCommitPhase1
// bytes, SealCommitPhase1Output JSON): the proof bytes, 192 per partition. For an
// interactive PoRep these are the bytes filecoin-ffi returns; for NI-PoRep see
// docs/inputs.md (cuzkd returns the partition proofs, not the SnarkPack aggregate).
func (p *Prover) SealCommitPhase2(ctx context.Context, phase1Output []byte, sectorNum SectorNumber, minerID ActorID) ([]byte, error) {
	sector := uint64(sectorNum)
	in := cuzk.PoRepInput{MinerID: uint64(minerID), SectorNumber: &sector}
	return p.prove(ctx, in, phase1Output)
}

// GenerateWinningPoStWithVanilla proves a WinningPoSt from its sectors' vanilla proofs;
// cuzkd runs it ahead of everything (critical).
func (p *Prover) GenerateWinningPoStWithVanilla(ctx context.Context, proofType RegisteredPoStProof, minerID ActorID, randomness []byte, proofs [][]byte) ([]PoStProof, error) {
	r, err := Randomness32(randomness)
	if err != nil {
		return nil, err
	}
	in := WinningPoStInput{ProofType: proofType, MinerID: minerID, Randomness: r, VanillaProofs: proofs}
	proof, err := p.prove(ctx, cuzk.WinningPoStInput{}, in.Binary())
	if err != nil {
		return nil, err
	}
	return []PoStProof{{PoStProof: proofType, ProofBytes: proof}}, nil
}

// GenerateSinglePartitionWindowPoStWithVanilla proves one WindowPoSt partition (its
// sectors' vanilla proofs, partitionIndex its index in the deadline).
func (p *Prover) GenerateSinglePartitionWindowPoStWithVanilla(ctx context.Context, proofType RegisteredPoStProof, minerID ActorID, randomness []byte, proofs [][]byte, partitionIndex uint) (*PartitionProof, error) {
	r, err := Randomness32(randomness)
	if err != nil {
		return nil, err
	}
	partition := uint64(partitionIndex)
	in := WindowPoStInput{ProofType: proofType, MinerID: minerID, Randomness: r, Partition: &partition, VanillaProofs: proofs}
	proof, err := p.prove(ctx, cuzk.WindowPoStInput{}, in.Binary())
	if err != nil {
		return nil, err
	}
	return &PartitionProof{PoStProof: proofType, ProofBytes: proof}, nil
}

// GenerateWindowPoStWithVanilla proves a whole deadline (every sector's vanilla proof, in
// any order) as Lotus's GenerateWindowPoSt: one job, the partitions proved concurrently,
// one PoStProof with the partition proofs concatenated in partition order.
func (p *Prover) GenerateWindowPoStWithVanilla(ctx context.Context, proofType RegisteredPoStProof, minerID ActorID, randomness []byte, proofs [][]byte) ([]PoStProof, error) {
	r, err := Randomness32(randomness)
	if err != nil {
		return nil, err
	}
	in := WindowPoStInput{ProofType: proofType, MinerID: minerID, Randomness: r, VanillaProofs: proofs}
	proof, err := p.prove(ctx, cuzk.WindowPoStInput{}, in.Binary())
	if err != nil {
		return nil, err
	}
	return []PoStProof{{PoStProof: proofType, ProofBytes: proof}}, nil
}

// GenerateUpdateProofWithVanilla proves a SnapDeals update: key, sealed and unsealed are the
// sector key's, the new replica's and the new data's commitment CIDs in binary form
// (cid.Cid's Bytes()), vproofs the partition vanilla proofs.
func (p *Prover) GenerateUpdateProofWithVanilla(ctx context.Context, proofType RegisteredUpdateProof, key, sealed, unsealed []byte, vproofs [][]byte) ([]byte, error) {
	in := SnapDealsInput{ProofType: proofType, VanillaProofs: vproofs}
	var err error
	if in.CommROld, err = CommitmentFromCID(key); err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if in.CommRNew, err = CommitmentFromCID(sealed); err != nil {
		return nil, fmt.Errorf("sealed: %w", err)
	}
	if in.CommDNew, err = CommitmentFromCID(unsealed); err != nil {
		return nil, fmt.Errorf("unsealed: %w", err)
	}
	return p.prove(ctx, cuzk.SnapDealsInput{}, in.Binary())
}
