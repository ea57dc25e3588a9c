package cuzk

import (
	"errors"
	"fmt"
)

// ErrorCode is the daemon's error code (protocol.md section 4, ErrorCode). A code this
// package does not know is kept as its number: treat it as a failure like ProvingFailed.
type ErrorCode uint32

// The error codes, in wire order.
const (
	CodeMalformedFrame ErrorCode = iota
	CodeFrameTooLarge
	CodeUnsupportedVersion
	CodeHelloRequired
	CodeUnknownJob
	CodeQueueFull
	CodeInvalidInput
	CodeProvingFailed
	CodeCancelled
	CodeShuttingDown
	CodeRequestIDConflict
	CodePermissionDenied
	CodeBusy
	CodeParamsUnavailable
	CodeInternal
	CodeJobFinished
	CodeResourceExhausted
	CodePriorityConflict
	CodeResponseTooLarge
	CodeInUse
	CodeAdminRequired
)

var codeNames = [...]string{
	"MalformedFrame", "FrameTooLarge", "UnsupportedVersion", "HelloRequired", "UnknownJob",
	"QueueFull", "InvalidInput", "ProvingFailed", "Cancelled", "ShuttingDown",
	"RequestIdConflict", "PermissionDenied", "Busy", "ParamsUnavailable", "Internal",
	"JobFinished", "ResourceExhausted", "PriorityConflict", "ResponseTooLarge", "InUse",
	"AdminRequired",
}

// String is the code's name as protocol.md spells it.
func (c ErrorCode) String() string {
	return enumName(codeNames[:], uint32(c), "ErrorCode")
}

// Known reports whether this package knows the code.
func (c ErrorCode) Known() bool { return int(c) < len(codeNames) }

// Sentinels, one per code: errors.Is(err, cuzk.ErrQueueFull) holds for an *Error with that
// code, wherever it is wrapped.
var (
	ErrMalformedFrame     = &codeSentinel{CodeMalformedFrame}
	ErrFrameTooLarge      = &codeSentinel{CodeFrameTooLarge} // also matches a local *FrameSizeError
	ErrUnsupportedVersion = &codeSentinel{CodeUnsupportedVersion}
	ErrHelloRequired      = &codeSentinel{CodeHelloRequired}
	ErrUnknownJob         = &codeSentinel{CodeUnknownJob}
	ErrQueueFull          = &codeSentinel{CodeQueueFull}
	ErrInvalidInput       = &codeSentinel{CodeInvalidInput}
	ErrProvingFailed      = &codeSentinel{CodeProvingFailed}
	ErrCancelled          = &codeSentinel{CodeCancelled}
	ErrShuttingDown       = &codeSentinel{CodeShuttingDown}
	ErrRequestIDConflict  = &codeSentinel{CodeRequestIDConflict}
	ErrPermissionDenied   = &codeSentinel{CodePermissionDenied}
	ErrBusy               = &codeSentinel{CodeBusy}
	ErrParamsUnavailable  = &codeSentinel{CodeParamsUnavailable}
	ErrInternal           = &codeSentinel{CodeInternal}
	ErrJobFinished        = &codeSentinel{CodeJobFinished}
	ErrResourceExhausted  = &codeSentinel{CodeResourceExhausted}
	// A resubmission under a request id named a priority its job cannot take (lower than
	// the queued job's, or another than the running job's); JobID names the job.
	ErrPriorityConflict = &codeSentinel{CodePriorityConflict}
	// The answer would exceed the daemon's frame limit: ask for less (Status of one job)
	// or raise protocol.max_frame_size.
	ErrResponseTooLarge = &codeSentinel{CodeResponseTooLarge}
	// Evict of a parameter set that queued or running jobs need (JobID names the first),
	// that a running proof holds or that is being loaded: nothing was dropped. Evict it
	// again once they have finished.
	ErrInUse = &codeSentinel{CodeInUse}
	// Preload and Evict are for admins only (root, the daemon's own uid and
	// socket.admin_uids).
	ErrAdminRequired = &codeSentinel{CodeAdminRequired}
)

// sentinels is indexed by code; TestSentinelsCoverEveryCode keeps it complete.
var sentinels = []*codeSentinel{
	ErrMalformedFrame, ErrFrameTooLarge, ErrUnsupportedVersion, ErrHelloRequired,
	ErrUnknownJob, ErrQueueFull, ErrInvalidInput, ErrProvingFailed, ErrCancelled,
	ErrShuttingDown, ErrRequestIDConflict, ErrPermissionDenied, ErrBusy,
	ErrParamsUnavailable, ErrInternal, ErrJobFinished, ErrResourceExhausted,
	ErrPriorityConflict, ErrResponseTooLarge, ErrInUse, ErrAdminRequired,
}

// Sentinel returns the errors.Is sentinel of a code (nil for a code this package does not
// know).
func Sentinel(c ErrorCode) error {
	if int(c) < len(sentinels) {
		return sentinels[c]
	}
	return nil
}

type codeSentinel struct{ code ErrorCode }

func (s *codeSentinel) Error() string { return "cuzk: " + s.code.String() }

// Error is an error the daemon answered with.
type Error struct {
	Code    ErrorCode
	Message string  // for people; at most ~1 KiB, control characters escaped by the daemon
	JobID   *uint64 // the job concerned (a failed Await/Prove, a conflicting request id or priority)
}

func (e *Error) Error() string {
	s := "cuzkd: " + e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.JobID != nil {
		s += fmt.Sprintf(" (job %d)", *e.JobID)
	}
	return s
}

// Is matches the code's sentinel. An unknown code matches ErrProvingFailed too, since
// protocol.md says to treat it as a ProvingFailed-like failure.
func (e *Error) Is(target error) bool {
	s, ok := target.(*codeSentinel)
	if !ok {
		return false
	}
	return s.code == e.Code || (!e.Code.Known() && s.code == CodeProvingFailed)
}

// Temporary reports whether the same request may succeed later; see Retryable.
func (e *Error) Temporary() bool { return Retryable(e) }

// ClosesConnection reports whether the daemon closes the connection after this error
// (protocol.md's ErrorCode table): FrameTooLarge, PermissionDenied, Busy.
func (e *Error) ClosesConnection() bool {
	switch e.Code {
	case CodeFrameTooLarge, CodePermissionDenied, CodeBusy:
		return true
	}
	return false
}

// Retryable reports whether err is a daemon error that a later identical request may not
// get (with backoff):
//   - QueueFull: "the queue has no room for this priority; retry later".
//   - ResourceExhausted: "the same request may succeed when submitted again".
//   - Busy: too many connections right now; the daemon closed this connection, so retry
//     on a new one (Dial again).
//   - ShuttingDown: this daemon is stopping and did not prove the job; a restarted daemon
//     (systemd's cuzkd.socket starts one on the next connection) will. Dial again.
//   - InUse: an Evict of a parameter set that jobs need; evict it again once they have
//     finished.
//
// Every other code (InvalidInput, ProvingFailed, Cancelled, ...) gives the same answer
// again, and transport errors are not daemon errors: Retryable reports false for them.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeQueueFull, CodeResourceExhausted, CodeBusy, CodeShuttingDown, CodeInUse:
		return true
	}
	return false
}

// UnexpectedResponseError is a valid response of the wrong variant for the request.
type UnexpectedResponseError struct {
	Request  string
	Response Response
}

func (e *UnexpectedResponseError) Error() string {
	return fmt.Sprintf("cuzk: unexpected response %T to %s", e.Response, e.Request)
}

// ErrClosed is returned by calls on a client that was closed, or whose connection was
// closed after a transport error, a cancelled context or an error that closes it.
var ErrClosed = errors.New("cuzk: connection closed")
