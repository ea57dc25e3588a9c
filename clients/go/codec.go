package cuzk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// LengthPrefix is the size of a frame's big-endian payload length (protocol.md section 1).
const LengthPrefix = 4

// DefaultMaxFrameSize is the daemon's default protocol.max_frame_size (64 MiB). The client
// reads frames up to this size before the Welcome has announced the daemon's own limit.
const DefaultMaxFrameSize uint32 = 64 << 20

// ErrMalformed is matched (errors.Is) by every failure to decode a message from the daemon:
// a truncated payload, a bad varint, an unknown variant, invalid UTF-8 or trailing bytes.
// (ErrMalformedFrame is the daemon's verdict on a message of ours.)
var ErrMalformed = errors.New("cuzk: malformed message")

// DecodeError says why a payload is not a valid message.
type DecodeError struct {
	Offset int    // byte offset in the payload where decoding failed
	Reason string // what was wrong there
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("cuzk: malformed message at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrMalformed) hold.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// UnknownVariantError is a variant index this package does not know, for instance a
// response variant appended to the protocol after this client was written. The payload was
// read completely, so the connection stays usable.
type UnknownVariantError struct {
	Enum  string // "Response", "Request", "ProofKind", ...
	Index uint32
}

func (e *UnknownVariantError) Error() string {
	return fmt.Sprintf("cuzk: unknown %s variant %d", e.Enum, e.Index)
}

// Is makes errors.Is(err, ErrMalformed) hold.
func (e *UnknownVariantError) Is(target error) bool { return target == ErrMalformed }

// FrameSizeError is a frame whose payload exceeds the limit. When reading, nothing was
// allocated for it and the connection is closed, since the next frame cannot be found.
type FrameSizeError struct {
	Len uint64 // the announced (or, when writing, the actual) payload length
	Max uint32 // the limit
}

func (e *FrameSizeError) Error() string {
	return fmt.Sprintf("cuzk: frame of %d bytes exceeds the limit of %d bytes", e.Len, e.Max)
}

// Is makes errors.Is(err, ErrFrameTooLarge) hold, as it does for the daemon's
// FrameTooLarge: either way the frame was too large for the receiver.
func (e *FrameSizeError) Is(target error) bool { return target == ErrFrameTooLarge }

// encoder appends postcard encodings (protocol.md section 2) to a byte slice.
type encoder struct{ buf []byte }

func (e *encoder) varint(v uint64) {
	for v >= 0x80 {
		e.buf = append(e.buf, byte(v)|0x80)
		v >>= 7
	}
	e.buf = append(e.buf, byte(v))
}

func (e *encoder) u32(v uint32)     { e.varint(uint64(v)) }
func (e *encoder) u64(v uint64)     { e.varint(v) }
func (e *encoder) variant(i uint32) { e.varint(uint64(i)) }

func (e *encoder) boolean(b bool) {
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) bytes(b []byte) {
	e.varint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) str(s string) {
	e.varint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) optU64(v *uint64) {
	if v == nil {
		e.buf = append(e.buf, 0)
		return
	}
	e.buf = append(e.buf, 1)
	e.u64(*v)
}

func (e *encoder) optStr(v *string) {
	if v == nil {
		e.buf = append(e.buf, 0)
		return
	}
	e.buf = append(e.buf, 1)
	e.str(*v)
}

// decoder reads postcard from a payload. The first failure sticks: later reads return zero
// values and finish() reports the first error, so message decoders need no error plumbing
// per field and can never index out of range.
type decoder struct {
	buf []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...interface{}) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, Reason: fmt.Sprintf(format, args...)}
	}
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.buf) {
		d.fail("truncated: expected %s", what)
		return 0
	}
	b := d.buf[d.off]
	d.off++
	return b
}

// varint reads an unsigned LEB128 value of at most maxBytes bytes whose value fits in
// 7*(maxBytes-1)+lastBits bits, as postcard does: 5 bytes (last ≤ 0x0f) for u32, 10 bytes
// (last ≤ 0x01) for u64. Anything longer or larger is an error, never a silent wrap.
func (d *decoder) varint(what string, maxBytes int, lastMax byte) uint64 {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		b := d.byte1(what)
		if d.err != nil {
			return 0
		}
		if i == maxBytes-1 && b > lastMax {
			d.off--
			d.fail("varint overflow in %s", what)
			return 0
		}
		v |= uint64(b&0x7f) << (7 * uint(i))
		if b&0x80 == 0 {
			return v
		}
	}
	d.fail("varint overflow in %s", what) // unreachable: the last byte check catches it
	return 0
}

func (d *decoder) u32(what string) uint32 { return uint32(d.varint(what, 5, 0x0f)) }
func (d *decoder) u64(what string) uint64 { return d.varint(what, 10, 0x01) }

// variant reads an enum's variant index (postcard encodes it as a u32 varint).
func (d *decoder) variant(what string) uint32 { return d.u32(what) }

func (d *decoder) boolean(what string) bool { return d.flag(what, "bool byte") }

// flag reads a byte that must be 0 or 1 (a bool, an Option's tag); kind names it in errors.
func (d *decoder) flag(what, kind string) bool {
	switch b := d.byte1(what); {
	case d.err != nil:
		return false
	case b == 0:
		return false
	case b == 1:
		return true
	default:
		d.off--
		d.fail("%s: %s %#02x", what, kind, b)
		return false
	}
}

// length reads a byte or element count and checks it against the bytes left, so a hostile
// length never causes a large allocation: every element takes at least one byte.
func (d *decoder) length(what string) int {
	n := d.u64(what)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.buf)-d.off) {
		d.fail("truncated: %s announces %d, %d bytes left", what, n, len(d.buf)-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) bytes(what string) []byte {
	n := d.length(what)
	if d.err != nil {
		return nil
	}
	out := make([]byte, n)
	copy(out, d.buf[d.off:d.off+n])
	d.off += n
	return out
}

func (d *decoder) str(what string) string {
	start := d.off
	n := d.length(what)
	if d.err != nil {
		return ""
	}
	raw := d.buf[d.off : d.off+n]
	if !utf8.Valid(raw) {
		d.off = start
		d.fail("%s is not valid UTF-8", what)
		return ""
	}
	d.off += n
	return string(raw)
}

// option reads an Option's tag: true when a value follows.
func (d *decoder) option(what string) bool { return d.flag(what, "option tag") }

func (d *decoder) optU64(what string) *uint64 {
	if !d.option(what) {
		return nil
	}
	v := d.u64(what)
	if d.err != nil {
		return nil
	}
	return &v
}

func (d *decoder) optStr(what string) *string {
	if !d.option(what) {
		return nil
	}
	v := d.str(what)
	if d.err != nil {
		return nil
	}
	return &v
}

func (d *decoder) unknown(enum string, index uint32) {
	if d.err == nil {
		d.err = &UnknownVariantError{Enum: enum, Index: index}
	}
}

// finish reports the first error, or trailing bytes: a message a newer peer extended must
// not be half-understood (protocol.md section 1).
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if d.off != len(d.buf) {
		return &DecodeError{Offset: d.off, Reason: fmt.Sprintf("%d trailing bytes after the message", len(d.buf)-d.off)}
	}
	return nil
}

// AppendFrame appends the length prefix and payload to dst. A payload over max is refused
// (the daemon would close the connection on it).
func AppendFrame(dst, payload []byte, max uint32) ([]byte, error) {
	if uint64(len(payload)) > uint64(max) {
		return dst, &FrameSizeError{Len: uint64(len(payload)), Max: max}
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...), nil
}

// ReadFrame reads one frame's payload from r. The length prefix is checked against max
// before anything is allocated for the payload. A stream that ends inside a frame gives
// io.ErrUnexpectedEOF; one that ends before a frame starts gives io.EOF.
func ReadFrame(r io.Reader, max uint32) ([]byte, error) {
	var prefix [LengthPrefix]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if n > max {
		return nil, &FrameSizeError{Len: uint64(n), Max: max}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return payload, nil
}
