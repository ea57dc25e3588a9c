package cuzk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"testing"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestVarintRoundTripsAndLimits(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		e := &encoder{}
		e.u64(v)
		d := &decoder{buf: e.buf}
		if got := d.u64("v"); got != v || d.finish() != nil {
			t.Errorf("u64 %d: got %d, err %v", v, got, d.finish())
		}
	}
	e := &encoder{}
	e.u64(300)
	if !bytes.Equal(e.buf, []byte{0xac, 0x02}) {
		t.Errorf("300 encodes as %x, protocol.md says ac 02", e.buf)
	}
	e = &encoder{}
	e.u64(math.MaxUint64)
	if len(e.buf) != 10 || e.buf[9] != 0x01 {
		t.Errorf("u64 max encodes as %x", e.buf)
	}

	overflows := []struct {
		name string
		buf  []byte
		u32  bool
	}{
		{"u32 of 6 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, true},
		{"u32 above 2^32", []byte{0xff, 0xff, 0xff, 0xff, 0x10}, true},
		{"u64 of 11 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, false},
		{"u64 above 2^64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, false},
	}
	for _, c := range overflows {
		d := &decoder{buf: c.buf}
		if c.u32 {
			d.u32("x")
		} else {
			d.u64("x")
		}
		err := d.finish()
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "overflow") {
			t.Errorf("%s: want a varint overflow error, got %v", c.name, err)
		}
	}
	// The largest u32 is accepted (5 bytes, last 0x0f).
	d := &decoder{buf: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}}
	if got := d.u32("x"); got != math.MaxUint32 || d.finish() != nil {
		t.Errorf("u32 max: %d, %v", got, d.finish())
	}
	// A varint cut short.
	d = &decoder{buf: []byte{0x80, 0x80}}
	d.u64("x")
	if err := d.finish(); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated varint: %v", err)
	}
}

// Every strict prefix of every documented response is refused as malformed, never a panic
// and never a value.
func TestTruncatedPayloadsAreMalformed(t *testing.T) {
	for name, v := range vectorTable() {
		if v.resp != nil {
			p := EncodeResponse(v.resp)
			for n := 0; n < len(p); n++ {
				if r, err := DecodeResponse(p[:n]); !errors.Is(err, ErrMalformed) {
					t.Errorf("%s cut to %d bytes: got %#v, %v", name, n, r, err)
				}
			}
		} else {
			p, _ := EncodeRequest(v.req)
			for n := 0; n < len(p); n++ {
				if r, err := DecodeRequest(p[:n]); !errors.Is(err, ErrMalformed) {
					t.Errorf("%s cut to %d bytes: got %#v, %v", name, n, r, err)
				}
			}
		}
	}
}

func TestTrailingBytesAreMalformed(t *testing.T) {
	p := EncodeResponse(CancelledResponse{Cancelled{JobID: 42, WasRunning: true}})
	_, err := DecodeResponse(append(p, 0))
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, "1 trailing bytes") {
		t.Fatalf("want a trailing-bytes error, got %v", err)
	}
	if _, err := DecodeRequest([]byte{0x06, 0x00}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Metrics request with a trailing byte: %v", err)
	}
}

func TestUnknownVariantsAreTypedErrors(t *testing.T) {
	var uv *UnknownVariantError
	// Response 100 does not exist (yet): far beyond the appended ones.
	if _, err := DecodeResponse([]byte{0x64}); !errors.As(err, &uv) || uv.Enum != "Response" || uv.Index != 100 {
		t.Fatalf("response variant 100: %v", err)
	}
	// A multi-byte variant index.
	if _, err := DecodeResponse([]byte{0xac, 0x02}); !errors.As(err, &uv) || uv.Index != 300 {
		t.Fatalf("response variant 300: %v", err)
	}
	// An unknown ProofKind inside a Proof.
	if _, err := DecodeResponse([]byte{0x02, 0x2a, 0x07}); !errors.As(err, &uv) || uv.Enum != "ProofKind" {
		t.Fatalf("proof kind 7: %v", err)
	}
	if !errors.Is(uv, ErrMalformed) {
		t.Fatal("an unknown variant should match ErrMalformed")
	}
	// A bad bool, option tag and UTF-8.
	for name, p := range map[string][]byte{
		"bool 2":       {0x04, 0x2a, 0x02},
		"option tag 2": {0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02},
		"bad utf-8":    {0x06, 0x02, 0xc3, 0x28},
		"empty":        {},
	} {
		if _, err := DecodeResponse(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An error code appended after this client is kept, with the fields after it, and treated
// as a ProvingFailed-like failure.
func TestUnknownErrorCodeIsKept(t *testing.T) {
	r, err := DecodeResponse([]byte{0x08, 0x40, 0x02, 'h', 'i', 0x01, 0x05})
	if err != nil {
		t.Fatal(err)
	}
	e := r.(ErrorResponseMsg).Error
	if e.Code != 64 || e.Message != "hi" || e.JobID == nil || *e.JobID != 5 {
		t.Fatalf("got %#v", e)
	}
	de := &Error{Code: e.Code}
	if !errors.Is(de, ErrProvingFailed) || Retryable(de) || de.Code.String() != "ErrorCode(64)" {
		t.Fatalf("unknown code: is ProvingFailed %v, retryable %v, %s", errors.Is(de, ErrProvingFailed), Retryable(de), de.Code)
	}
}

// A backend kind appended after this client is kept, with the fields after it.
func TestUnknownBackendKindIsKept(t *testing.T) {
	r, err := DecodeResponse([]byte{0x0f, 0x07, 0x01, 0x00, 0x02, 0x03})
	if err != nil {
		t.Fatal(err)
	}
	i := r.(InfoResponse).Info
	if i.BackendKind != 7 || i.BackendKind.String() != "BackendKind(7)" || i.GPUDevices != 1 || i.CriticalReserve != 2 || i.ResultRetentionMs != 3 {
		t.Fatalf("got %#v", i)
	}
}

// A length prefix beyond the limit is refused before reading or allocating the payload:
// the reader holds only the prefix, so any attempt to read on would fail differently.
func TestOversizedLengthPrefixRefusedBeforeAllocation(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		_, _ = ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 1024)
	}
	runtime.ReadMemStats(&after)
	_, err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 1024)
	var fs *FrameSizeError
	if !errors.As(err, &fs) || fs.Len != math.MaxUint32 || fs.Max != 1024 || !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want FrameSizeError{4294967295, 1024}, got %v", err)
	}
	// 100 refusals allocate a few small values each, nothing of the announced 4 GiB (nor
	// of the 1024-byte limit: the payload buffer is made only after the check).
	if got := after.TotalAlloc - before.TotalAlloc; got > 100*1024 {
		t.Errorf("100 refused frames allocated %d bytes", got)
	}
	// A frame at the limit is read.
	frame := append([]byte{0, 0, 0, 3}, 'a', 'b', 'c')
	if p, err := ReadFrame(bytes.NewReader(frame), 3); err != nil || string(p) != "abc" {
		t.Fatalf("frame at the limit: %q, %v", p, err)
	}
	// Writing refuses a payload over the limit too.
	if _, err := AppendFrame(nil, make([]byte, 5), 4); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("AppendFrame over the limit: %v", err)
	}
}

func TestTruncatedFrames(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader(nil), 1024); err != io.EOF {
		t.Errorf("no frame: want io.EOF, got %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0}), 1024); err != io.ErrUnexpectedEOF {
		t.Errorf("half a prefix: want io.ErrUnexpectedEOF, got %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 5, 1, 2}), 1024); err != io.ErrUnexpectedEOF {
		t.Errorf("half a payload: want io.ErrUnexpectedEOF, got %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 0}), 1024); err != nil {
		t.Errorf("an empty payload is valid framing: %v", err)
	}
	// Two frames back to back are read one at a time.
	r := bytes.NewReader([]byte{0, 0, 0, 1, 6, 0, 0, 0, 1, 9})
	a, _ := ReadFrame(r, 1024)
	b, _ := ReadFrame(r, 1024)
	if !bytes.Equal(a, []byte{6}) || !bytes.Equal(b, []byte{9}) {
		t.Errorf("frames %x %x", a, b)
	}
}

// A hostile element count cannot make the decoder allocate beyond the payload.
func TestHugeCountsAreRefused(t *testing.T) {
	// Status with jobs: u64::MAX elements.
	p := []byte{0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	if _, err := DecodeResponse(p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge job count: %v", err)
	}
	// A proof announcing 1 GiB of bytes in a 10-byte payload.
	if _, err := DecodeResponse([]byte{0x02, 0x01, 0x00, 0x80, 0x80, 0x80, 0x80, 0x04}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge proof length: %v", err)
	}
}

func TestRetryable(t *testing.T) {
	for code, want := range map[ErrorCode]bool{
		CodeQueueFull: true, CodeResourceExhausted: true, CodeBusy: true, CodeShuttingDown: true, CodeInUse: true,
		CodeInvalidInput: false, CodeProvingFailed: false, CodeCancelled: false, CodeUnknownJob: false, CodeAdminRequired: false,
	} {
		e := error(&Error{Code: code})
		wrapped := fmt.Errorf("wrapped: %w", e)
		if Retryable(wrapped) != want || (&Error{Code: code}).Temporary() != want {
			t.Errorf("%s: retryable should be %v", code, want)
		}
	}
	if Retryable(io.EOF) {
		t.Error("a transport error is not a daemon error")
	}
}

func TestEncodeRefusesSubmitWithoutInput(t *testing.T) {
	if _, err := EncodeRequest(SubmitRequest{}); err == nil {
		t.Fatal("a Submit without input was encoded")
	}
}

// Watch hands the Progress frames before the answer to its callback, skips one of a stage
// this package does not know, and returns the proof that ends the stream.
func TestWatchReadsEventsUntilTheAnswer(t *testing.T) {
	server, conn := net.Pipe()
	defer server.Close()
	c := &Client{conn: conn, maxRead: DefaultMaxFrameSize, welcome: Welcome{MaxFrameSize: DefaultMaxFrameSize}}
	defer c.Close()
	go func() {
		req, err := ReadFrame(server, DefaultMaxFrameSize)
		if err != nil {
			return
		}
		if r, err := DecodeRequest(req); err != nil || r != (WatchRequest{JobRef{7}}) {
			server.Close()
			return
		}
		k := uint32(0)
		for _, payload := range [][]byte{
			EncodeResponse(ProgressResponse{ProgressEvent{JobID: 7, Stage: StageQueued}}),
			{16, 7, 99, 0, 0, 0, 0, 0, 0}, // stage 99: appended after this client
			EncodeResponse(ProgressResponse{ProgressEvent{JobID: 7, Stage: StageDeviceDone, Partition: &k, PartitionsDone: 1, PartitionsTotal: 1}}),
			EncodeResponse(ProofResponse{ProofResult{JobID: 7, Kind: PoRep, Proof: []byte{1}, Partitions: 1}}),
		} {
			frame, _ := AppendFrame(nil, payload, DefaultMaxFrameSize)
			if _, err := server.Write(frame); err != nil {
				return
			}
		}
	}()
	var stages []ProgressStage
	p, err := c.Watch(context.Background(), 7, func(e ProgressEvent) { stages = append(stages, e.Stage) })
	if err != nil || p.JobID != 7 {
		t.Fatalf("Watch: %+v, %v", p, err)
	}
	if len(stages) != 2 || stages[0] != StageQueued || stages[1] != StageDeviceDone {
		t.Errorf("stages %v", stages)
	}
	if _, err := DecodeResponse([]byte{16, 7, 99, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Errorf("an unknown stage decodes: %v", err)
	}
}
