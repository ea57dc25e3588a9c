package ffi

import (
	"bytes"
	"testing"
)

// The layout docs/inputs.md documents, byte for byte (src/proofs/binary.rs checks the same
// bytes on the daemon's side).
func TestBinaryLayout(t *testing.T) {
	var r [32]byte
	for i := range r {
		r[i] = 7
	}
	zero := uint64(0)
	got := WindowPoStInput{ProofType: 10, MinerID: 1000, Randomness: r, Partition: &zero,
		VanillaProofs: [][]byte{{1, 2, 3}, {}}}.Binary()
	want := append([]byte("CZB1"), 10, 0xe8, 0x07)
	want = append(want, r[:]...)
	want = append(want, 1, 0, 2, 3, 1, 2, 3, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("WindowPoSt binary input:\n got %x\nwant %x", got, want)
	}
	deadline := WindowPoStInput{ProofType: 10, MinerID: 1, Randomness: r}.Binary()
	if deadline[4+1+1+32] != 0 {
		t.Errorf("a deadline has no partition: %x", deadline)
	}
	win := WinningPoStInput{ProofType: 0, MinerID: 5, Randomness: r, VanillaProofs: [][]byte{{9}}}.Binary()
	if !bytes.Equal(win[:7], []byte{'C', 'Z', 'B', '1', 0, 5, 7}) || !bytes.Equal(win[len(win)-3:], []byte{1, 1, 9}) {
		t.Errorf("WinningPoSt binary input: %x", win)
	}
	snap := SnapDealsInput{ProofType: 3}.Binary()
	if len(snap) != 4+1+96+1 || snap[4] != 3 {
		t.Errorf("SnapDeals binary input: %x", snap)
	}
}

func TestRandomnessIsMaskedOnACopy(t *testing.T) {
	in := bytes.Repeat([]byte{0xff}, 32)
	r, err := Randomness32(in)
	if err != nil || r[31] != 0x3f || in[31] != 0xff || r[0] != 0xff {
		t.Fatalf("%x %x %v", r, in, err)
	}
	if _, err := Randomness32(in[:31]); err == nil {
		t.Fatal("31 bytes of randomness accepted")
	}
}

func TestCommitmentCIDs(t *testing.T) {
	var comm [32]byte
	comm[0], comm[31] = 1, 2
	for _, sealed := range []bool{true, false} {
		c := CommitmentCID(comm, sealed)
		got, err := CommitmentFromCID(c)
		if err != nil || got != comm {
			t.Fatalf("sealed=%v: %x %v", sealed, got, err)
		}
	}
	// go-fil-commcid's prefix of a sealed commitment: 01 82 e2 03 81 e8 02 20.
	if p := CommitmentCID(comm, true)[:8]; !bytes.Equal(p, []byte{0x01, 0x82, 0xe2, 0x03, 0x81, 0xe8, 0x02, 0x20}) {
		t.Errorf("sealed CID prefix %x", p)
	}
	bad := CommitmentCID(comm, true)
	bad[1] = 0x70 // dag-pb
	if _, err := CommitmentFromCID(bad); err == nil {
		t.Error("a non-commitment CID accepted")
	}
	if _, err := CommitmentFromCID(CommitmentCID(comm, true)[:20]); err == nil {
		t.Error("a short CID accepted")
	}
}
