package ffi

import (
	"encoding/binary"
	"fmt"
)

// The binary inputs of docs/inputs.md ("Binary inputs"): the magic "CZB1", then the fields
// postcard-encoded (unsigned integers as LEB128 varints, a 32-byte array as its bytes, a
// byte string or list as its varint length then its items, an option as 0, or 1 and its
// value). Their byte strings travel raw, not base64 as in the JSON inputs: a 32 GiB
// WindowPoSt partition's 2,349 vanilla proofs are about 58 MB.

var magic = []byte("CZB1")

type writer struct{ buf []byte }

func (w *writer) varint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *writer) bytes32(b [32]byte) {
	w.buf = append(w.buf, b[:]...)
}
func (w *writer) list(items [][]byte) {
	w.varint(uint64(len(items)))
	for _, it := range items {
		w.varint(uint64(len(it)))
		w.buf = append(w.buf, it...)
	}
}

func newWriter(vanilla [][]byte) *writer {
	n := len(magic) + 64
	for _, v := range vanilla {
		n += len(v) + binary.MaxVarintLen64
	}
	w := &writer{buf: make([]byte, 0, n)}
	w.buf = append(w.buf, magic...)
	return w
}

// Randomness32 is a PoSt's 32-byte challenge randomness with its top two bits cleared, as
// filecoin-ffi does before proving (so that it is a field element); the caller's slice is
// not changed.
func Randomness32(r []byte) ([32]byte, error) {
	var out [32]byte
	if len(r) != 32 {
		return out, fmt.Errorf("cuzk/ffi: randomness must be 32 bytes, not %d", len(r))
	}
	copy(out[:], r)
	out[31] &= 0x3f
	return out, nil
}

// WinningPoStInput is a WinningPoSt to prove: filecoin-ffi's GenerateWinningPoStWithVanilla
// arguments.
type WinningPoStInput struct {
	ProofType     RegisteredPoStProof // 0–4
	MinerID       ActorID
	Randomness    [32]byte
	VanillaProofs [][]byte // one per challenged sector (generate_single_vanilla_proof)
}

// Binary is the input as cuzkd reads it.
func (in WinningPoStInput) Binary() []byte {
	w := newWriter(in.VanillaProofs)
	w.varint(uint64(in.ProofType))
	w.varint(uint64(in.MinerID))
	w.bytes32(in.Randomness)
	w.list(in.VanillaProofs)
	return w.buf
}

// WindowPoStInput is a WindowPoSt to prove: one partition (Partition set) as
// GenerateSinglePartitionWindowPoStWithVanilla, or a whole deadline (Partition nil) as
// GenerateWindowPoStWithVanilla.
type WindowPoStInput struct {
	ProofType     RegisteredPoStProof // 5–14
	MinerID       ActorID
	Randomness    [32]byte
	Partition     *uint64
	VanillaProofs [][]byte // one per sector of the partition, or of the deadline
}

// Binary is the input as cuzkd reads it.
func (in WindowPoStInput) Binary() []byte {
	w := newWriter(in.VanillaProofs)
	w.varint(uint64(in.ProofType))
	w.varint(uint64(in.MinerID))
	w.bytes32(in.Randomness)
	if in.Partition == nil {
		w.buf = append(w.buf, 0)
	} else {
		w.buf = append(w.buf, 1)
		w.varint(*in.Partition)
	}
	w.list(in.VanillaProofs)
	return w.buf
}

// SnapDealsInput is a SnapDeals update proof to prove: GenerateUpdateProofWithVanilla's
// arguments, with the commitments as their 32 bytes (CommitmentFromCID).
type SnapDealsInput struct {
	ProofType     RegisteredUpdateProof // 0–4
	CommROld      [32]byte              // the sector key's
	CommRNew      [32]byte              // the new replica's
	CommDNew      [32]byte              // the new data's
	VanillaProofs [][]byte              // one per partition (generate_partition_proofs)
}

// Binary is the input as cuzkd reads it.
func (in SnapDealsInput) Binary() []byte {
	w := newWriter(in.VanillaProofs)
	w.varint(uint64(in.ProofType))
	w.bytes32(in.CommROld)
	w.bytes32(in.CommRNew)
	w.bytes32(in.CommDNew)
	w.list(in.VanillaProofs)
	return w.buf
}
