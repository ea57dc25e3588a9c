package ffi

import (
	"encoding/binary"
	"fmt"
)

// Filecoin's commitment CIDs (go-fil-commcid): CIDv1, codec and multihash as below, a
// 32-byte digest.
const (
	codecSealed   = 0xf102 // fil-commitment-sealed
	codecUnsealed = 0xf101 // fil-commitment-unsealed
	hashPoseidon  = 0xb401 // poseidon-bls12_381-a2-fc1 (CommR)
	hashSha256    = 0x1012 // sha2-256-trunc254-padded (CommD)
)

// CommitmentFromCID returns the 32-byte commitment a sealed (CommR) or unsealed (CommD)
// commitment CID carries, from the CID's binary form (cid.Cid's Bytes()).
func CommitmentFromCID(cid []byte) ([32]byte, error) {
	var out [32]byte
	fields := make([]uint64, 0, 4)
	rest := cid
	for i := 0; i < 4; i++ {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return out, fmt.Errorf("cuzk/ffi: %d-byte CID: bad varint", len(cid))
		}
		fields = append(fields, v)
		rest = rest[n:]
	}
	version, codec, hash, size := fields[0], fields[1], fields[2], fields[3]
	switch {
	case version != 1:
		return out, fmt.Errorf("cuzk/ffi: CID version %d, commitments are CIDv1", version)
	case !(codec == codecSealed && hash == hashPoseidon) && !(codec == codecUnsealed && hash == hashSha256):
		return out, fmt.Errorf("cuzk/ffi: CID codec %#x hash %#x is not a Filecoin commitment", codec, hash)
	case size != 32 || len(rest) != 32:
		return out, fmt.Errorf("cuzk/ffi: commitment CID digest of %d bytes (%d follow), want 32", size, len(rest))
	}
	copy(out[:], rest)
	return out, nil
}

// CommitmentCID is the binary CID of a commitment (sealed: CommR, else CommD), as
// go-fil-commcid makes it; the inverse of CommitmentFromCID.
func CommitmentCID(comm [32]byte, sealed bool) []byte {
	codec, hash := uint64(codecUnsealed), uint64(hashSha256)
	if sealed {
		codec, hash = codecSealed, hashPoseidon
	}
	b := binary.AppendUvarint(nil, 1)
	b = binary.AppendUvarint(b, codec)
	b = binary.AppendUvarint(b, hash)
	b = binary.AppendUvarint(b, 32)
	return append(b, comm[:]...)
}
