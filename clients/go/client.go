package cuzk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultSocketPath is the daemon's default socket (socket.path in cuzk.toml).
const DefaultSocketPath = "/run/cuzk/cuzk.sock"

// DefaultSocket is $CUZK_SOCKET when set (as for the cuzk command line), else
// DefaultSocketPath.
func DefaultSocket() string {
	if s := os.Getenv("CUZK_SOCKET"); s != "" {
		return s
	}
	return DefaultSocketPath
}

// DefaultWelcomeTimeout bounds the wait for the Welcome when Dial's context has no deadline:
// a socket-activated daemon that keeps failing to start still has its connections accepted
// by systemd but never answers, and a miner should hear about that rather than hang.
const DefaultWelcomeTimeout = 60 * time.Second

// Client is one connection to cuzkd, past the Hello/Welcome exchange.
//
// The protocol answers one request at a time per connection, so a Client serialises its
// calls with a mutex: a call waits for the previous one to finish. Await and Prove hold the
// connection until the job ends, so use another Client (connections are cheap) for
// anything meanwhile, such as Status or Cancel.
//
// Every call takes a context. Its deadline becomes the socket's deadline; its cancellation
// (or the deadline passing) closes the connection, since a half-written request or a
// half-read response leaves the stream unusable. Closing a connection does NOT cancel a job
// the daemon already accepted: it keeps proving. To stop it, Cancel its job id (from Submit's
// Accepted, or an *Error's JobID) on a connection that is still open, or a new one. Prove
// returns no job id before the proof, so a job that may need cancelling should be sent with
// Submit and then Await, or carry a RequestID: re-submitting the same request id and input
// returns the running job's id (Accepted.Existing) without queueing it twice.
//
// After a transport error, a cancelled context, or a daemon error that closes the
// connection (FrameTooLarge, PermissionDenied, Busy) the Client is closed and every further
// call returns ErrClosed; Dial again.
type Client struct {
	mu      sync.Mutex
	conn    net.Conn
	closed  bool
	socket  string
	name    string
	welcome Welcome
	// maxRead bounds the frames read: the Welcome's max_frame_size, at least the default,
	// so that no announced length beyond it is ever allocated.
	maxRead uint32
}

// Dial connects to the daemon at socketPath (DefaultSocket() for the usual one) and says
// Hello as clientName (free text for the daemon's logs, e.g. "curio/1.24").
func Dial(ctx context.Context, socketPath, clientName string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("cuzk: cannot connect to cuzkd at %s (is cuzkd.socket or cuzkd running? see journalctl -u cuzkd): %w", socketPath, err)
	}
	c := &Client{conn: conn, socket: socketPath, name: clientName, maxRead: DefaultMaxFrameSize}
	hctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, DefaultWelcomeTimeout)
		defer cancel()
	}
	resp, err := c.Call(hctx, HelloRequest{Hello{ProtocolVersion: ProtocolVersion, ClientName: clientName}})
	if err != nil {
		c.Close()
		return nil, err
	}
	w, ok := resp.(WelcomeResponse)
	if !ok {
		c.Close()
		return nil, &UnexpectedResponseError{Request: "Hello", Response: resp}
	}
	if w.Welcome.ProtocolVersion != ProtocolVersion {
		c.Close()
		return nil, fmt.Errorf("cuzk: daemon welcomed protocol version %d, this client speaks %d", w.Welcome.ProtocolVersion, ProtocolVersion)
	}
	c.welcome = w.Welcome
	if w.Welcome.MaxFrameSize > c.maxRead {
		c.maxRead = w.Welcome.MaxFrameSize
	}
	return c, nil
}

// Welcome is what the daemon said in answer to Hello.
func (c *Client) Welcome() Welcome { return c.welcome }

// SocketPath is the socket this client dialled.
func (c *Client) SocketPath() string { return c.socket }

// Close closes the connection. Jobs submitted on it keep running (see Client).
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Client) closeLocked() error {
	if c.closed {
		return nil
	}
	c.closed = true
	return c.conn.Close()
}

// Call sends one request and reads its response. An Error response is returned as *Error
// (nil Response). Prefer the typed methods; Call is for requests appended to the protocol
// after them.
func (c *Client) Call(ctx context.Context, req Request) (Response, error) {
	return c.call(ctx, req, nil)
}

// call is Call; with onProgress set, Progress frames before the answer go to it (Watch).
func (c *Client) call(ctx context.Context, req Request, onProgress func(ProgressEvent)) (Response, error) {
	return c.callWith(ctx, req, onProgress, nil)
}

// callWith is call, passing file with the request's frame (SCM_RIGHTS) where it is set.
func (c *Client) callWith(ctx context.Context, req Request, onProgress func(ProgressEvent), file *os.File) (Response, error) {
	payload, err := EncodeRequest(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Before the Welcome, the daemon's limit is not known: the default is its default.
	limit := c.welcome.MaxFrameSize
	if limit == 0 {
		limit = DefaultMaxFrameSize
	}
	frame, err := AppendFrame(nil, payload, limit)
	if err != nil {
		// Refused locally: the daemon would have closed the connection on it.
		return nil, err
	}

	deadline, _ := ctx.Deadline() // zero: none
	if err := c.conn.SetDeadline(deadline); err != nil {
		c.closeLocked()
		return nil, fmt.Errorf("cuzk: setting the socket deadline: %w", err)
	}
	// Cancellation interrupts blocked I/O by moving the deadline into the past; the
	// connection is then closed below, since the stream may be mid-frame.
	stop := make(chan struct{})
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		select {
		case <-ctx.Done():
			c.conn.SetDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}()
	resp, err := c.exchange(frame, onProgress, file)
	close(stop)
	<-watcher

	if err != nil {
		var derr *DecodeError
		var uerr *UnknownVariantError
		if errors.As(err, &derr) || errors.As(err, &uerr) {
			// The whole frame was read, so the stream is still in step.
			return nil, fmt.Errorf("cuzk: %s: %w", requestName(req), err)
		}
		c.closeLocked()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("cuzk: %s: connection closed: %w", requestName(req), cerr)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("cuzk: %s: connection closed: %w", requestName(req), context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("cuzk: %s: %w", requestName(req), err)
	}
	if e, ok := resp.(ErrorResponseMsg); ok {
		de := &Error{Code: e.Error.Code, Message: e.Error.Message, JobID: e.Error.JobID}
		if de.ClosesConnection() {
			c.closeLocked()
		}
		return nil, de
	}
	return resp, nil
}

// exchange writes a frame and reads its response; with onProgress set, the Progress
// frames before it go to onProgress (a Progress frame that does not decode, a stage newer
// than this package, is skipped).
func (c *Client) exchange(frame []byte, onProgress func(ProgressEvent), file *os.File) (Response, error) {
	if _, err := c.write(frame, file); err != nil {
		// A daemon refusing the connection (Busy, PermissionDenied) answers and closes
		// before reading: its error is still waiting to be read, and says more than EPIPE.
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			c.conn.SetReadDeadline(time.Now().Add(time.Second))
			if resp, rerr := c.readResponse(); rerr == nil {
				if _, ok := resp.(ErrorResponseMsg); ok {
					return resp, nil
				}
			}
		}
		return nil, fmt.Errorf("sending to cuzkd: %w", closedOr(err))
	}
	for {
		payload, err := c.readPayload()
		if err != nil {
			return nil, err
		}
		resp, err := DecodeResponse(payload)
		if onProgress == nil {
			return resp, err
		}
		if p, ok := resp.(ProgressResponse); ok && err == nil {
			onProgress(p.Event)
			continue
		}
		if err != nil && len(payload) > 0 && payload[0] == progressVariant {
			continue
		}
		return resp, err
	}
}

// write sends a frame; with file set, in one sendmsg that passes the file's descriptor with
// the frame's bytes, as the daemon expects of SubmitFd and ProveFd (docs/protocol.md
// section 8).
func (c *Client) write(frame []byte, file *os.File) (int, error) {
	if file == nil {
		return c.conn.Write(frame)
	}
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("passing a file needs a Unix socket connection")
	}
	raw, err := file.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := raw.Control(func(fd uintptr) {
		n, _, werr = uc.WriteMsgUnix(frame, syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		return n, err
	}
	if werr == nil && n < len(frame) {
		// The rest goes without the descriptor, which came with the frame's first bytes.
		var m int
		m, werr = c.conn.Write(frame[n:])
		n += m
	}
	return n, werr
}

// progressVariant is the first byte of a Progress frame's payload (its variant index).
const progressVariant = 16

func (c *Client) readResponse() (Response, error) {
	payload, err := c.readPayload()
	if err != nil {
		return nil, err
	}
	return DecodeResponse(payload)
}

func (c *Client) readPayload() ([]byte, error) {
	payload, err := ReadFrame(c.conn, c.maxRead)
	if err != nil {
		var fs *FrameSizeError
		if errors.As(err, &fs) {
			return nil, err
		}
		return nil, fmt.Errorf("reading from cuzkd: %w", closedOr(err))
	}
	return payload, nil
}

// closedOr turns the ways a peer hangs up into ErrClosed (keeping the cause in the text).
func closedOr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("cuzkd closed the connection (%v): %w", err, ErrClosed)
	}
	return err
}

func requestName(r Request) string {
	names := [...]string{"Hello", "Submit", "Await", "Prove", "Cancel", "Status", "Metrics",
		"Preload", "Evict", "Residency", "Pipeline", "Devices", "Jobs", "Ping", "Lookup", "Info",
		"PreloadProof", "EvictProof", "Watch"}
	if i := r.Index(); int(i) < len(names) {
		return names[i]
	}
	return fmt.Sprintf("Request(%d)", r.Index())
}

// Submit queues a proof and returns at once with its job id.
func (c *Client) Submit(ctx context.Context, s Submit) (*Accepted, error) {
	resp, err := c.Call(ctx, SubmitRequest{s})
	if err != nil {
		return nil, err
	}
	if a, ok := resp.(AcceptedResponse); ok {
		return &a.Accepted, nil
	}
	return nil, &UnexpectedResponseError{"Submit", resp}
}

// Await waits until the job ends and returns its proof; a failed, cancelled or
// shut-down job is an *Error with the job's id. It holds the connection meanwhile.
func (c *Client) Await(ctx context.Context, jobID uint64) (*ProofResult, error) {
	p, pending, err := c.await(ctx, AwaitJob{JobID: jobID})
	if err == nil && pending != nil {
		// The daemon answers Pending only to an Await with a timeout.
		return nil, &UnexpectedResponseError{"Await", PendingResponse{*pending}}
	}
	return p, err
}

// AwaitFor waits at most wait (0 polls) for the job: the proof when it is done, else the
// job's current state (Pending). Exactly one of the two results is non-nil without error.
func (c *Client) AwaitFor(ctx context.Context, jobID uint64, wait time.Duration) (*ProofResult, *JobInfo, error) {
	if wait < 0 {
		wait = 0
	}
	ms := uint64(wait / time.Millisecond)
	return c.await(ctx, AwaitJob{JobID: jobID, TimeoutMs: &ms})
}

func (c *Client) await(ctx context.Context, a AwaitJob) (*ProofResult, *JobInfo, error) {
	resp, err := c.Call(ctx, AwaitRequest{a})
	if err != nil {
		return nil, nil, err
	}
	switch r := resp.(type) {
	case ProofResponse:
		return &r.Proof, nil, nil
	case PendingResponse:
		return nil, &r.Job, nil
	}
	return nil, nil, &UnexpectedResponseError{"Await", resp}
}

// Watch follows a job until it ends, so that a caller need not poll: onEvent gets each
// ProgressEvent the daemon pushes (the job's state first: Queued or Started; then each step
// as it happens: the parameters, each partition's synthesis and device stages, Verifying),
// and Watch returns what Await returns: the proof, or an *Error with the job's id. A job
// that has already finished gets no event. onEvent runs on the calling goroutine and must
// not call this Client (it holds the connection); it may hand events to a channel, but
// should not block for long: the daemon drops events a slow reader has not read (each
// event's Dropped counts those lost just before it) and never the answer. Another uid's job
// is ErrUnknownJob, as for Await. A daemon that predates Watch answers ErrMalformedFrame:
// fall back to Await (or AwaitFor in a loop for progress).
func (c *Client) Watch(ctx context.Context, jobID uint64, onEvent func(ProgressEvent)) (*ProofResult, error) {
	if onEvent == nil {
		onEvent = func(ProgressEvent) {}
	}
	resp, err := c.call(ctx, WatchRequest{JobRef{jobID}}, onEvent)
	if err != nil {
		return nil, err
	}
	if p, ok := resp.(ProofResponse); ok {
		return &p.Proof, nil
	}
	return nil, &UnexpectedResponseError{"Watch", resp}
}

// SubmitFile queues a proof whose input the daemon reads from file (SubmitFd, docs/protocol.md
// section 8): s.Input's payload (PoRepInput.C1, the others' Input) must be empty, and file
// is a regular file holding the input — the C1 file itself, or one made by InputFile. The
// input never passes through this process's memory or a frame, whatever its size (up to the
// daemon's protocol.max_input_size). The file may be closed once SubmitFile returns. A
// daemon that predates SubmitFd answers ErrMalformedFrame: send the bytes with Submit.
func (c *Client) SubmitFile(ctx context.Context, s Submit, file *os.File) (*Accepted, error) {
	resp, err := c.callWith(ctx, SubmitFdRequest{s}, nil, file)
	if err != nil {
		return nil, err
	}
	if a, ok := resp.(AcceptedResponse); ok {
		return &a.Accepted, nil
	}
	return nil, &UnexpectedResponseError{"SubmitFd", resp}
}

// ProveFile is Prove with the input read from file, as SubmitFile.
func (c *Client) ProveFile(ctx context.Context, s Submit, file *os.File) (*ProofResult, error) {
	resp, err := c.callWith(ctx, ProveFdRequest{s}, nil, file)
	if err != nil {
		return nil, err
	}
	if p, ok := resp.(ProofResponse); ok {
		return &p.Proof, nil
	}
	return nil, &UnexpectedResponseError{"ProveFd", resp}
}

// InputFile returns an unlinked temporary file holding data, positioned at its start, for
// SubmitFile and ProveFile when the input is in memory: the daemon reads it from the file
// rather than from a frame. Close it once the call returned.
func InputFile(data []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "cuzk-input-*")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: the descriptor keeps the data, nothing is left behind.
	_ = os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// SubmitWithin queues a proof needed within `within` (a WindowPoSt's time left in its
// deadline, say; at most 30 days): within its class it goes before the jobs due later and
// those without a deadline. A daemon that predates SubmitWithin answers ErrMalformedFrame:
// fall back to Submit.
func (c *Client) SubmitWithin(ctx context.Context, s Submit, within time.Duration) (*Accepted, error) {
	resp, err := c.Call(ctx, SubmitWithinRequest{Submit: s, FinishWithinMs: uint64(within.Milliseconds())})
	if err != nil {
		return nil, err
	}
	if a, ok := resp.(AcceptedResponse); ok {
		return &a.Accepted, nil
	}
	return nil, &UnexpectedResponseError{"SubmitWithin", resp}
}

// ProveWithin is Prove of a proof needed within `within`, ordered as SubmitWithin.
func (c *Client) ProveWithin(ctx context.Context, s Submit, within time.Duration) (*ProofResult, error) {
	resp, err := c.Call(ctx, ProveWithinRequest{Submit: s, FinishWithinMs: uint64(within.Milliseconds())})
	if err != nil {
		return nil, err
	}
	if p, ok := resp.(ProofResponse); ok {
		return &p.Proof, nil
	}
	return nil, &UnexpectedResponseError{"ProveWithin", resp}
}

// Prove submits and awaits in one round trip, holding the connection until the job ends.
// It gives no job id before the proof: see Client on cancelling such a job.
func (c *Client) Prove(ctx context.Context, s Submit) (*ProofResult, error) {
	resp, err := c.Call(ctx, ProveRequest{s})
	if err != nil {
		return nil, err
	}
	if p, ok := resp.(ProofResponse); ok {
		return &p.Proof, nil
	}
	return nil, &UnexpectedResponseError{"Prove", resp}
}

// Cancel cancels a job: a queued one at once, a running one at its next partition
// boundary. Either way its result is decided when Cancel returns (Await gives
// ErrCancelled, after a restart too where the daemon keeps a job journal), unless a
// running job's result was made before the Cancel arrived. Unknown jobs give
// ErrUnknownJob, finished ones ErrJobFinished.
func (c *Client) Cancel(ctx context.Context, jobID uint64) (*Cancelled, error) {
	resp, err := c.Call(ctx, CancelRequest{JobRef{jobID}})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(CancelledResponse); ok {
		return &r.Cancelled, nil
	}
	return nil, &UnexpectedResponseError{"Cancel", resp}
}

// Status reports the daemon (q.JobID nil: every job it still knows) or one job
// (ErrUnknownJob if unknown).
func (c *Client) Status(ctx context.Context, q StatusQuery) (*StatusReport, error) {
	resp, err := c.Call(ctx, StatusRequest{q})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(StatusResponse); ok {
		return &r.Status, nil
	}
	return nil, &UnexpectedResponseError{"Status", resp}
}

// Metrics returns the Prometheus text exposition (format 0.0.4).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	resp, err := c.Call(ctx, MetricsRequest{})
	if err != nil {
		return "", err
	}
	if r, ok := resp.(MetricsResponse); ok {
		return r.Text, nil
	}
	return "", &UnexpectedResponseError{"Metrics", resp}
}

// Preload loads (and prepares for the backend) a parameter set; an invalid sector size is
// ErrInvalidInput, a set that cannot be loaded ErrParamsUnavailable. For admins only (root,
// the daemon's own uid and socket.admin_uids): anyone else gets ErrAdminRequired.
func (c *Client) Preload(ctx context.Context, spec ParamSpec) (*ParamsReport, error) {
	return c.params(ctx, PreloadRequest{spec})
}

// Evict drops a parameter set from host and device memory. For admins only
// (ErrAdminRequired). While queued or running jobs need the set, a proof holds it or it is
// being loaded, nothing is dropped: ErrInUse (its JobID names the first such job); evict it
// again once they have finished.
func (c *Client) Evict(ctx context.Context, spec ParamSpec) (*ParamsReport, error) {
	return c.params(ctx, EvictRequest{spec})
}

// PreloadProof is Preload of the parameter set that a proof, named by its Filecoin id,
// proves with (e.g. PreloadProof(ctx, SealProof(int64(spt)))). An id that names no proof is
// ErrInvalidInput; a daemon that predates it answers ErrMalformedFrame.
func (c *Client) PreloadProof(ctx context.Context, proof RegisteredProof) (*ParamsReport, error) {
	return c.params(ctx, PreloadProofRequest{proof})
}

// EvictProof is Evict of the parameter set that a proof, named by its Filecoin id, proves
// with.
func (c *Client) EvictProof(ctx context.Context, proof RegisteredProof) (*ParamsReport, error) {
	return c.params(ctx, EvictProofRequest{proof})
}

func (c *Client) params(ctx context.Context, req Request) (*ParamsReport, error) {
	resp, err := c.Call(ctx, req)
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(ParamsResponse); ok {
		return &r.Params, nil
	}
	return nil, &UnexpectedResponseError{requestName(req), resp}
}

// Residency reports the resident parameter sets' host and device bytes. A daemon that
// predates it answers ErrMalformedFrame.
func (c *Client) Residency(ctx context.Context) (*ResidencyReport, error) {
	resp, err := c.Call(ctx, ResidencyRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(ResidencyResponse); ok {
		return &r.Residency, nil
	}
	return nil, &UnexpectedResponseError{"Residency", resp}
}

// Pipeline reports the partitions per proving stage and the host memory budget. A daemon
// that predates it answers ErrMalformedFrame.
func (c *Client) Pipeline(ctx context.Context) (*PipelineReport, error) {
	resp, err := c.Call(ctx, PipelineRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(PipelineResponse); ok {
		return &r.Pipeline, nil
	}
	return nil, &UnexpectedResponseError{"Pipeline", resp}
}

// Jobs reports the known jobs a page at a time (for lists that do not fit in one Status):
// call it again with After set to the last job id until More is 0. A daemon that predates
// it answers ErrMalformedFrame.
func (c *Client) Jobs(ctx context.Context, q JobsQuery) (*JobsPage, error) {
	resp, err := c.Call(ctx, JobsRequest{q})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(JobsResponse); ok {
		return &r.Jobs, nil
	}
	return nil, &UnexpectedResponseError{"Jobs", resp}
}

// Devices reports the proving devices. A daemon that predates it answers ErrMalformedFrame.
func (c *Client) Devices(ctx context.Context) (*DevicesReport, error) {
	resp, err := c.Call(ctx, DevicesRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(DevicesResponse); ok {
		return &r.Devices, nil
	}
	return nil, &UnexpectedResponseError{"Devices", resp}
}

// Ping sends a Ping with nonce and waits for its Pong: a round trip to the daemon that
// touches no job. A daemon that predates it answers ErrMalformedFrame (it is alive all the
// same).
func (c *Client) Ping(ctx context.Context, nonce uint64) (*Pong, error) {
	resp, err := c.Call(ctx, PingRequest{Ping{Nonce: nonce}})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(PongResponse); ok && r.Pong.Nonce == nonce {
		return &r.Pong, nil
	}
	return nil, &UnexpectedResponseError{"Ping", resp}
}

// Lookup finds the newest job the daemon knows under requestID (queued, running, or finished
// within its result retention) among this client's uid's jobs (an admin without one gets
// any uid's), for a client that lost the job id, such as a miner that restarted: Await its
// JobID rather than submit the input again. An id no such job has is ErrUnknownJob; a
// daemon that predates Lookup answers ErrMalformedFrame.
func (c *Client) Lookup(ctx context.Context, requestID string) (*JobInfo, error) {
	resp, err := c.Call(ctx, LookupRequest{LookupQuery{RequestID: requestID}})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(JobResponse); ok {
		return &r.Job, nil
	}
	return nil, &UnexpectedResponseError{"Lookup", resp}
}

// Info reports what Welcome does not: the backend's kind, the devices, the queue slots kept
// for critical jobs and how long finished jobs stay known. A daemon that predates it
// answers ErrMalformedFrame.
func (c *Client) Info(ctx context.Context) (*InfoReport, error) {
	resp, err := c.Call(ctx, InfoRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(InfoResponse); ok {
		return &r.Info, nil
	}
	return nil, &UnexpectedResponseError{"Info", resp}
}

// Deadlines lists the queued and running jobs with a deadline that this client sees,
// earliest due first, at most limit of them (0: the daemon's bound, 1000), with the time left
// to each deadline and each job's projected end (protocol.md section 5, Deadlines). It never
// waits for a proof. A daemon that predates Deadlines answers ErrMalformedFrame.
func (c *Client) Deadlines(ctx context.Context, limit uint32) (*DeadlinesReport, error) {
	resp, err := c.Call(ctx, DeadlinesRequest{DeadlinesQuery{Max: limit}})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(DeadlinesResponse); ok {
		return &r.Deadlines, nil
	}
	return nil, &UnexpectedResponseError{"Deadlines", resp}
}

// Capacity asks whether the daemon can take a job of kind at prio (nil: the kind's
// default) and when it would start (protocol.md section 5, Capacity). It never waits for a
// proof. A daemon that predates Capacity answers ErrMalformedFrame: assemble the counts
// from Status, Info and Pipeline then.
func (c *Client) Capacity(ctx context.Context, kind ProofKind, prio *Priority) (*CapacityReport, error) {
	resp, err := c.Call(ctx, CapacityRequest{CapacityQuery{Kind: kind, Priority: prio}})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(CapacityResponse); ok {
		return &r.Capacity, nil
	}
	return nil, &UnexpectedResponseError{"Capacity", resp}
}

// Health reports each proving device's health: its failures and whether it is quarantined.
// A daemon that predates it answers ErrMalformedFrame.
func (c *Client) Health(ctx context.Context) (*HealthReport, error) {
	resp, err := c.Call(ctx, HealthRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(HealthResponse); ok {
		return &r.Health, nil
	}
	return nil, &UnexpectedResponseError{"Health", resp}
}

// DeviceMemory reports each proving device's memory (budget, held, peak) and the memory
// plan each resident parameter set's proofs follow on it. A daemon that predates it
// answers ErrMalformedFrame.
func (c *Client) DeviceMemory(ctx context.Context) (*MemoryReport, error) {
	resp, err := c.Call(ctx, DeviceMemoryRequest{})
	if err != nil {
		return nil, err
	}
	if r, ok := resp.(DeviceMemoryResponse); ok {
		return &r.Memory, nil
	}
	return nil, &UnexpectedResponseError{"DeviceMemory", resp}
}

// PingSocket connects to the daemon at socketPath, sends one Ping without saying Hello
// (the daemon answers Ping before Hello), waits for the Pong and closes: a liveness probe
// that opens no session. Without a deadline on ctx it waits at most DefaultWelcomeTimeout,
// long enough for a socket-activated daemon to start.
func PingSocket(ctx context.Context, socketPath string, nonce uint64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWelcomeTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return fmt.Errorf("cuzk: cannot connect to cuzkd at %s (is cuzkd.socket or cuzkd running? see journalctl -u cuzkd): %w", socketPath, err)
	}
	// No Welcome yet: the frame limits are the defaults, as for Dial's Hello.
	c := &Client{conn: conn, socket: socketPath, maxRead: DefaultMaxFrameSize}
	defer c.Close()
	_, err = c.Ping(ctx, nonce)
	return err
}
