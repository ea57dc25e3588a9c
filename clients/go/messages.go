package cuzk

import "fmt"

// ProtocolVersion is the protocol version this package speaks.
const ProtocolVersion uint32 = 1

// ProofKind is one of the four proof kinds (wire indices 0-3).
type ProofKind uint32

// The proof kinds, in wire order.
const (
	PoRep ProofKind = iota
	SnapDeals
	WindowPoSt
	WinningPoSt
)

var proofKindNames = [...]string{"PoRep", "SnapDeals", "WindowPoSt", "WinningPoSt"}

func (k ProofKind) String() string {
	return enumName(proofKindNames[:], uint32(k), "ProofKind")
}

// enumName is the name of wire index v in names, or Type(v) for an index this package does
// not know (a variant appended by a newer daemon).
func enumName(names []string, v uint32, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Priority is a job's scheduling class. A higher class always starts before a lower one.
type Priority uint32

// The priorities, in wire order.
const (
	Low Priority = iota
	Normal
	High
	Critical
)

var priorityNames = [...]string{"Low", "Normal", "High", "Critical"}

func (p Priority) String() string {
	return enumName(priorityNames[:], uint32(p), "Priority")
}

// JobState is where a job is.
type JobState uint32

// The job states, in wire order.
const (
	Queued JobState = iota
	Running
	Succeeded
	Failed
	CancelledState
)

var jobStateNames = [...]string{"Queued", "Running", "Succeeded", "Failed", "Cancelled"}

func (s JobState) String() string {
	return enumName(jobStateNames[:], uint32(s), "JobState")
}

// Hello opens a session.
type Hello struct {
	ProtocolVersion uint32
	ClientName      string
}

// Welcome is the daemon's answer to Hello.
type Welcome struct {
	ProtocolVersion uint32
	ServerVersion   string
	Backend         string
	ProofKinds      []ProofKind
	MaxFrameSize    uint32
	MaxQueued       uint32
	Workers         uint32
}

// ProofInput is one of PoRepInput, SnapDealsInput, WindowPoStInput, WinningPoStInput.
type ProofInput interface {
	Kind() ProofKind
	encode(e *encoder)
}

// PoRepInput is a PoRep C2: the C1 output (filecoin-proofs-api SealCommitPhase1Output JSON,
// or lotus-bench's wrapper), the miner's actor id (f01234 → 1234) and the sector number
// (nil only with the lotus-bench wrapper, which carries it).
type PoRepInput struct {
	C1           []byte
	MinerID      uint64
	SectorNumber *uint64
}

// SnapDealsInput is a SnapDeals update proof's JSON input (docs/inputs.md).
type SnapDealsInput struct{ Input []byte }

// WindowPoStInput is a WindowPoSt JSON input (docs/inputs.md): one partition's, with its
// partition_index, or a whole deadline's, without one.
type WindowPoStInput struct{ Input []byte }

// WinningPoStInput is a WinningPoSt JSON input (docs/inputs.md).
type WinningPoStInput struct{ Input []byte }

// Kind reports PoRep.
func (PoRepInput) Kind() ProofKind { return PoRep }

// Kind reports SnapDeals.
func (SnapDealsInput) Kind() ProofKind { return SnapDeals }

// Kind reports WindowPoSt.
func (WindowPoStInput) Kind() ProofKind { return WindowPoSt }

// Kind reports WinningPoSt.
func (WinningPoStInput) Kind() ProofKind { return WinningPoSt }

func (p PoRepInput) encode(e *encoder) {
	e.variant(uint32(PoRep))
	e.bytes(p.C1)
	e.u64(p.MinerID)
	e.optU64(p.SectorNumber)
}
func (p SnapDealsInput) encode(e *encoder)   { e.variant(uint32(SnapDeals)); e.bytes(p.Input) }
func (p WindowPoStInput) encode(e *encoder)  { e.variant(uint32(WindowPoSt)); e.bytes(p.Input) }
func (p WinningPoStInput) encode(e *encoder) { e.variant(uint32(WinningPoSt)); e.bytes(p.Input) }

// Submit queues a proof. RequestID (1-256 bytes) makes submission idempotent; Priority nil
// takes the kind's default (WinningPoSt Critical, WindowPoSt High, others Normal).
type Submit struct {
	RequestID *string
	Priority  *Priority
	Input     ProofInput
}

// AwaitJob waits for a job; TimeoutMs nil waits until it ends, 0 polls.
type AwaitJob struct {
	JobID     uint64
	TimeoutMs *uint64
}

// JobRef names a job.
type JobRef struct{ JobID uint64 }

// StatusQuery asks for one job (JobID set) or the whole daemon.
type StatusQuery struct{ JobID *uint64 }

// JobsQuery asks for the known jobs with an id above After (nil: from the first), at most
// Max of them (0: as many as fit in one frame).
type JobsQuery struct {
	After *uint64
	Max   uint32
}

// JobsPage answers Jobs: jobs in id order, and how many known jobs come after the last one
// listed (0: the last page).
type JobsPage struct {
	Jobs []JobInfo
	More uint64
}

// Ping asks the daemon to answer at once with the same Nonce (a Pong). It is the one
// request besides Hello that the daemon answers before Hello.
type Ping struct{ Nonce uint64 }

// Pong answers Ping with its Nonce.
type Pong struct{ Nonce uint64 }

// LookupQuery asks for the newest known job submitted under RequestID (1-256 bytes).
type LookupQuery struct{ RequestID string }

// ProgressStage is what happened to a watched job (ProgressEvent.Stage). Stages may be
// appended; Watch skips an event of a stage this package does not know.
type ProgressStage uint32

// The progress stages, in wire order.
const (
	StageQueued           ProgressStage = iota // the job waits in the queue (first event only)
	StageStarted                               // a worker took the job
	StageParamsLoading                         // its parameter set is being loaded
	StageParamsReady                           // its parameter set is resident (StageMs: getting it)
	StageSynthesisStarted                      // Partition admitted and being synthesized (StageMs: its wait)
	StageSynthesisDone                         // Partition synthesized, queued for a device (StageMs: synthesis)
	StageDeviceStarted                         // a device took Partition (StageMs: its wait in the device queue)
	StageDeviceDone                            // Partition proved (StageMs: its time on the device)
	StageVerifying                             // every partition proved; the proof is being verified
)

var progressStageNames = [...]string{"Queued", "Started", "ParamsLoading", "ParamsReady",
	"SynthesisStarted", "SynthesisDone", "DeviceStarted", "DeviceDone", "Verifying"}

func (s ProgressStage) String() string {
	return enumName(progressStageNames[:], uint32(s), "ProgressStage")
}

// ProgressEvent is one step of a watched job (protocol.md section 5, Watch). Partition is
// the 0-based partition of the per-partition stages (nil for the job's own);
// PartitionsDone and PartitionsTotal say where the job stands (Total is 0 until it started
// proving); AgeMs counts from its submission; StageMs is the time spent in the stage this
// event ends; Dropped counts the events the daemon dropped just before this one because the
// client read too slowly.
type ProgressEvent struct {
	JobID           uint64
	Stage           ProgressStage
	Partition       *uint32
	PartitionsDone  uint32
	PartitionsTotal uint32
	AgeMs           uint64
	StageMs         uint64
	Dropped         uint32
}

// BackendKind is what the daemon proves on. A kind this package does not know (one appended
// later) is kept as its number: read it as some accelerator.
type BackendKind uint32

// The backend kinds, in wire order.
const (
	BackendCPU BackendKind = iota // the host's CPUs only
	BackendGPU                    // at least one GPU (CPU devices may prove beside it)
)

var backendKindNames = [...]string{"Cpu", "Gpu"}

func (k BackendKind) String() string {
	return enumName(backendKindNames[:], uint32(k), "BackendKind")
}

// InfoReport answers Info: what Welcome does not say. Of Welcome.MaxQueued, CriticalReserve
// queue slots are kept for critical jobs; ResultRetentionMs is how long a finished job stays
// known to Await, Status and Lookup.
type InfoReport struct {
	BackendKind       BackendKind
	GPUDevices        uint32
	CPUDevices        uint32
	CriticalReserve   uint32
	ResultRetentionMs uint64
}

// CapacityQuery asks whether the daemon can take a job of Kind at Priority (nil: the kind's
// default, as at Submit).
type CapacityQuery struct {
	Kind     ProofKind
	Priority *Priority
}

// CapacityReport answers Capacity (protocol.md section 5). Queued and Running count the
// jobs per class, indexed by Priority (Low..Critical), all users together. QueueRoom is how
// many jobs of the class may still be queued (0: a Submit now gets ErrQueueFull).
// BudgetFreeBytes is math.MaxUint64 where there is no memory budget. EstimatedStartMs is
// when a job of the kind and class submitted now would start (0: at once) and
// EstimatedProofMs the kind's measured proving time; both are nil when they depend on a
// kind no job of which has succeeded since the daemon started: the daemon does not guess.
// MeasuredJobs counts the kind's measured jobs.
type CapacityReport struct {
	Priority         Priority
	Queued           []uint32
	Running          []uint32
	Workers          uint32
	QueueRoom        uint32
	BudgetFreeBytes  uint64
	EstimatedStartMs *uint64
	EstimatedProofMs *uint64
	MeasuredJobs     uint32
}

// QueuedAtOrAbove is the number of queued jobs of class p or a higher one: those a new job
// of class p waits behind.
func (r *CapacityReport) QueuedAtOrAbove(p Priority) uint32 {
	var n uint32
	for i, q := range r.Queued {
		if Priority(i) >= p {
			n += q
		}
	}
	return n
}

// HealthState is whether a proving device takes partitions (DeviceHealth.State). States
// may be appended; one this package does not know is kept as its number: read it as not
// healthy.
type HealthState uint32

// The health states, in wire order.
const (
	HealthHealthy     HealthState = iota // it takes partitions
	HealthQuarantined                    // it failed partitions in a row and takes none until its back-off ends
	HealthProbing                        // its back-off ended; one partition is on it as a probe
)

var healthStateNames = [...]string{"Healthy", "Quarantined", "Probing"}

func (s HealthState) String() string {
	return enumName(healthStateNames[:], uint32(s), "HealthState")
}

// DeviceHealth is one proving device's health (protocol.md section 5, Health): Failures
// counts the partitions it failed since start, ConsecutiveFailures those since its last
// success; QuarantinedForMs is how long it has been out (0 when healthy), ProbeInMs how long
// until its next probe; LastError its latest failure (bounded, escaped).
type DeviceHealth struct {
	Name                string
	State               HealthState
	Failures            uint64
	ConsecutiveFailures uint32
	QuarantinedForMs    uint64
	ProbeInMs           uint64
	LastError           *string
}

// HealthReport answers Health: every proving device, in the order Devices lists them.
type HealthReport struct {
	Devices []DeviceHealth
}

// DeviceMemoryUse is a GPU's memory in bytes: its budget (gpu.memory_limit, or what was
// free when it was opened less a margin), what it holds now and the most it held at once.
type DeviceMemoryUse struct {
	BudgetBytes uint64
	UsedBytes   uint64
	PeakBytes   uint64
}

// MemoryPlan is how one resident parameter set's proofs use a device (protocol.md section
// 5, DeviceMemory): Plan is a line for people, not a format to parse.
type MemoryPlan struct {
	Spec            ParamSpec
	Plan            string
	DeviceBytes     uint64
	PinnedHostBytes uint64
}

// DeviceMemoryReport is one device's memory (nil on a CPU device) and its plans.
type DeviceMemoryReport struct {
	Name   string
	Memory *DeviceMemoryUse
	Plans  []MemoryPlan
}

// MemoryReport answers DeviceMemory: every proving device, in the order Devices lists them.
type MemoryReport struct {
	Devices []DeviceMemoryReport
}

// ProofFamily is the family of a Filecoin proof-type id: the families number
// independently.
type ProofFamily uint32

// The families, in wire order.
const (
	SealProofFamily   ProofFamily = iota // abi.RegisteredSealProof (PoRep)
	PoStProofFamily                      // abi.RegisteredPoStProof (WinningPoSt 0-4, WindowPoSt 5-14)
	UpdateProofFamily                    // abi.RegisteredUpdateProof (SnapDeals)
)

// RegisteredProof is a proof type by Filecoin's integer id, as go-state-types numbers it
// (docs/protocol.md has the table). Build one with SealProof, PoStProof or UpdateProof.
type RegisteredProof struct {
	Family ProofFamily
	ID     uint64
}

// SealProof is an abi.RegisteredSealProof (e.g. SealProof(int64(spt))). A negative id
// names no proof: the daemon answers ErrInvalidInput.
func SealProof(id int64) RegisteredProof { return RegisteredProof{SealProofFamily, uint64(id)} }

// PoStProof is an abi.RegisteredPoStProof.
func PoStProof(id int64) RegisteredProof { return RegisteredProof{PoStProofFamily, uint64(id)} }

// UpdateProof is an abi.RegisteredUpdateProof.
func UpdateProof(id int64) RegisteredProof { return RegisteredProof{UpdateProofFamily, uint64(id)} }

// ParamSpec names a parameter set: a proof kind and a sector size in bytes.
type ParamSpec struct {
	Kind       ProofKind
	SectorSize uint64
}

// Accepted answers Submit.
type Accepted struct {
	JobID    uint64
	Existing bool // an earlier job with the same request id and input
	State    JobState
	Priority Priority
}

// Timings of a job, in microseconds; TotalUs runs from Submit to the result.
type Timings struct {
	QueueWaitUs    uint64
	ParamLoadUs    uint64
	SynthesisUs    uint64
	ProvingUs      uint64
	VerificationUs uint64
	TotalUs        uint64
}

// ProofResult is a finished job's verified proof: 192 bytes per partition, in order.
// Backend names the provers that made its partitions: the device's name where one proved
// them all, else each device and the CPU fallback with its count of partitions
// ("cuda:0 NVIDIA H200 ×8, fallback cpu (16 threads) ×2").
type ProofResult struct {
	JobID      uint64
	Kind       ProofKind
	Proof      []byte
	Partitions uint32
	Backend    string
	Timings    Timings
}

// JobInfo describes a job.
type JobInfo struct {
	JobID           uint64
	RequestID       *string
	Kind            ProofKind
	Priority        Priority
	State           JobState
	PartitionsDone  uint32
	PartitionsTotal uint32
	AgeMs           uint64
	Error           *string
}

// Cancelled answers Cancel.
type Cancelled struct {
	JobID      uint64
	WasRunning bool
}

// StatusReport answers Status.
type StatusReport struct {
	ServerVersion string
	Backend       string
	UptimeS       uint64
	Queued        uint32
	Running       uint32
	Succeeded     uint64
	Failed        uint64
	Cancelled     uint64
	Jobs          []JobInfo
	ParamsLoaded  []ParamSpec
}

// ParamsReport answers Preload and Evict: the resident parameter sets.
type ParamsReport struct {
	Loaded    []ParamSpec
	ElapsedMs uint64
}

// ErrorResponse is the daemon's typed error as it travels; the client returns it as *Error.
type ErrorResponse struct {
	Code    ErrorCode
	Message string
	JobID   *uint64
}

// ParamResidency is a resident parameter set with its host and device bytes.
type ParamResidency struct {
	Spec        ParamSpec
	HostBytes   uint64
	DeviceBytes uint64
}

// ResidencyReport answers Residency.
type ResidencyReport struct{ Params []ParamResidency }

// PipelineReport answers Pipeline. BudgetBytes is math.MaxUint64 where there is no budget.
type PipelineReport struct {
	SynthesisThreads uint32
	Waiting          uint32
	Synthesizing     uint32
	DeviceQueued     uint32
	DeviceRunning    uint32
	BudgetBytes      uint64
	ReservedBytes    uint64
	ParamsBytes      uint64
	DeviceBusyMs     uint64
	PartitionsProved uint64
}

// DeviceReport is one proving device.
type DeviceReport struct {
	Name             string
	CPUs             string // a Linux CPU list ("0-7,16-23"); empty when not pinned
	Running          uint32
	BusyMs           uint64
	PartitionsProved uint64
	Params           []ParamResidency
}

// DevicesReport answers Devices.
type DevicesReport struct {
	Placement string
	Devices   []DeviceReport
}

// Request is a message to the daemon: one of the *Request types below.
type Request interface {
	// Index is the variant index on the wire.
	Index() uint32
	encodeBody(e *encoder)
}

// The request variants (protocol.md section 4), in wire order.
type (
	HelloRequest        struct{ Hello Hello }           // 0
	SubmitRequest       struct{ Submit Submit }         // 1
	AwaitRequest        struct{ Await AwaitJob }        // 2
	ProveRequest        struct{ Submit Submit }         // 3
	CancelRequest       struct{ Job JobRef }            // 4
	StatusRequest       struct{ Query StatusQuery }     // 5
	MetricsRequest      struct{}                        // 6
	PreloadRequest      struct{ Spec ParamSpec }        // 7
	EvictRequest        struct{ Spec ParamSpec }        // 8
	ResidencyRequest    struct{}                        // 9
	PipelineRequest     struct{}                        // 10
	DevicesRequest      struct{}                        // 11
	JobsRequest         struct{ Query JobsQuery }       // 12
	PingRequest         struct{ Ping Ping }             // 13
	LookupRequest       struct{ Query LookupQuery }     // 14
	InfoRequest         struct{}                        // 15
	PreloadProofRequest struct{ Proof RegisteredProof } // 16
	EvictProofRequest   struct{ Proof RegisteredProof } // 17
	WatchRequest        struct{ Job JobRef }            // 18
	CapacityRequest     struct{ Query CapacityQuery }   // 19
	HealthRequest       struct{}                        // 20
	SubmitFdRequest     struct{ Submit Submit }         // 21: the payload comes from a passed descriptor
	ProveFdRequest      struct{ Submit Submit }         // 22: likewise
	DeviceMemoryRequest struct{}                        // 23
	SubmitWithinRequest struct {                        // 24: a Submit with a deadline
		Submit         Submit
		FinishWithinMs uint64
	}
	ProveWithinRequest struct { // 25: a Prove with a deadline
		Submit         Submit
		FinishWithinMs uint64
	}
	DeadlinesRequest struct{ Query DeadlinesQuery } // 26
)

func (HelloRequest) Index() uint32        { return 0 }
func (SubmitRequest) Index() uint32       { return 1 }
func (AwaitRequest) Index() uint32        { return 2 }
func (ProveRequest) Index() uint32        { return 3 }
func (CancelRequest) Index() uint32       { return 4 }
func (StatusRequest) Index() uint32       { return 5 }
func (MetricsRequest) Index() uint32      { return 6 }
func (PreloadRequest) Index() uint32      { return 7 }
func (EvictRequest) Index() uint32        { return 8 }
func (ResidencyRequest) Index() uint32    { return 9 }
func (PipelineRequest) Index() uint32     { return 10 }
func (DevicesRequest) Index() uint32      { return 11 }
func (JobsRequest) Index() uint32         { return 12 }
func (PingRequest) Index() uint32         { return 13 }
func (LookupRequest) Index() uint32       { return 14 }
func (InfoRequest) Index() uint32         { return 15 }
func (PreloadProofRequest) Index() uint32 { return 16 }
func (EvictProofRequest) Index() uint32   { return 17 }
func (WatchRequest) Index() uint32        { return 18 }
func (CapacityRequest) Index() uint32     { return 19 }
func (HealthRequest) Index() uint32       { return 20 }
func (SubmitFdRequest) Index() uint32     { return 21 }
func (ProveFdRequest) Index() uint32      { return 22 }
func (DeviceMemoryRequest) Index() uint32 { return 23 }
func (SubmitWithinRequest) Index() uint32 { return 24 }
func (ProveWithinRequest) Index() uint32  { return 25 }
func (DeadlinesRequest) Index() uint32    { return 26 }

func (r HelloRequest) encodeBody(e *encoder) {
	e.u32(r.Hello.ProtocolVersion)
	e.str(r.Hello.ClientName)
}
func (r SubmitRequest) encodeBody(e *encoder) { encodeSubmit(e, &r.Submit) }
func (r AwaitRequest) encodeBody(e *encoder) {
	e.u64(r.Await.JobID)
	e.optU64(r.Await.TimeoutMs)
}
func (r ProveRequest) encodeBody(e *encoder)   { encodeSubmit(e, &r.Submit) }
func (r CancelRequest) encodeBody(e *encoder)  { e.u64(r.Job.JobID) }
func (r StatusRequest) encodeBody(e *encoder)  { e.optU64(r.Query.JobID) }
func (MetricsRequest) encodeBody(*encoder)     {}
func (r PreloadRequest) encodeBody(e *encoder) { encodeParamSpec(e, r.Spec) }
func (r EvictRequest) encodeBody(e *encoder)   { encodeParamSpec(e, r.Spec) }
func (ResidencyRequest) encodeBody(*encoder)   {}
func (PipelineRequest) encodeBody(*encoder)    {}
func (DevicesRequest) encodeBody(*encoder)     {}
func (r JobsRequest) encodeBody(e *encoder) {
	e.optU64(r.Query.After)
	e.u32(r.Query.Max)
}
func (r PingRequest) encodeBody(e *encoder)         { e.u64(r.Ping.Nonce) }
func (r LookupRequest) encodeBody(e *encoder)       { e.str(r.Query.RequestID) }
func (InfoRequest) encodeBody(*encoder)             {}
func (r PreloadProofRequest) encodeBody(e *encoder) { encodeRegisteredProof(e, r.Proof) }
func (r EvictProofRequest) encodeBody(e *encoder)   { encodeRegisteredProof(e, r.Proof) }
func (r WatchRequest) encodeBody(e *encoder)        { e.u64(r.Job.JobID) }
func (r CapacityRequest) encodeBody(e *encoder) {
	e.variant(uint32(r.Query.Kind))
	if r.Query.Priority == nil {
		e.buf = append(e.buf, 0)
	} else {
		e.buf = append(e.buf, 1)
		e.variant(uint32(*r.Query.Priority))
	}
}
func (HealthRequest) encodeBody(*encoder)       {}
func (r SubmitFdRequest) encodeBody(e *encoder) { encodeSubmit(e, &r.Submit) }
func (r ProveFdRequest) encodeBody(e *encoder)  { encodeSubmit(e, &r.Submit) }
func (DeviceMemoryRequest) encodeBody(*encoder) {}
func (r SubmitWithinRequest) encodeBody(e *encoder) {
	encodeSubmit(e, &r.Submit)
	e.u64(r.FinishWithinMs)
}
func (r ProveWithinRequest) encodeBody(e *encoder) {
	encodeSubmit(e, &r.Submit)
	e.u64(r.FinishWithinMs)
}

func encodeRegisteredProof(e *encoder, p RegisteredProof) {
	e.variant(uint32(p.Family))
	e.u64(p.ID)
}

func decodeRegisteredProof(d *decoder) RegisteredProof {
	f := d.variant("RegisteredProof")
	if d.err == nil && f > uint32(UpdateProofFamily) {
		d.unknown("RegisteredProof", f)
	}
	return RegisteredProof{Family: ProofFamily(f), ID: d.u64("id")}
}

func encodeSubmit(e *encoder, s *Submit) {
	e.optStr(s.RequestID)
	if s.Priority == nil {
		e.buf = append(e.buf, 0)
	} else {
		e.buf = append(e.buf, 1)
		e.variant(uint32(*s.Priority))
	}
	s.Input.encode(e)
}

func encodeParamSpec(e *encoder, p ParamSpec) {
	e.variant(uint32(p.Kind))
	e.u64(p.SectorSize)
}

// EncodeRequest returns a request's payload (no length prefix). A Submit without an Input
// is refused rather than encoded as something the daemon cannot parse.
func EncodeRequest(r Request) ([]byte, error) {
	switch v := r.(type) {
	case nil:
		return nil, fmt.Errorf("cuzk: nil request")
	case SubmitRequest:
		if v.Submit.Input == nil {
			return nil, fmt.Errorf("cuzk: Submit without an Input")
		}
	case ProveRequest:
		if v.Submit.Input == nil {
			return nil, fmt.Errorf("cuzk: Prove without an Input")
		}
	case SubmitWithinRequest:
		if v.Submit.Input == nil {
			return nil, fmt.Errorf("cuzk: SubmitWithin without an Input")
		}
	case ProveWithinRequest:
		if v.Submit.Input == nil {
			return nil, fmt.Errorf("cuzk: ProveWithin without an Input")
		}
	}
	e := &encoder{}
	e.variant(r.Index())
	r.encodeBody(e)
	return e.buf, nil
}

// DecodeRequest decodes a request payload (what the daemon reads); used by tests and tools.
func DecodeRequest(payload []byte) (Request, error) {
	d := &decoder{buf: payload}
	var r Request
	switch i := d.variant("Request variant"); {
	case d.err != nil:
	case i == 0:
		r = HelloRequest{Hello{ProtocolVersion: d.u32("protocol_version"), ClientName: d.str("client_name")}}
	case i == 1:
		r = SubmitRequest{decodeSubmit(d)}
	case i == 2:
		r = AwaitRequest{AwaitJob{JobID: d.u64("job_id"), TimeoutMs: d.optU64("timeout_ms")}}
	case i == 3:
		r = ProveRequest{decodeSubmit(d)}
	case i == 4:
		r = CancelRequest{JobRef{JobID: d.u64("job_id")}}
	case i == 5:
		r = StatusRequest{StatusQuery{JobID: d.optU64("job_id")}}
	case i == 6:
		r = MetricsRequest{}
	case i == 7:
		r = PreloadRequest{decodeParamSpec(d)}
	case i == 8:
		r = EvictRequest{decodeParamSpec(d)}
	case i == 9:
		r = ResidencyRequest{}
	case i == 10:
		r = PipelineRequest{}
	case i == 11:
		r = DevicesRequest{}
	case i == 12:
		r = JobsRequest{JobsQuery{After: d.optU64("after"), Max: d.u32("max")}}
	case i == 13:
		r = PingRequest{Ping{Nonce: d.u64("nonce")}}
	case i == 14:
		r = LookupRequest{LookupQuery{RequestID: d.str("request_id")}}
	case i == 15:
		r = InfoRequest{}
	case i == 16:
		r = PreloadProofRequest{decodeRegisteredProof(d)}
	case i == 17:
		r = EvictProofRequest{decodeRegisteredProof(d)}
	case i == 18:
		r = WatchRequest{JobRef{JobID: d.u64("job_id")}}
	case i == 19:
		q := CapacityQuery{Kind: decodeProofKind(d)}
		if d.option("priority") {
			p := decodePriority(d)
			q.Priority = &p
		}
		r = CapacityRequest{q}
	case i == 20:
		r = HealthRequest{}
	case i == 21:
		r = SubmitFdRequest{decodeSubmit(d)}
	case i == 22:
		r = ProveFdRequest{decodeSubmit(d)}
	case i == 23:
		r = DeviceMemoryRequest{}
	case i == 24:
		r = SubmitWithinRequest{Submit: decodeSubmit(d), FinishWithinMs: d.u64("finish_within_ms")}
	case i == 25:
		r = ProveWithinRequest{Submit: decodeSubmit(d), FinishWithinMs: d.u64("finish_within_ms")}
	case i == 26:
		r = DeadlinesRequest{DeadlinesQuery{Max: d.u32("max")}}
	default:
		d.unknown("Request", i)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

func decodeSubmit(d *decoder) Submit {
	s := Submit{RequestID: d.optStr("request_id")}
	if d.option("priority") {
		p := decodePriority(d)
		s.Priority = &p
	}
	switch i := d.variant("ProofInput variant"); {
	case d.err != nil:
	case i == 0:
		s.Input = PoRepInput{C1: d.bytes("c1"), MinerID: d.u64("miner_id"), SectorNumber: d.optU64("sector_number")}
	case i == 1:
		s.Input = SnapDealsInput{Input: d.bytes("input")}
	case i == 2:
		s.Input = WindowPoStInput{Input: d.bytes("input")}
	case i == 3:
		s.Input = WinningPoStInput{Input: d.bytes("input")}
	default:
		d.unknown("ProofInput", i)
	}
	return s
}

// Unknown values of the unit enums below are decode errors, as they are for the daemon:
// a kind or state this client does not know cannot be acted on. ErrorCode is the exception
// (see decodeErrorCode).
func decodeProofKind(d *decoder) ProofKind {
	k := d.variant("ProofKind")
	if d.err == nil && k > uint32(WinningPoSt) {
		d.unknown("ProofKind", k)
	}
	return ProofKind(k)
}

func decodePriority(d *decoder) Priority {
	p := d.variant("Priority")
	if d.err == nil && p > uint32(Critical) {
		d.unknown("Priority", p)
	}
	return Priority(p)
}

func decodeJobState(d *decoder) JobState {
	s := d.variant("JobState")
	if d.err == nil && s > uint32(CancelledState) {
		d.unknown("JobState", s)
	}
	return JobState(s)
}

// decodeErrorCode keeps a code this client does not know (one appended later) instead of
// failing: protocol.md says to treat it as a ProvingFailed-like failure, never as a reason
// to drop the connection. The fields after it still decode, since codes carry no data.
func decodeErrorCode(d *decoder) ErrorCode { return ErrorCode(d.variant("ErrorCode")) }

func decodeParamSpec(d *decoder) ParamSpec {
	return ParamSpec{Kind: decodeProofKind(d), SectorSize: d.u64("sector_size")}
}

func decodeParamSpecs(d *decoder) []ParamSpec {
	n := d.length("Vec<ParamSpec>")
	out := make([]ParamSpec, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, decodeParamSpec(d))
	}
	return out
}

func decodeResidencies(d *decoder) []ParamResidency {
	n := d.length("Vec<ParamResidency>")
	out := make([]ParamResidency, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, ParamResidency{Spec: decodeParamSpec(d), HostBytes: d.u64("host_bytes"), DeviceBytes: d.u64("device_bytes")})
	}
	return out
}

func decodeJobInfo(d *decoder) JobInfo {
	return JobInfo{
		JobID:           d.u64("job_id"),
		RequestID:       d.optStr("request_id"),
		Kind:            decodeProofKind(d),
		Priority:        decodePriority(d),
		State:           decodeJobState(d),
		PartitionsDone:  d.u32("partitions_done"),
		PartitionsTotal: d.u32("partitions_total"),
		AgeMs:           d.u64("age_ms"),
		Error:           d.optStr("error"),
	}
}

// Response is a message from the daemon: one of the *Response types below.
type Response interface {
	// Index is the variant index on the wire.
	Index() uint32
	encodeBody(e *encoder)
}

// The response variants (protocol.md section 4), in wire order.
type (
	WelcomeResponse      struct{ Welcome Welcome }           // 0
	AcceptedResponse     struct{ Accepted Accepted }         // 1
	ProofResponse        struct{ Proof ProofResult }         // 2
	PendingResponse      struct{ Job JobInfo }               // 3
	CancelledResponse    struct{ Cancelled Cancelled }       // 4
	StatusResponse       struct{ Status StatusReport }       // 5
	MetricsResponse      struct{ Text string }               // 6: Prometheus text format 0.0.4
	ParamsResponse       struct{ Params ParamsReport }       // 7
	ErrorResponseMsg     struct{ Error ErrorResponse }       // 8
	ResidencyResponse    struct{ Residency ResidencyReport } // 9
	PipelineResponse     struct{ Pipeline PipelineReport }   // 10
	DevicesResponse      struct{ Devices DevicesReport }     // 11
	JobsResponse         struct{ Jobs JobsPage }             // 12
	PongResponse         struct{ Pong Pong }                 // 13
	JobResponse          struct{ Job JobInfo }               // 14: answers Lookup
	InfoResponse         struct{ Info InfoReport }           // 15
	ProgressResponse     struct{ Event ProgressEvent }       // 16: pushed after Watch only
	CapacityResponse     struct{ Capacity CapacityReport }   // 17
	HealthResponse       struct{ Health HealthReport }       // 18
	DeviceMemoryResponse struct{ Memory MemoryReport }       // 19
	DeadlinesResponse    struct{ Deadlines DeadlinesReport } // 20
)

func (WelcomeResponse) Index() uint32      { return 0 }
func (AcceptedResponse) Index() uint32     { return 1 }
func (ProofResponse) Index() uint32        { return 2 }
func (PendingResponse) Index() uint32      { return 3 }
func (CancelledResponse) Index() uint32    { return 4 }
func (StatusResponse) Index() uint32       { return 5 }
func (MetricsResponse) Index() uint32      { return 6 }
func (ParamsResponse) Index() uint32       { return 7 }
func (ErrorResponseMsg) Index() uint32     { return 8 }
func (ResidencyResponse) Index() uint32    { return 9 }
func (PipelineResponse) Index() uint32     { return 10 }
func (DevicesResponse) Index() uint32      { return 11 }
func (JobsResponse) Index() uint32         { return 12 }
func (PongResponse) Index() uint32         { return 13 }
func (JobResponse) Index() uint32          { return 14 }
func (InfoResponse) Index() uint32         { return 15 }
func (ProgressResponse) Index() uint32     { return 16 }
func (CapacityResponse) Index() uint32     { return 17 }
func (HealthResponse) Index() uint32       { return 18 }
func (DeviceMemoryResponse) Index() uint32 { return 19 }
func (DeadlinesResponse) Index() uint32    { return 20 }

func (r WelcomeResponse) encodeBody(e *encoder) {
	w := &r.Welcome
	e.u32(w.ProtocolVersion)
	e.str(w.ServerVersion)
	e.str(w.Backend)
	e.varint(uint64(len(w.ProofKinds)))
	for _, k := range w.ProofKinds {
		e.variant(uint32(k))
	}
	e.u32(w.MaxFrameSize)
	e.u32(w.MaxQueued)
	e.u32(w.Workers)
}

func (r AcceptedResponse) encodeBody(e *encoder) {
	e.u64(r.Accepted.JobID)
	e.boolean(r.Accepted.Existing)
	e.variant(uint32(r.Accepted.State))
	e.variant(uint32(r.Accepted.Priority))
}

func (r ProofResponse) encodeBody(e *encoder) {
	p := &r.Proof
	e.u64(p.JobID)
	e.variant(uint32(p.Kind))
	e.bytes(p.Proof)
	e.u32(p.Partitions)
	e.str(p.Backend)
	t := &p.Timings
	for _, v := range []uint64{t.QueueWaitUs, t.ParamLoadUs, t.SynthesisUs, t.ProvingUs, t.VerificationUs, t.TotalUs} {
		e.u64(v)
	}
}

func encodeJobInfo(e *encoder, j *JobInfo) {
	e.u64(j.JobID)
	e.optStr(j.RequestID)
	e.variant(uint32(j.Kind))
	e.variant(uint32(j.Priority))
	e.variant(uint32(j.State))
	e.u32(j.PartitionsDone)
	e.u32(j.PartitionsTotal)
	e.u64(j.AgeMs)
	e.optStr(j.Error)
}

func (r PendingResponse) encodeBody(e *encoder) { encodeJobInfo(e, &r.Job) }

func (r CancelledResponse) encodeBody(e *encoder) {
	e.u64(r.Cancelled.JobID)
	e.boolean(r.Cancelled.WasRunning)
}

func encodeParamSpecs(e *encoder, specs []ParamSpec) {
	e.varint(uint64(len(specs)))
	for _, s := range specs {
		encodeParamSpec(e, s)
	}
}

func encodeResidencies(e *encoder, rs []ParamResidency) {
	e.varint(uint64(len(rs)))
	for _, r := range rs {
		encodeParamSpec(e, r.Spec)
		e.u64(r.HostBytes)
		e.u64(r.DeviceBytes)
	}
}

func (r StatusResponse) encodeBody(e *encoder) {
	s := &r.Status
	e.str(s.ServerVersion)
	e.str(s.Backend)
	e.u64(s.UptimeS)
	e.u32(s.Queued)
	e.u32(s.Running)
	e.u64(s.Succeeded)
	e.u64(s.Failed)
	e.u64(s.Cancelled)
	e.varint(uint64(len(s.Jobs)))
	for i := range s.Jobs {
		encodeJobInfo(e, &s.Jobs[i])
	}
	encodeParamSpecs(e, s.ParamsLoaded)
}

func (r MetricsResponse) encodeBody(e *encoder) { e.str(r.Text) }

func (r ParamsResponse) encodeBody(e *encoder) {
	encodeParamSpecs(e, r.Params.Loaded)
	e.u64(r.Params.ElapsedMs)
}

func (r ErrorResponseMsg) encodeBody(e *encoder) {
	e.variant(uint32(r.Error.Code))
	e.str(r.Error.Message)
	e.optU64(r.Error.JobID)
}

func (r ResidencyResponse) encodeBody(e *encoder) { encodeResidencies(e, r.Residency.Params) }

func (r PipelineResponse) encodeBody(e *encoder) {
	p := &r.Pipeline
	for _, v := range []uint32{p.SynthesisThreads, p.Waiting, p.Synthesizing, p.DeviceQueued, p.DeviceRunning} {
		e.u32(v)
	}
	for _, v := range []uint64{p.BudgetBytes, p.ReservedBytes, p.ParamsBytes, p.DeviceBusyMs, p.PartitionsProved} {
		e.u64(v)
	}
}

func (r DevicesResponse) encodeBody(e *encoder) {
	e.str(r.Devices.Placement)
	e.varint(uint64(len(r.Devices.Devices)))
	for _, dv := range r.Devices.Devices {
		e.str(dv.Name)
		e.str(dv.CPUs)
		e.u32(dv.Running)
		e.u64(dv.BusyMs)
		e.u64(dv.PartitionsProved)
		encodeResidencies(e, dv.Params)
	}
}

func (r JobsResponse) encodeBody(e *encoder) {
	e.varint(uint64(len(r.Jobs.Jobs)))
	for i := range r.Jobs.Jobs {
		encodeJobInfo(e, &r.Jobs.Jobs[i])
	}
	e.u64(r.Jobs.More)
}

func (r PongResponse) encodeBody(e *encoder) { e.u64(r.Pong.Nonce) }
func (r JobResponse) encodeBody(e *encoder)  { encodeJobInfo(e, &r.Job) }
func (r InfoResponse) encodeBody(e *encoder) {
	i := &r.Info
	e.variant(uint32(i.BackendKind))
	e.u32(i.GPUDevices)
	e.u32(i.CPUDevices)
	e.u32(i.CriticalReserve)
	e.u64(i.ResultRetentionMs)
}

func (r HealthResponse) encodeBody(e *encoder) {
	e.varint(uint64(len(r.Health.Devices)))
	for i := range r.Health.Devices {
		h := &r.Health.Devices[i]
		e.str(h.Name)
		e.variant(uint32(h.State))
		e.u64(h.Failures)
		e.u32(h.ConsecutiveFailures)
		e.u64(h.QuarantinedForMs)
		e.u64(h.ProbeInMs)
		e.optStr(h.LastError)
	}
}

func (r DeviceMemoryResponse) encodeBody(e *encoder) {
	e.varint(uint64(len(r.Memory.Devices)))
	for i := range r.Memory.Devices {
		dv := &r.Memory.Devices[i]
		e.str(dv.Name)
		if dv.Memory == nil {
			e.buf = append(e.buf, 0)
		} else {
			e.buf = append(e.buf, 1)
			e.u64(dv.Memory.BudgetBytes)
			e.u64(dv.Memory.UsedBytes)
			e.u64(dv.Memory.PeakBytes)
		}
		e.varint(uint64(len(dv.Plans)))
		for _, p := range dv.Plans {
			encodeParamSpec(e, p.Spec)
			e.str(p.Plan)
			e.u64(p.DeviceBytes)
			e.u64(p.PinnedHostBytes)
		}
	}
}

func (r ProgressResponse) encodeBody(e *encoder) {
	p := &r.Event
	e.u64(p.JobID)
	e.variant(uint32(p.Stage))
	if p.Partition == nil {
		e.buf = append(e.buf, 0)
	} else {
		e.buf = append(e.buf, 1)
		e.u32(*p.Partition)
	}
	e.u32(p.PartitionsDone)
	e.u32(p.PartitionsTotal)
	e.u64(p.AgeMs)
	e.u64(p.StageMs)
	e.u32(p.Dropped)
}

func encodeU32s(e *encoder, vs []uint32) {
	e.varint(uint64(len(vs)))
	for _, v := range vs {
		e.u32(v)
	}
}

func decodeU32s(d *decoder, what string) []uint32 {
	n := d.length(what)
	out := make([]uint32, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.u32(what))
	}
	return out
}

func (r CapacityResponse) encodeBody(e *encoder) {
	c := &r.Capacity
	e.variant(uint32(c.Priority))
	encodeU32s(e, c.Queued)
	encodeU32s(e, c.Running)
	e.u32(c.Workers)
	e.u32(c.QueueRoom)
	e.u64(c.BudgetFreeBytes)
	e.optU64(c.EstimatedStartMs)
	e.optU64(c.EstimatedProofMs)
	e.u32(c.MeasuredJobs)
}

// EncodeResponse returns a response's payload (no length prefix); used by tests and fakes.
func EncodeResponse(r Response) []byte {
	e := &encoder{}
	e.variant(r.Index())
	r.encodeBody(e)
	return e.buf
}

// DecodeResponse decodes a response payload. It never panics: a truncated or otherwise
// invalid payload gives an error matching ErrMalformed, an unknown variant (one appended to
// the protocol after this client) an *UnknownVariantError.
func DecodeResponse(payload []byte) (Response, error) {
	d := &decoder{buf: payload}
	var r Response
	switch i := d.variant("Response variant"); {
	case d.err != nil:
	case i == 0:
		w := Welcome{ProtocolVersion: d.u32("protocol_version"), ServerVersion: d.str("server_version"), Backend: d.str("backend")}
		n := d.length("proof_kinds")
		w.ProofKinds = make([]ProofKind, 0, n)
		for j := 0; j < n && d.err == nil; j++ {
			w.ProofKinds = append(w.ProofKinds, decodeProofKind(d))
		}
		w.MaxFrameSize = d.u32("max_frame_size")
		w.MaxQueued = d.u32("max_queued")
		w.Workers = d.u32("workers")
		r = WelcomeResponse{w}
	case i == 1:
		r = AcceptedResponse{Accepted{JobID: d.u64("job_id"), Existing: d.boolean("existing"), State: decodeJobState(d), Priority: decodePriority(d)}}
	case i == 2:
		p := ProofResult{JobID: d.u64("job_id"), Kind: decodeProofKind(d), Proof: d.bytes("proof"), Partitions: d.u32("partitions"), Backend: d.str("backend")}
		p.Timings = Timings{
			QueueWaitUs:    d.u64("queue_wait_us"),
			ParamLoadUs:    d.u64("param_load_us"),
			SynthesisUs:    d.u64("synthesis_us"),
			ProvingUs:      d.u64("proving_us"),
			VerificationUs: d.u64("verification_us"),
			TotalUs:        d.u64("total_us"),
		}
		r = ProofResponse{p}
	case i == 3:
		r = PendingResponse{decodeJobInfo(d)}
	case i == 4:
		r = CancelledResponse{Cancelled{JobID: d.u64("job_id"), WasRunning: d.boolean("was_running")}}
	case i == 5:
		s := StatusReport{
			ServerVersion: d.str("server_version"),
			Backend:       d.str("backend"),
			UptimeS:       d.u64("uptime_s"),
			Queued:        d.u32("queued"),
			Running:       d.u32("running"),
			Succeeded:     d.u64("succeeded"),
			Failed:        d.u64("failed"),
			Cancelled:     d.u64("cancelled"),
		}
		n := d.length("jobs")
		s.Jobs = make([]JobInfo, 0, n)
		for j := 0; j < n && d.err == nil; j++ {
			s.Jobs = append(s.Jobs, decodeJobInfo(d))
		}
		s.ParamsLoaded = decodeParamSpecs(d)
		r = StatusResponse{s}
	case i == 6:
		r = MetricsResponse{d.str("metrics")}
	case i == 7:
		r = ParamsResponse{ParamsReport{Loaded: decodeParamSpecs(d), ElapsedMs: d.u64("elapsed_ms")}}
	case i == 8:
		r = ErrorResponseMsg{ErrorResponse{Code: decodeErrorCode(d), Message: d.str("message"), JobID: d.optU64("job_id")}}
	case i == 9:
		r = ResidencyResponse{ResidencyReport{Params: decodeResidencies(d)}}
	case i == 10:
		r = PipelineResponse{PipelineReport{
			SynthesisThreads: d.u32("synthesis_threads"),
			Waiting:          d.u32("waiting"),
			Synthesizing:     d.u32("synthesizing"),
			DeviceQueued:     d.u32("device_queued"),
			DeviceRunning:    d.u32("device_running"),
			BudgetBytes:      d.u64("budget_bytes"),
			ReservedBytes:    d.u64("reserved_bytes"),
			ParamsBytes:      d.u64("params_bytes"),
			DeviceBusyMs:     d.u64("device_busy_ms"),
			PartitionsProved: d.u64("partitions_proved"),
		}}
	case i == 11:
		rep := DevicesReport{Placement: d.str("placement")}
		n := d.length("devices")
		rep.Devices = make([]DeviceReport, 0, n)
		for j := 0; j < n && d.err == nil; j++ {
			rep.Devices = append(rep.Devices, DeviceReport{
				Name:             d.str("name"),
				CPUs:             d.str("cpus"),
				Running:          d.u32("running"),
				BusyMs:           d.u64("busy_ms"),
				PartitionsProved: d.u64("partitions_proved"),
				Params:           decodeResidencies(d),
			})
		}
		r = DevicesResponse{rep}
	case i == 12:
		n := d.length("jobs")
		page := JobsPage{Jobs: make([]JobInfo, 0, n)}
		for j := 0; j < n && d.err == nil; j++ {
			page.Jobs = append(page.Jobs, decodeJobInfo(d))
		}
		page.More = d.u64("more")
		r = JobsResponse{page}
	case i == 13:
		r = PongResponse{Pong{Nonce: d.u64("nonce")}}
	case i == 14:
		r = JobResponse{decodeJobInfo(d)}
	case i == 15:
		// An unknown BackendKind is kept (as for ErrorCode): it carries no data, so the
		// fields after it still decode.
		r = InfoResponse{InfoReport{
			BackendKind:       BackendKind(d.variant("BackendKind")),
			GPUDevices:        d.u32("gpu_devices"),
			CPUDevices:        d.u32("cpu_devices"),
			CriticalReserve:   d.u32("critical_reserve"),
			ResultRetentionMs: d.u64("result_retention_ms"),
		}}
	case i == 16:
		p := ProgressEvent{JobID: d.u64("job_id")}
		p.Stage = ProgressStage(d.variant("ProgressStage"))
		if d.err == nil && p.Stage > StageVerifying {
			// An appended stage: the client skips the frame (Watch does) and reads on.
			d.unknown("ProgressStage", uint32(p.Stage))
		}
		if d.option("partition") {
			k := d.u32("partition")
			p.Partition = &k
		}
		p.PartitionsDone = d.u32("partitions_done")
		p.PartitionsTotal = d.u32("partitions_total")
		p.AgeMs = d.u64("age_ms")
		p.StageMs = d.u64("stage_ms")
		p.Dropped = d.u32("dropped")
		r = ProgressResponse{p}
	case i == 17:
		c := CapacityReport{Priority: decodePriority(d)}
		c.Queued = decodeU32s(d, "queued")
		c.Running = decodeU32s(d, "running")
		c.Workers = d.u32("workers")
		c.QueueRoom = d.u32("queue_room")
		c.BudgetFreeBytes = d.u64("budget_free_bytes")
		c.EstimatedStartMs = d.optU64("estimated_start_ms")
		c.EstimatedProofMs = d.optU64("estimated_proof_ms")
		c.MeasuredJobs = d.u32("measured_jobs")
		r = CapacityResponse{c}
	case i == 18:
		n := d.length("devices")
		rep := HealthReport{Devices: make([]DeviceHealth, 0, n)}
		for j := 0; j < n && d.err == nil; j++ {
			// An unknown HealthState is kept: it carries no data, so the fields after it
			// still decode.
			rep.Devices = append(rep.Devices, DeviceHealth{
				Name:                d.str("name"),
				State:               HealthState(d.variant("HealthState")),
				Failures:            d.u64("failures"),
				ConsecutiveFailures: d.u32("consecutive_failures"),
				QuarantinedForMs:    d.u64("quarantined_for_ms"),
				ProbeInMs:           d.u64("probe_in_ms"),
				LastError:           d.optStr("last_error"),
			})
		}
		r = HealthResponse{rep}
	case i == 19:
		r = DeviceMemoryResponse{decodeMemoryReport(d)}
	case i == 20:
		r = DeadlinesResponse{decodeDeadlinesReport(d)}
	default:
		d.unknown("Response", i)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

func decodeMemoryReport(d *decoder) MemoryReport {
	n := d.length("devices")
	rep := MemoryReport{Devices: make([]DeviceMemoryReport, 0, n)}
	for j := 0; j < n && d.err == nil; j++ {
		dv := DeviceMemoryReport{Name: d.str("name")}
		if d.option("memory") {
			dv.Memory = &DeviceMemoryUse{
				BudgetBytes: d.u64("budget_bytes"),
				UsedBytes:   d.u64("used_bytes"),
				PeakBytes:   d.u64("peak_bytes"),
			}
		}
		k := d.length("plans")
		dv.Plans = make([]MemoryPlan, 0, k)
		for p := 0; p < k && d.err == nil; p++ {
			dv.Plans = append(dv.Plans, MemoryPlan{
				Spec:            decodeParamSpec(d),
				Plan:            d.str("plan"),
				DeviceBytes:     d.u64("device_bytes"),
				PinnedHostBytes: d.u64("pinned_host_bytes"),
			})
		}
		rep.Devices = append(rep.Devices, dv)
	}
	return rep
}
