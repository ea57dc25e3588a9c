package cuzk

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// vector is a documented message: exactly one of req/resp is set.
type vector struct {
	req  Request
	resp Response
}

func u64p(v uint64) *uint64 { return &v }
func u32p(v uint32) *uint32 { return &v }
func strp(s string) *string { return &s }
func prio(p Priority) *Priority {
	return &p
}

// vectorTable mirrors tests/proto_vectors.rs's table, value for value. Slices the decoder
// returns are empty rather than nil, so the expected values use empty slices too.
func vectorTable() map[string]vector {
	timings := Timings{QueueWaitUs: 1000, ParamLoadUs: 0, SynthesisUs: 300, ProvingUs: 200000, VerificationUs: 5, TotalUs: 201305}
	return map[string]vector{
		"hello": {req: HelloRequest{Hello{ProtocolVersion: 1, ClientName: "curio"}}},
		"welcome": {resp: WelcomeResponse{Welcome{
			ProtocolVersion: 1, ServerVersion: "cuzkd 0.1.0", Backend: "cpu",
			ProofKinds:   []ProofKind{PoRep, SnapDeals, WindowPoSt, WinningPoSt},
			MaxFrameSize: 64 << 20, MaxQueued: 64, Workers: 1,
		}}},
		"submit-porep": {req: SubmitRequest{Submit{Input: PoRepInput{C1: []byte("{}"), MinerID: 1000, SectorNumber: u64p(7)}}}},
		"submit-winning": {req: SubmitRequest{Submit{RequestID: strp("w-1"), Priority: prio(Critical),
			Input: WinningPoStInput{Input: []byte("{}")}}}},
		"prove-window":  {req: ProveRequest{Submit{Priority: prio(High), Input: WindowPoStInput{Input: []byte("[]")}}}},
		"await":         {req: AwaitRequest{AwaitJob{JobID: 42, TimeoutMs: u64p(30000)}}},
		"await-forever": {req: AwaitRequest{AwaitJob{JobID: 300}}},
		"cancel":        {req: CancelRequest{JobRef{JobID: 42}}},
		"status-all":    {req: StatusRequest{StatusQuery{}}},
		"metrics":       {req: MetricsRequest{}},
		"preload":       {req: PreloadRequest{ParamSpec{Kind: PoRep, SectorSize: 2048}}},
		"evict":         {req: EvictRequest{ParamSpec{Kind: WinningPoSt, SectorSize: 32 << 30}}},
		"accepted":      {resp: AcceptedResponse{Accepted{JobID: 42, Existing: false, State: Queued, Priority: Normal}}},
		"proof": {resp: ProofResponse{ProofResult{JobID: 42, Kind: PoRep, Proof: []byte{0xaa, 0xbb, 0xcc},
			Partitions: 1, Backend: "cpu", Timings: timings}}},
		"pending": {resp: PendingResponse{JobInfo{JobID: 42, Kind: SnapDeals, Priority: Normal, State: Running,
			PartitionsDone: 3, PartitionsTotal: 16, AgeMs: 1500}}},
		"cancelled": {resp: CancelledResponse{Cancelled{JobID: 42, WasRunning: true}}},
		"status": {resp: StatusResponse{StatusReport{ServerVersion: "cuzkd 0.1.0", Backend: "cpu", UptimeS: 60,
			Queued: 0, Running: 0, Succeeded: 2, Failed: 1, Cancelled: 0, Jobs: []JobInfo{},
			ParamsLoaded: []ParamSpec{{Kind: PoRep, SectorSize: 2048}}}}},
		"metrics-text":     {resp: MetricsResponse{"cuzk_jobs_queued 0\n"}},
		"params":           {resp: ParamsResponse{ParamsReport{Loaded: []ParamSpec{{Kind: PoRep, SectorSize: 2048}}, ElapsedMs: 12}}},
		"error-queue-full": {resp: ErrorResponseMsg{ErrorResponse{Code: CodeQueueFull, Message: "queue full"}}},
		"error-cancelled":  {resp: ErrorResponseMsg{ErrorResponse{Code: CodeCancelled, Message: "cancelled", JobID: u64p(42)}}},
		"residency":        {req: ResidencyRequest{}},
		"pipeline":         {req: PipelineRequest{}},
		"devices":          {req: DevicesRequest{}},
		"devices-report": {resp: DevicesResponse{DevicesReport{Placement: "off", Devices: []DeviceReport{{
			Name: "cpu", CPUs: "", Running: 0, BusyMs: 5, PartitionsProved: 7, Params: []ParamResidency{}}}}}},
		"pipeline-report": {resp: PipelineResponse{PipelineReport{SynthesisThreads: 16, Waiting: 3, Synthesizing: 16,
			DeviceQueued: 2, DeviceRunning: 1, BudgetBytes: 1000000, ReservedBytes: 300, ParamsBytes: 0,
			DeviceBusyMs: 5, PartitionsProved: 7}}},
		"residency-report": {resp: ResidencyResponse{ResidencyReport{Params: []ParamResidency{{
			Spec: ParamSpec{Kind: WinningPoSt, SectorSize: 2048}, HostBytes: 1000000, DeviceBytes: 300}}}}},
		"error-resource-exhausted": {resp: ErrorResponseMsg{ErrorResponse{Code: CodeResourceExhausted, Message: "oom", JobID: u64p(7)}}},
		"jobs":                     {req: JobsRequest{JobsQuery{After: u64p(42), Max: 100}}},
		"jobs-page":                {resp: JobsResponse{JobsPage{Jobs: []JobInfo{{JobID: 42, Kind: SnapDeals, Priority: Normal, State: Running, PartitionsDone: 3, PartitionsTotal: 16, AgeMs: 1500}}, More: 3}}},
		"error-priority-conflict":  {resp: ErrorResponseMsg{ErrorResponse{Code: CodePriorityConflict, Message: "priority", JobID: u64p(42)}}},
		"error-response-too-large": {resp: ErrorResponseMsg{ErrorResponse{Code: CodeResponseTooLarge, Message: "too large"}}},
		"error-in-use":             {resp: ErrorResponseMsg{ErrorResponse{Code: CodeInUse, Message: "in use", JobID: u64p(7)}}},
		"error-admin-required":     {resp: ErrorResponseMsg{ErrorResponse{Code: CodeAdminRequired, Message: "admins only"}}},
		"ping":                     {req: PingRequest{Ping{Nonce: 300}}},
		"pong":                     {resp: PongResponse{Pong{Nonce: 300}}},
		"lookup":                   {req: LookupRequest{LookupQuery{RequestID: "s-7"}}},
		"info":                     {req: InfoRequest{}},
		"preload-proof":            {req: PreloadProofRequest{SealProof(8)}},
		"evict-proof":              {req: EvictProofRequest{PoStProof(13)}},
		"info-report": {resp: InfoResponse{InfoReport{BackendKind: BackendGPU, GPUDevices: 2, CPUDevices: 1,
			CriticalReserve: 4, ResultRetentionMs: 600000}}},
		"job": {resp: JobResponse{JobInfo{JobID: 42, RequestID: strp("s-7"), Kind: PoRep, Priority: Normal,
			State: Queued, AgeMs: 1500}}},
		"watch":           {req: WatchRequest{JobRef{JobID: 42}}},
		"progress-queued": {resp: ProgressResponse{ProgressEvent{JobID: 42, Stage: StageQueued, AgeMs: 5}}},
		"progress-device-done": {resp: ProgressResponse{ProgressEvent{JobID: 42, Stage: StageDeviceDone,
			Partition: u32p(3), PartitionsDone: 4, PartitionsTotal: 10, AgeMs: 1500, StageMs: 300, Dropped: 2}}},
		"capacity": {req: CapacityRequest{CapacityQuery{Kind: PoRep, Priority: prio(Normal)}}},
		"capacity-report": {resp: CapacityResponse{CapacityReport{Priority: Normal, Queued: []uint32{0, 3, 1, 0},
			Running: []uint32{0, 1, 0, 0}, Workers: 1, QueueRoom: 52, BudgetFreeBytes: ^uint64(0),
			EstimatedStartMs: u64p(300000), EstimatedProofMs: u64p(150000), MeasuredJobs: 4}}},
		"capacity-report-unmeasured": {resp: CapacityResponse{CapacityReport{Priority: High, Queued: []uint32{0, 0, 2, 0},
			Running: []uint32{0, 0, 1, 0}, Workers: 1, BudgetFreeBytes: 1000000}}},
		"health":        {req: HealthRequest{}},
		"submit-fd":     {req: SubmitFdRequest{Submit{Input: WindowPoStInput{Input: []byte{}}}}},
		"prove-fd":      {req: ProveFdRequest{Submit{Input: PoRepInput{C1: []byte{}, MinerID: 1000, SectorNumber: u64p(7)}}}},
		"device-memory": {req: DeviceMemoryRequest{}},
		"deadlines":     {req: DeadlinesRequest{DeadlinesQuery{Max: 1000}}},
		"deadlines-report": {resp: DeadlinesResponse{DeadlinesReport{Jobs: []DeadlineInfo{
			{JobID: 7, Kind: WindowPoSt, Priority: High, State: Running, PartitionsDone: 1, PartitionsTotal: 2,
				DueInMs: 250000, EndsInMs: u64p(182000)},
			{JobID: 9, Kind: WinningPoSt, Priority: Critical, State: Queued, OverdueMs: 1500},
		}, More: 3}}},
		"submit-within": {req: SubmitWithinRequest{Submit: Submit{Input: WindowPoStInput{Input: []byte("{}")}},
			FinishWithinMs: 600000}},
		"device-memory-report": {resp: DeviceMemoryResponse{MemoryReport{Devices: []DeviceMemoryReport{{Name: "cuda:0",
			Memory: &DeviceMemoryUse{BudgetBytes: 1 << 34, UsedBytes: 1 << 30, PeakBytes: 3 << 30},
			Plans: []MemoryPlan{{Spec: ParamSpec{Kind: PoRep, SectorSize: 2048}, Plan: "all resident",
				DeviceBytes: 300000}}}}}}},
		"health-report": {resp: HealthResponse{HealthReport{Devices: []DeviceHealth{{Name: "cpu",
			State: HealthQuarantined, Failures: 3, ConsecutiveFailures: 3, QuarantinedForMs: 1500,
			ProbeInMs: 298500, LastError: strp("boom")}}}}},
	}
}

type docVector struct {
	name  string
	frame []byte
}

// documentedVectors extracts every `<!-- vector: NAME -->` + ```hex block from
// docs/protocol.md, the same way tests/proto_vectors.rs does.
func documentedVectors(t *testing.T) []docVector {
	t.Helper()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatalf("reading docs/protocol.md: %v", err)
	}
	var out []docVector
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "<!-- vector: ") || !strings.HasSuffix(line, " -->") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(line, "<!-- vector: "), " -->")
		fence := ""
		for sc.Scan() {
			if fence = strings.TrimSpace(sc.Text()); fence != "" {
				break
			}
		}
		if fence != "```hex" {
			t.Fatalf("vector %s: expected a ```hex block, found %q", name, fence)
		}
		var hexText strings.Builder
		closed := false
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if l == "```" {
				closed = true
				break
			}
			hexText.WriteString(strings.Join(strings.Fields(l), ""))
		}
		if !closed {
			t.Fatalf("vector %s: unterminated hex block", name)
		}
		b, err := hex.DecodeString(hexText.String())
		if err != nil {
			t.Fatalf("vector %s: bad hex: %v", name, err)
		}
		out = append(out, docVector{name, b})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func frameOf(t *testing.T, payload []byte) []byte {
	t.Helper()
	f, err := AppendFrame(nil, payload, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDocumentedVectors(t *testing.T) {
	table := vectorTable()
	doc := documentedVectors(t)
	if len(doc) < 20 {
		t.Fatalf("only %d vectors found in docs/protocol.md; the extraction is broken", len(doc))
	}
	seen := map[string]bool{}
	for _, v := range doc {
		v := v
		t.Run(v.name, func(t *testing.T) {
			if seen[v.name] {
				t.Fatalf("vector %s appears twice in docs/protocol.md", v.name)
			}
			seen[v.name] = true
			want, ok := table[v.name]
			if !ok {
				t.Fatalf("docs/protocol.md has vector %s that the Go client does not know: add it to vectorTable (and the codec if it is a new message)", v.name)
			}
			if len(v.frame) < LengthPrefix {
				t.Fatalf("vector %s shorter than a length prefix", v.name)
			}
			payload, err := ReadFrame(bytes.NewReader(v.frame), DefaultMaxFrameSize)
			if err != nil {
				t.Fatalf("vector %s: reading the frame: %v", v.name, err)
			}
			if LengthPrefix+len(payload) != len(v.frame) {
				t.Fatalf("vector %s: length prefix says %d, frame carries %d", v.name, len(payload), len(v.frame)-LengthPrefix)
			}
			if want.req != nil {
				enc, err := EncodeRequest(want.req)
				if err != nil {
					t.Fatal(err)
				}
				if got := frameOf(t, enc); !bytes.Equal(got, v.frame) {
					t.Errorf("vector %s: encoding differs\n got %x\nwant %x", v.name, got, v.frame)
				}
				dec, err := DecodeRequest(payload)
				if err != nil {
					t.Fatalf("vector %s: decoding: %v", v.name, err)
				}
				if !reflect.DeepEqual(dec, want.req) {
					t.Errorf("vector %s: decoding differs\n got %#v\nwant %#v", v.name, dec, want.req)
				}
			} else {
				if got := frameOf(t, EncodeResponse(want.resp)); !bytes.Equal(got, v.frame) {
					t.Errorf("vector %s: encoding differs\n got %x\nwant %x", v.name, got, v.frame)
				}
				dec, err := DecodeResponse(payload)
				if err != nil {
					t.Fatalf("vector %s: decoding: %v", v.name, err)
				}
				if !reflect.DeepEqual(dec, want.resp) {
					t.Errorf("vector %s: decoding differs\n got %#v\nwant %#v", v.name, dec, want.resp)
				}
			}
		})
	}
	// The other direction: a value in the table must be documented (a renamed vector).
	for name := range table {
		if !seen[name] {
			t.Errorf("vector %s is in the Go table but not in docs/protocol.md", name)
		}
	}
}

// The error-code table of protocol.md names every code at its index, as ErrorCode.String
// spells it; and every code has its errors.Is sentinel.
func TestErrorCodesMatchTheDocument(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		row := fmt.Sprintf("| %d | `", i)
		idx := bytes.Index(doc, []byte("| `MalformedFrame` |"))
		if idx < 0 {
			t.Fatal("no error code table in docs/protocol.md")
		}
		table := doc[idx-len("| 0 "):]
		at := bytes.Index(table, []byte(row))
		if at < 0 {
			if i != len(codeNames) {
				t.Fatalf("docs/protocol.md lists %d error codes, the Go client knows %d", i, len(codeNames))
			}
			break
		}
		rest := table[at+len(row):]
		name := string(rest[:bytes.IndexByte(rest, '`')])
		if i >= len(codeNames) {
			t.Fatalf("docs/protocol.md has error code %d %s the Go client does not know", i, name)
		}
		if got := ErrorCode(i).String(); got != name {
			t.Errorf("error code %d: document says %s, Go says %s", i, name, got)
		}
		s := Sentinel(ErrorCode(i))
		if s == nil {
			t.Fatalf("error code %d has no sentinel", i)
		}
		e := &Error{Code: ErrorCode(i)}
		if !errorsIs(e, s) {
			t.Errorf("error code %d: errors.Is(err, its sentinel) is false", i)
		}
		for j := range codeNames {
			if j != i && errorsIs(e, Sentinel(ErrorCode(j))) {
				t.Errorf("error code %d matches code %d's sentinel", i, j)
			}
		}
	}
}

// The table of proof-type ids in docs/protocol.md has a row for each id of each family,
// the PoSt and Update families ending where go-state-types ends them.
func TestRegisteredProofTableCoversTheIDs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(doc), "<!-- registered-proofs -->", 2)
	if len(parts) != 2 {
		t.Fatal("no registered-proofs table in docs/protocol.md")
	}
	last := map[ProofFamily]int{SealProofFamily: 19, PoStProofFamily: 14, UpdateProofFamily: 4}
	for id := 0; id < 20; id++ {
		var row string
		for _, l := range strings.Split(parts[1], "\n") {
			if strings.HasPrefix(l, fmt.Sprintf("| %d | ", id)) {
				row = l
				break
			}
		}
		cells := strings.Split(row, "|")
		if len(cells) != 6 {
			t.Fatalf("id %d: row %q", id, row)
		}
		for f := SealProofFamily; f <= UpdateProofFamily; f++ {
			named := strings.Contains(cells[2+int(f)], "`")
			if named != (id <= last[f]) {
				t.Errorf("id %d, family %d: %q", id, f, cells[2+int(f)])
			}
		}
	}
}
