package cuzk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemon is a cuzkd child process on a temporary socket.
type daemon struct {
	cmd    *exec.Cmd
	socket string
	stderr string // path of its log
	exited chan error
}

func (d *daemon) log() string {
	b, _ := os.ReadFile(d.stderr)
	return string(b)
}

// startDaemon runs $CUZKD with a CPU-backend configuration on a socket in a temporary
// directory, and waits until it answers a Hello.
func startDaemon(t *testing.T) *daemon {
	t.Helper()
	bin := os.Getenv("CUZKD")
	if bin == "" {
		t.Skip("CUZKD is not set: the daemon integration tests need a cuzkd binary " +
			"(CI sets CUZKD, CUZK and CUZK_TEST_PARAMS in scripts/check-go.sh)")
	}
	params := os.Getenv("CUZK_TEST_PARAMS")
	if params == "" {
		params = "/var/tmp/filecoin-proof-parameters"
	}
	dir := t.TempDir()
	d := &daemon{socket: filepath.Join(dir, "cuzk.sock"), stderr: filepath.Join(dir, "stderr.log"), exited: make(chan error, 1)}
	config := fmt.Sprintf(`[daemon]
allow_root = %v
drain_grace = "30s"
log_level = "info"

[socket]
path = %q

[params]
dir = %q

[proving]
backend = "cpu"
# One job at a time, so that a job submitted while the PoRep proof runs stays queued.
workers = 1
`, os.Geteuid() == 0, d.socket, params)
	cfgPath := filepath.Join(dir, "cuzk.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(d.stderr)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "--config", cfgPath)
	d.cmd.Stderr = logFile
	// Not under systemd: no notify socket or socket activation inherited from the caller.
	d.cmd.Env = filteredEnv("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "WATCHDOG_USEC", "CUZK_LOG")
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { d.exited <- d.cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-d.exited:
			t.Fatalf("cuzkd exited before answering (%v); stderr:\n%s", err, d.log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := Dial(ctx, d.socket, "go-test-probe")
		cancel()
		if err == nil {
			c.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("cuzkd did not answer on %s within 60 s (last: %v); stderr:\n%s", d.socket, err, d.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func filteredEnv(drop ...string) []string {
	var out []string
next:
	for _, kv := range os.Environ() {
		for _, k := range drop {
			if strings.HasPrefix(kv, k+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

func dialT(t *testing.T, d *daemon) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, d.socket, "go-test")
	if err != nil {
		t.Fatalf("dial: %v; stderr:\n%s", err, d.log())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestDaemon runs every check against one real cuzkd: the requests, the typed errors, one
// real PoRep proof, and a clean SIGTERM shutdown.
func TestDaemon(t *testing.T) {
	d := startDaemon(t)
	c := dialT(t, d)

	t.Run("welcome", func(t *testing.T) {
		w := c.Welcome()
		// The backend names itself with details ("cpu (2 threads)").
		if w.ProtocolVersion != 1 || !strings.HasPrefix(w.ServerVersion, "cuzkd ") || !strings.HasPrefix(w.Backend, "cpu") {
			t.Errorf("welcome: %+v", w)
		}
		if fmt.Sprint(w.ProofKinds) != "[PoRep SnapDeals WindowPoSt WinningPoSt]" {
			t.Errorf("proof kinds: %v", w.ProofKinds)
		}
		if w.MaxFrameSize != DefaultMaxFrameSize || w.MaxQueued == 0 || w.Workers == 0 {
			t.Errorf("limits: %+v", w)
		}
	})

	t.Run("ping", func(t *testing.T) {
		p, err := c.Ping(quick(t), 1<<40)
		if err != nil || p.Nonce != 1<<40 {
			t.Fatalf("ping: %+v, %v", p, err)
		}
		// Before Hello too, on a connection of its own.
		if err := PingSocket(quick(t), d.socket, 7); err != nil {
			t.Fatalf("ping before Hello: %v", err)
		}
		// A ping is no job.
		s, err := c.Status(quick(t), StatusQuery{})
		if err != nil || len(s.Jobs) != 0 || s.Queued != 0 {
			t.Errorf("status after pings: %+v, %v", s, err)
		}
	})

	t.Run("info", func(t *testing.T) {
		i, err := c.Info(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		// The test daemon proves on the CPU, with the default queue (64 slots, 4 kept for
		// critical jobs) and the default retention (10 minutes).
		if i.BackendKind != BackendCPU || i.GPUDevices != 0 || i.CPUDevices != 1 || i.CriticalReserve != 4 || i.ResultRetentionMs != 600000 {
			t.Errorf("info of the CPU test daemon: %+v (%s)", i, i.BackendKind)
		}
	})

	t.Run("capacity", func(t *testing.T) {
		r, err := c.Capacity(quick(t), PoRep, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Idle: a job would start at once, though no proof was measured yet; no proof time
		// is invented. 64 slots, 4 kept for critical jobs.
		if r.Priority != Normal || len(r.Queued) != 4 || len(r.Running) != 4 || r.QueuedAtOrAbove(Low) != 0 ||
			r.QueueRoom != 60 || r.Workers != c.Welcome().Workers || r.BudgetFreeBytes == 0 ||
			r.EstimatedStartMs == nil || *r.EstimatedStartMs != 0 || r.EstimatedProofMs != nil || r.MeasuredJobs != 0 {
			t.Errorf("capacity of an idle daemon: %+v", r)
		}
		critical := Critical
		r, err = c.Capacity(quick(t), WindowPoSt, &critical)
		if err != nil || r.Priority != Critical || r.QueueRoom != 64 {
			t.Errorf("capacity for a critical WindowPoSt: %+v, %v", r, err)
		}
	})

	t.Run("health", func(t *testing.T) {
		h, err := c.Health(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		// One CPU device, never failed.
		if len(h.Devices) != 1 || h.Devices[0].State != HealthHealthy || h.Devices[0].Failures != 0 {
			t.Errorf("health of the CPU test daemon: %+v", h)
		}
	})

	t.Run("device memory", func(t *testing.T) {
		m, err := c.DeviceMemory(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		// One CPU device: no device memory, no plans.
		if len(m.Devices) != 1 || m.Devices[0].Memory != nil || len(m.Devices[0].Plans) != 0 {
			t.Errorf("device memory of the CPU test daemon: %+v", m)
		}
	})

	t.Run("status", func(t *testing.T) {
		s, err := c.Status(quick(t), StatusQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if s.ServerVersion != c.Welcome().ServerVersion || s.Backend != c.Welcome().Backend || s.Queued != 0 || s.Running != 0 || len(s.Jobs) != 0 {
			t.Errorf("status of an idle daemon: %+v", s)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m, err := c.Metrics(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m, "cuzk_") || !strings.Contains(m, "# TYPE") {
			t.Errorf("metrics are not cuzk's Prometheus text:\n%.500s", m)
		}
	})

	t.Run("pipeline", func(t *testing.T) {
		p, err := c.Pipeline(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		if p.SynthesisThreads == 0 || p.Waiting+p.Synthesizing+p.DeviceQueued+p.DeviceRunning != 0 || p.ReservedBytes != 0 {
			t.Errorf("pipeline of an idle daemon: %+v", p)
		}
	})

	t.Run("devices", func(t *testing.T) {
		r, err := c.Devices(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Devices) == 0 || r.Placement == "" {
			t.Fatalf("devices: %+v", r)
		}
		for _, dv := range r.Devices {
			if dv.Name == "" || dv.Running != 0 {
				t.Errorf("device of an idle daemon: %+v", dv)
			}
		}
	})

	t.Run("preload-and-residency", func(t *testing.T) {
		spec := ParamSpec{Kind: WinningPoSt, SectorSize: 2048}
		rep, err := c.Preload(quick(t), spec)
		if err != nil {
			t.Fatalf("preload of the 2 KiB WinningPoSt parameters: %v", err)
		}
		if !containsSpec(rep.Loaded, spec) {
			t.Errorf("preload report lacks %+v: %+v", spec, rep)
		}
		res, err := c.Residency(quick(t))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range res.Params {
			if p.Spec == spec {
				found = true
				// The CPU backend holds nothing on a device (protocol.md, Residency).
				if p.HostBytes == 0 || p.DeviceBytes != 0 {
					t.Errorf("residency of %+v on the CPU backend: %+v", spec, p)
				}
			}
		}
		if !found {
			t.Errorf("residency lacks %+v: %+v", spec, res)
		}
		rep, err = c.Evict(quick(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		if containsSpec(rep.Loaded, spec) {
			t.Errorf("evicted set still loaded: %+v", rep)
		}
	})

	t.Run("preload-by-proof-id", func(t *testing.T) {
		// go-state-types ids: RegisteredPoStProof_StackedDrgWindow2KiBV1_1 = 10.
		spec := ParamSpec{Kind: WindowPoSt, SectorSize: 2048}
		rep, err := c.PreloadProof(quick(t), PoStProof(10))
		if err != nil || !containsSpec(rep.Loaded, spec) {
			t.Fatalf("preload of PoSt proof 10: %+v, %v", rep, err)
		}
		if rep, err = c.EvictProof(quick(t), PoStProof(10)); err != nil || containsSpec(rep.Loaded, spec) {
			t.Errorf("evict of PoSt proof 10: %+v, %v", rep, err)
		}
		if _, err := c.PreloadProof(quick(t), SealProof(20)); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("preload of seal proof 20: want ErrInvalidInput, got %v", err)
		}
		if _, err := c.PreloadProof(quick(t), SealProof(-1)); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("preload of seal proof -1: want ErrInvalidInput, got %v", err)
		}
	})

	t.Run("preload-unknown-size", func(t *testing.T) {
		_, err := c.Preload(quick(t), ParamSpec{Kind: PoRep, SectorSize: 4096})
		var e *Error
		if !errors.Is(err, ErrInvalidInput) || !errors.As(err, &e) || e.Message == "" || Retryable(err) {
			t.Fatalf("preload of a 4 KiB set: want ErrInvalidInput, got %v", err)
		}
		// The connection survives a typed error.
		if _, err := c.Metrics(quick(t)); err != nil {
			t.Fatalf("after an error: %v", err)
		}
	})

	t.Run("unknown-job", func(t *testing.T) {
		if _, err := c.Cancel(quick(t), 987654321); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("cancel of an unknown job: want ErrUnknownJob, got %v", err)
		}
		id := uint64(987654321)
		if _, err := c.Status(quick(t), StatusQuery{JobID: &id}); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("status of an unknown job: want ErrUnknownJob, got %v", err)
		}
		if _, _, err := c.AwaitFor(quick(t), id, 0); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("await of an unknown job: want ErrUnknownJob, got %v", err)
		}
		if _, err := c.Lookup(quick(t), "no-such-request"); !errors.Is(err, ErrUnknownJob) {
			t.Errorf("lookup of an unknown request id: want ErrUnknownJob, got %v", err)
		}
		if _, err := c.Lookup(quick(t), ""); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("lookup of an empty request id: want ErrInvalidInput, got %v", err)
		}
	})

	t.Run("empty-request-id", func(t *testing.T) {
		empty := ""
		_, err := c.Submit(quick(t), Submit{RequestID: &empty, Input: WinningPoStInput{Input: []byte("{}")}})
		if !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("submit with an empty request id: want ErrInvalidInput, got %v", err)
		}
	})

	t.Run("garbage-c1", func(t *testing.T) {
		// protocol.md: Submit parses the input before queueing it; an unparseable one is
		// refused at once with InvalidInput, and no job is made.
		_, err := c.Submit(quick(t), Submit{Input: PoRepInput{C1: []byte("this is not a C1 output \x00\xff"), MinerID: 1000, SectorNumber: u64p(1)}})
		var e *Error
		if !errors.Is(err, ErrInvalidInput) || !errors.As(err, &e) || e.JobID != nil {
			t.Fatalf("submit of a garbage PoRep: want ErrInvalidInput without a job, got %v", err)
		}
	})

	t.Run("porep-proof", func(t *testing.T) { provePoRep(t, d, c) })

	t.Run("window-post-deadline", func(t *testing.T) { proveWindowDeadline(t, c) })

	t.Run("sigterm", func(t *testing.T) {
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-d.exited:
			if err != nil {
				t.Fatalf("cuzkd exited with %v after SIGTERM; stderr:\n%s", err, d.log())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("cuzkd did not exit within 60 s of SIGTERM; stderr:\n%s", d.log())
		}
		// The connection is gone with the daemon.
		if _, err := c.Metrics(quick(t)); err == nil {
			t.Fatal("a call after the daemon exited succeeded")
		}
	})
}

func containsSpec(specs []ParamSpec, s ParamSpec) bool {
	for _, x := range specs {
		if x == s {
			return true
		}
	}
	return false
}

// provePoRep seals a 2 KiB sector with `$CUZK sample` and proves its C2 with ProvePoRep,
// watching the job from a second connection meanwhile.
func provePoRep(t *testing.T, d *daemon, c *Client) {
	cli := os.Getenv("CUZK")
	if cli == "" {
		t.Fatal("CUZKD is set but CUZK (the cuzk command line, for `cuzk sample`) is not")
	}
	dir := t.TempDir()
	const miner, sector = 1000, 1
	out, err := exec.Command(cli, "sample", "--out", dir, "--miner-id", fmt.Sprint(miner), "--sector-number", fmt.Sprint(sector)).CombinedOutput()
	if err != nil {
		t.Fatalf("cuzk sample: %v\n%s", err, out)
	}
	c1, err := os.ReadFile(filepath.Join(dir, "c1.json"))
	if err != nil {
		t.Fatalf("cuzk sample wrote no c1.json: %v\n%s", err, out)
	}

	type result struct {
		proof []byte
		err   error
		took  time.Duration
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		start := time.Now()
		p, err := c.ProvePoRep(ctx, c1, miner, sector)
		done <- result{p, err, time.Since(start)}
	}()

	// While the proof runs, a second connection sees the job, and an Await whose context
	// ends first closes that connection (but not the job).
	w := dialT(t, d)
	var job *JobInfo
	for deadline := time.Now().Add(60 * time.Second); job == nil && time.Now().Before(deadline); {
		s, err := w.Status(quick(t), StatusQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Jobs {
			if s.Jobs[i].Kind == PoRep && (s.Jobs[i].State == Queued || s.Jobs[i].State == Running) {
				job = &s.Jobs[i]
			}
		}
		if job == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if job == nil {
		t.Fatal("the PoRep job never showed in Status as queued or running")
	}
	// partitions_total is 0 until the daemon has parsed the C1 (the job's first step).
	if job.Priority != Normal || job.PartitionsTotal > 1 {
		t.Errorf("the 2 KiB PoRep job: %+v", job)
	}
	// A third connection watches the job to its end.
	type watched struct {
		events []ProgressEvent
		proof  *ProofResult
		err    error
	}
	watchDone := make(chan watched, 1)
	wc := dialT(t, d)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		var got watched
		got.proof, got.err = wc.Watch(ctx, job.JobID, func(e ProgressEvent) { got.events = append(got.events, e) })
		watchDone <- got
	}()
	// Meanwhile a job submitted under a request id waits behind it (one worker), and a
	// client that lost its id finds it by the request id on another connection.
	rid := "go-test-lookup"
	acc, err := w.Submit(quick(t), Submit{RequestID: &rid, Input: PoRepInput{C1: c1, MinerID: miner, SectorNumber: u64p(sector)}})
	if err != nil {
		t.Fatalf("submit under a request id: %v", err)
	}
	l := dialT(t, d)
	found, err := l.Lookup(quick(t), rid)
	if err != nil || found.JobID != acc.JobID || found.RequestID == nil || *found.RequestID != rid || found.Kind != PoRep || found.State != Queued {
		t.Errorf("lookup of the queued job %d: %+v, %v", acc.JobID, found, err)
	}
	if cn, err := l.Cancel(quick(t), acc.JobID); err != nil || cn.WasRunning {
		t.Errorf("cancel of the queued job: %+v, %v", cn, err)
	}
	if found, err = l.Lookup(quick(t), rid); err != nil || found.JobID != acc.JobID || found.State != CancelledState {
		t.Errorf("lookup of the cancelled job: %+v, %v", found, err)
	}
	proof, pending, err := w.AwaitFor(quick(t), job.JobID, 0)
	if err != nil || proof != nil || pending == nil || pending.JobID != job.JobID {
		t.Errorf("poll of the running job: %v %v %v", proof, pending, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = w.Await(short, job.JobID)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("await past its context's deadline: want DeadlineExceeded, got %v", err)
	}
	if _, err := w.Metrics(quick(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("the connection should be closed after a deadline mid-call, got %v", err)
	}

	r := <-done
	if r.err != nil {
		t.Fatalf("ProvePoRep: %v; stderr:\n%s", r.err, d.log())
	}
	if len(r.proof) != 192 {
		t.Fatalf("a 2 KiB PoRep proof is 192 bytes, got %d", len(r.proof))
	}
	t.Logf("real 2 KiB PoRep proved and verified by cuzkd in %v", r.took.Round(time.Millisecond))

	// The watcher got the same proof, after the job's steps in order: where the job was when
	// the watch began (its state, or the latest step of a running job), then each later
	// step of its one partition (so the stages only go up), ending with the partition
	// proved and the proof verifying.
	wr := <-watchDone
	if wr.err != nil || wr.proof == nil || !bytes.Equal(wr.proof.Proof, r.proof) {
		t.Fatalf("Watch: %+v, %v", wr.proof, wr.err)
	}
	var stages []string
	for i, e := range wr.events {
		if e.JobID != job.JobID || e.Dropped != 0 || (i > 0 && e.Stage <= wr.events[i-1].Stage) {
			t.Errorf("event %d: %+v", i, e)
		}
		stages = append(stages, e.Stage.String())
	}
	if got := strings.Join(stages, " "); !strings.HasSuffix(got, "DeviceDone Verifying") {
		t.Errorf("watched stages %s", got)
	}
	if last := wr.events[len(wr.events)-1]; last.PartitionsDone != 1 || last.PartitionsTotal != 1 {
		t.Errorf("the last event: %+v", last)
	}

	// A finished job can be awaited again, from another connection, with the same proof;
	// cancelling it now is JobFinished.
	w2 := dialT(t, d)
	again, err := w2.Await(quick(t), job.JobID)
	if err != nil || !bytes.Equal(again.Proof, r.proof) || again.Kind != PoRep || again.Partitions != 1 || again.Timings.TotalUs == 0 {
		t.Errorf("re-await of the finished job: %+v, %v", again, err)
	}
	if _, err := w2.Cancel(quick(t), job.JobID); !errors.Is(err, ErrJobFinished) {
		t.Errorf("cancel of a finished job: want ErrJobFinished, got %v", err)
	}
	s, err := w2.Status(quick(t), StatusQuery{})
	// The garbage C1 was refused at Submit: it made no job, so none failed.
	if err != nil || s.Succeeded < 1 || s.Failed != 0 {
		t.Errorf("status after one proof and a refused garbage submission: %+v, %v", s, err)
	}
}

// proveWindowDeadline proves `cuzk sample`'s one-sector WindowPoSt input as a partition and
// again without its partition_index, as a whole deadline (of one partition here: the Rust
// tests prove a deadline of two partitions and check it with filecoin-proofs).
func proveWindowDeadline(t *testing.T, c *Client) {
	cli := os.Getenv("CUZK")
	if cli == "" {
		t.Fatal("CUZKD is set but CUZK (the cuzk command line, for `cuzk sample`) is not")
	}
	dir := t.TempDir()
	out, err := exec.Command(cli, "sample", "--out", dir, "--miner-id", "1000", "--sector-number", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("cuzk sample: %v\n%s", err, out)
	}
	partition, err := os.ReadFile(filepath.Join(dir, "window-post.json"))
	if err != nil {
		t.Fatalf("cuzk sample wrote no window-post.json: %v\n%s", err, out)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(partition, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["partition_index"]; !ok {
		t.Fatalf("the sample's WindowPoSt input has no partition_index: %s", partition)
	}
	delete(fields, "partition_index")
	deadline, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p, err := c.ProveWindowPoSt(ctx, partition)
	if err != nil || len(p) != 192 {
		t.Fatalf("one partition: %d bytes, %v", len(p), err)
	}
	p, err = c.ProveWindowPoStDeadline(ctx, deadline)
	if err != nil || len(p) != 192 {
		t.Fatalf("a deadline of one sector: %d bytes, %v", len(p), err)
	}
}
