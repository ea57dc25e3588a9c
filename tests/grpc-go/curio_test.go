// Curio's proving client against a real cuzkd: the client code is generated from
// proto/cuzk/v1/proving.proto by Debian's protoc, protoc-gen-go and protoc-gen-go-grpc, and
// dials and calls the way Curio's lib/cuzk does (a unix:// target, 256 MiB messages, Prove
// with the SubmitProofRequest fields Curio sets). scripts/check-go.sh generates the code,
// builds this test against Debian's grpc-go in GOPATH mode, and runs it with CUZKD, CUZK and
// CUZK_TEST_PARAMS set.
package grpctest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	pb "cuzk.test/grpctest/pb"
)

// Filecoin's ids of the 2 KiB proof types `cuzk sample` writes (go-state-types' abi).
var ids = map[string]uint64{
	"StackedDrg2KiBV1_1":       5,  // abi.RegisteredSealProof_StackedDrg2KiBV1_1
	"StackedDrgWinning2KiBV1":  0,  // abi.RegisteredPoStProof_StackedDrgWinning2KiBV1
	"StackedDrgWindow2KiBV1_2": 10, // abi.RegisteredPoStProof_StackedDrgWindow2KiBV1_1
	"StackedDrg2KiBV1":         0,  // abi.RegisteredUpdateProof_StackedDrg2KiBV1
}

type postInput struct {
	RegisteredProof string   `json:"registered_proof"`
	Randomness      []byte   `json:"randomness"`
	MinerID         uint64   `json:"miner_id"`
	PartitionIndex  *uint32  `json:"partition_index"`
	VanillaProofs   [][]byte `json:"vanilla_proofs"`
}

type snapInput struct {
	RegisteredProof string   `json:"registered_proof"`
	CommROld        []byte   `json:"comm_r_old"`
	CommRNew        []byte   `json:"comm_r_new"`
	CommDNew        []byte   `json:"comm_d_new"`
	VanillaProofs   [][]byte `json:"vanilla_proofs"`
}

func readJSON(t *testing.T, path string, v interface{}) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func id(t *testing.T, name string) uint64 {
	t.Helper()
	v, ok := ids[name]
	if !ok {
		t.Fatalf("no id for %s", name)
	}
	return v
}

// startDaemon runs $CUZKD on the CPU with its gRPC endpoint on (and the extra
// configuration lines), and returns that socket.
func startDaemon(t *testing.T, extra string) (string, func() string) {
	bin, params := os.Getenv("CUZKD"), os.Getenv("CUZK_TEST_PARAMS")
	if bin == "" || params == "" {
		t.Fatal("CUZKD and CUZK_TEST_PARAMS must name cuzkd and the 2 KiB parameters (scripts/check-go.sh sets them)")
	}
	dir := t.TempDir()
	sock, grpcSock, logPath := filepath.Join(dir, "cuzk.sock"), filepath.Join(dir, "grpc.sock"), filepath.Join(dir, "stderr.log")
	config := fmt.Sprintf(`[daemon]
allow_root = %v
drain_grace = "30s"

[grpc]
enabled = true
path = %q

[params]
dir = %q

[socket]
path = %q
allowed_uids = [%s]

[proving]
backend = "cpu"
workers = 2
`, os.Geteuid() == 0, grpcSock, params, sock, extra)
	cfg := filepath.Join(dir, "cuzk.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stderr = logFile
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") && !strings.HasPrefix(kv, "WATCHDOG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logFile.Close() })
	// cuzkd links the socket into place once it listens: a file there is one to dial.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(grpcSock); err == nil {
			return grpcSock, log
		}
		if time.Now().After(deadline) {
			t.Fatalf("no gRPC socket at %s after 60 s; stderr:\n%s", grpcSock, log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialConn connects as Curio's lib/cuzk does.
func dialConn(t *testing.T, sock string) *grpc.ClientConn {
	conn, err := grpc.Dial("unix://"+sock,
		grpc.WithInsecure(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// dial is Curio's client on a new connection.
func dial(t *testing.T, sock string) pb.ProvingEngineClient {
	return pb.NewProvingEngineClient(dialConn(t, sock))
}

// prove calls Prove as Curio's Client.Prove does and checks a completed proof of one
// partition (192 bytes), which cuzkd verified before answering.
func prove(t *testing.T, c pb.ProvingEngineClient, log func() string, req *pb.SubmitProofRequest) *pb.AwaitProofResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	resp, err := c.Prove(ctx, &pb.ProveRequest{Submit: req})
	if err != nil {
		t.Fatalf("%v Prove: %v; stderr:\n%s", req.ProofKind, err, log())
	}
	r := resp.Result
	if r == nil || r.Status != pb.AwaitProofResponse_COMPLETED {
		t.Fatalf("%v Prove: %+v; stderr:\n%s", req.ProofKind, r, log())
	}
	if len(r.Proof) != 192 || r.JobId == "" || r.TotalMs == 0 {
		t.Fatalf("%v: %d proof bytes, job %q, total %d ms", req.ProofKind, len(r.Proof), r.JobId, r.TotalMs)
	}
	t.Logf("%v proved and verified by cuzkd in %v (job %s, %d ms on the prover)", req.ProofKind, time.Since(start), r.JobId, r.GpuComputeMs)
	return r
}

func TestCurioClient(t *testing.T) {
	cli := os.Getenv("CUZK")
	if cli == "" {
		t.Fatal("CUZK must name the cuzk command line (for `cuzk sample`)")
	}
	sock, log := startDaemon(t, "")
	c := dial(t, sock)

	dir := t.TempDir()
	const miner, sector = 1000, 1
	if out, err := exec.Command(cli, "sample", "--out", dir, "--miner-id", fmt.Sprint(miner), "--sector-number", fmt.Sprint(sector)).CombinedOutput(); err != nil {
		t.Fatalf("cuzk sample: %v\n%s", err, out)
	}

	// PoRep: Curio's C1 wrapper (base64 Phase1Out), as PoRepSnarkCuzk sends it.
	wrapped, err := os.ReadFile(filepath.Join(dir, "c1-lotus.json"))
	if err != nil {
		t.Fatal(err)
	}
	porep := func(c1 []byte) *pb.SubmitProofRequest {
		return &pb.SubmitProofRequest{
			RequestId: fmt.Sprintf("porep-%d-%d", miner, sector), ProofKind: pb.ProofKind_POREP_SEAL_COMMIT,
			SectorSize: 2048, RegisteredProof: id(t, "StackedDrg2KiBV1_1"), Priority: pb.Priority_NORMAL,
			VanillaProof: c1, SectorNumber: sector, MinerId: miner,
		}
	}
	first := prove(t, c, log, porep(wrapped))

	// The same sector proved again under the same request id with a new C1 (sealed again,
	// so a new ticket and interactive seed: a re-commit after a reorg changed the seed), as
	// Curio does within the result retention: a new job and a valid proof of the new input.
	dir2 := t.TempDir()
	if out, err := exec.Command(cli, "sample", "--porep-only", "--out", dir2, "--miner-id", fmt.Sprint(miner), "--sector-number", fmt.Sprint(sector)).CombinedOutput(); err != nil {
		t.Fatalf("cuzk sample (again): %v\n%s", err, out)
	}
	rewrapped, err := os.ReadFile(filepath.Join(dir2, "c1-lotus.json"))
	if err != nil {
		t.Fatal(err)
	}
	second := prove(t, c, log, porep(rewrapped))
	if second.JobId == first.JobId || string(second.Proof) == string(first.Proof) {
		t.Fatalf("the new C1 under the same request id got job %s (first %s), the same proof: %v", second.JobId, first.JobId, string(second.Proof) == string(first.Proof))
	}
	// The first result stays reachable by its job id; the new input again is the new job.
	byID, err := c.AwaitProof(context.Background(), &pb.AwaitProofRequest{JobId: first.JobId})
	if err != nil || byID.Status != pb.AwaitProofResponse_COMPLETED || string(byID.Proof) != string(first.Proof) {
		t.Fatalf("AwaitProof of the first PoRep job %s: %+v, %v", first.JobId, byID, err)
	}
	resub, err := c.SubmitProof(context.Background(), porep(rewrapped))
	if err != nil || resub.JobId != second.JobId {
		t.Fatalf("the new C1 submitted again: %+v, %v (want job %s)", resub, err, second.JobId)
	}

	// SnapDeals, as ProveUpdateCuzk sends it.
	var snap snapInput
	readJSON(t, filepath.Join(dir, "snap.json"), &snap)
	prove(t, c, log, &pb.SubmitProofRequest{
		RequestId: fmt.Sprintf("snap-%d-%d", miner, sector), ProofKind: pb.ProofKind_SNAP_DEALS_UPDATE,
		SectorSize: 2048, RegisteredProof: id(t, snap.RegisteredProof), Priority: pb.Priority_NORMAL,
		VanillaProofs: snap.VanillaProofs, SectorNumber: sector, MinerId: miner,
		CommROld: snap.CommROld, CommRNew: snap.CommRNew, CommDNew: snap.CommDNew,
	})

	// WindowPoSt partition 0 (proto3's zero), as WindowPoStCuzk sends it.
	var window postInput
	readJSON(t, filepath.Join(dir, "window-post.json"), &window)
	if window.PartitionIndex == nil || *window.PartitionIndex != 0 {
		t.Fatalf("the sample's WindowPoSt input is not partition 0: %v", window.PartitionIndex)
	}
	prove(t, c, log, &pb.SubmitProofRequest{
		RequestId: "wdpost-1000-0", ProofKind: pb.ProofKind_WINDOW_POST_PARTITION,
		SectorSize: 2048, RegisteredProof: id(t, window.RegisteredProof), Priority: pb.Priority_HIGH,
		VanillaProofs: window.VanillaProofs, MinerId: window.MinerID, Randomness: window.Randomness,
		PartitionIndex: 0,
	})
	// The same partition with a deadline (cuzkd's finish_within_ms, which Curio does not
	// send): a ProveWithin, proved and verified the same way.
	prove(t, c, log, &pb.SubmitProofRequest{
		RequestId: "wdpost-1000-0-due", ProofKind: pb.ProofKind_WINDOW_POST_PARTITION,
		SectorSize: 2048, RegisteredProof: id(t, window.RegisteredProof), Priority: pb.Priority_HIGH,
		VanillaProofs: window.VanillaProofs, MinerId: window.MinerID, Randomness: window.Randomness,
		PartitionIndex: 0, FinishWithinMs: 600000,
	})

	// WinningPoSt, as WinningPoStCuzk sends it.
	var winning postInput
	readJSON(t, filepath.Join(dir, "winning-post.json"), &winning)
	winReq := &pb.SubmitProofRequest{
		RequestId: "winpost-1000", ProofKind: pb.ProofKind_WINNING_POST,
		SectorSize: 2048, RegisteredProof: id(t, winning.RegisteredProof), Priority: pb.Priority_CRITICAL,
		VanillaProofs: winning.VanillaProofs, MinerId: winning.MinerID, Randomness: winning.Randomness,
	}
	prove(t, c, log, winReq)

	quick := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	code := func(err error) codes.Code { return status.Code(err) }

	// SubmitProof + AwaitProof: the same request id and input is the same (finished) job.
	sub, err := c.SubmitProof(quick(), winReq)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.AwaitProof(quick(), &pb.AwaitProofRequest{JobId: sub.JobId})
	if err != nil || got.Status != pb.AwaitProofResponse_COMPLETED || len(got.Proof) != 192 {
		t.Fatalf("AwaitProof of the resubmitted WinningPoSt: %+v, %v", got, err)
	}
	// Cancelling a finished job, awaiting an unknown one.
	if _, err := c.CancelProof(quick(), &pb.CancelProofRequest{JobId: sub.JobId}); code(err) != codes.FailedPrecondition {
		t.Errorf("CancelProof of a finished job: %v", err)
	}
	if _, err := c.AwaitProof(quick(), &pb.AwaitProofRequest{JobId: "123456789"}); code(err) != codes.NotFound {
		t.Errorf("AwaitProof of an unknown job: %v", err)
	}
	if _, err := c.AwaitProof(quick(), &pb.AwaitProofRequest{JobId: "not-a-job"}); code(err) != codes.NotFound {
		t.Errorf("AwaitProof of a job id cuzkd never gives: %v", err)
	}
	// Refusals before a job exists: no kind, a short randomness, vanilla proofs that do
	// not decode (cuzkd checks them before queueing).
	bad := []*pb.SubmitProofRequest{
		{ProofKind: pb.ProofKind_PROOF_KIND_UNSPECIFIED},
		{ProofKind: pb.ProofKind_WINNING_POST, RegisteredProof: 0, Randomness: []byte{1}, VanillaProofs: winning.VanillaProofs},
		{ProofKind: pb.ProofKind_WINNING_POST, RegisteredProof: 0, Randomness: winning.Randomness, VanillaProofs: [][]byte{{1, 2, 3}}},
	}
	for i, req := range bad {
		if _, err := c.Prove(quick(), &pb.ProveRequest{Submit: req}); code(err) != codes.InvalidArgument {
			t.Errorf("bad request %d: %v", i, err)
		}
	}
	// Status as Curio's HasCapacity reads it, and the metrics.
	st, err := c.GetStatus(quick(), &pb.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pending uint32
	for _, q := range st.Queues {
		pending += q.Pending + q.InProgress
	}
	if len(st.Queues) != 4 || pending != 0 || st.TotalProofsCompleted < 4 || len(st.Gpus) == 0 || len(st.LoadedSrs) == 0 {
		t.Errorf("GetStatus after four proofs: %+v", st)
	}
	// The CPU test daemon's device has no device memory to report.
	for _, g := range st.Gpus {
		if g.VramTotalBytes != 0 || g.VramFreeBytes != 0 {
			t.Errorf("GetStatus: a CPU device with device memory: %+v", g)
		}
	}
	m, err := c.GetMetrics(quick(), &pb.GetMetricsRequest{})
	if err != nil || !strings.Contains(m.PrometheusText, "cuzk_") {
		t.Errorf("GetMetrics: %v", err)
	}
	// Parameter sets are for admins: the test runs as root (CI), so its Preload works.
	if os.Geteuid() == 0 {
		if r, err := c.PreloadSRS(quick(), &pb.PreloadSrsRequest{CircuitId: "winning-2k"}); err != nil || !r.AlreadyLoaded {
			t.Errorf("PreloadSRS winning-2k: %+v, %v", r, err)
		}
	}
	if _, err := c.PreloadSRS(quick(), &pb.PreloadSrsRequest{CircuitId: "porep-3g"}); code(err) != codes.InvalidArgument {
		t.Errorf("PreloadSRS of an unknown circuit: %v", err)
	}
}

// A peer the allow lists leave out is refused on every call, as on the first socket.
func TestRefusedPeer(t *testing.T) {
	sock, log := startDaemon(t, fmt.Sprint(os.Geteuid()+12345))
	c := dial(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Refused at accept, before a byte is read: the connection is closed with a GOAWAY, which
	// grpc-go reports as UNAVAILABLE; nothing is served.
	if _, err := c.GetStatus(ctx, &pb.GetStatusRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("GetStatus from a peer not allowed: %v; stderr:\n%s", err, log())
	}
	_, err := c.Prove(ctx, &pb.ProveRequest{Submit: &pb.SubmitProofRequest{ProofKind: pb.ProofKind_WINNING_POST}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Prove from a peer not allowed: %v", err)
	}
	if !strings.Contains(log(), "connection refused: peer uid/gid not allowed") {
		t.Fatalf("the daemon did not log the refusal; stderr:\n%s", log())
	}
}

// reflect sends one server reflection request (v1alpha: what Debian's grpc-go and grpcurl's
// fallback speak) and returns the answer.
func reflect(ctx context.Context, conn *grpc.ClientConn, req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(req); err != nil {
		// A stream the server ended (a refused peer's GOAWAY may arrive before or after the
		// send) fails its send with io.EOF; the stream's status is what Recv returns.
		if err == io.EOF {
			if _, err = stream.Recv(); err == nil {
				err = io.EOF
			}
		}
		return nil, err
	}
	return stream.Recv()
}

// Server reflection lists cuzk.v1.ProvingEngine and gives its file descriptor, so that a
// client (grpcurl) needs no .proto; a peer the allow lists leave out learns nothing.
func TestReflection(t *testing.T) {
	sock, log := startDaemon(t, fmt.Sprint(os.Geteuid()))
	conn := dialConn(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := reflect(ctx, conn, &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
	if err != nil {
		t.Fatalf("reflection ListServices: %v; stderr:\n%s", err, log())
	}
	var names []string
	for _, s := range list.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "cuzk.v1.ProvingEngine") {
		t.Fatalf("reflection lists %v, not cuzk.v1.ProvingEngine", names)
	}
	file, err := reflect(ctx, conn, &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "cuzk.v1.ProvingEngine"}})
	if err != nil {
		t.Fatalf("reflection FileContainingSymbol: %v", err)
	}
	var methods []string
	for _, raw := range file.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fd); err != nil {
			t.Fatalf("a file descriptor that does not decode: %v", err)
		}
		for _, svc := range fd.GetService() {
			if fd.GetPackage()+"."+svc.GetName() != "cuzk.v1.ProvingEngine" {
				continue
			}
			for _, m := range svc.GetMethod() {
				methods = append(methods, m.GetName())
			}
		}
	}
	for _, want := range []string{"Prove", "SubmitProof", "AwaitProof", "CancelProof", "GetStatus"} {
		if !strings.Contains(" "+strings.Join(methods, " ")+" ", " "+want+" ") {
			t.Errorf("reflection's ProvingEngine has methods %v, not %s", methods, want)
		}
	}

	refusedSock, refusedLog := startDaemon(t, fmt.Sprint(os.Geteuid()+12345))
	_, err = reflect(ctx, dialConn(t, refusedSock), &rpb.ServerReflectionRequest{
		MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("reflection from a peer not allowed: %v", err)
	}
	if !strings.Contains(refusedLog(), "connection refused: peer uid/gid not allowed") {
		t.Fatalf("the daemon did not log the refusal; stderr:\n%s", refusedLog())
	}
}
