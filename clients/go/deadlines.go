package cuzk

// DeadlinesQuery asks for the queued and running jobs with a deadline, earliest due first:
// at most Max of them (0, or more than 1000: 1000).
type DeadlinesQuery struct {
	Max uint32
}

// DeadlinesReport answers Deadlines (protocol.md section 5): the jobs with a deadline the
// client sees (its own; an admin's: every user's), earliest due first, and More, how many
// such jobs were left out (due later).
type DeadlinesReport struct {
	Jobs []DeadlineInfo
	More uint64
}

// DeadlineInfo is one job with a deadline. DueInMs is the time left to its deadline (0
// once passed), OverdueMs the time since it passed (0 before). EndsInMs is when the job
// ends by the proving times the daemon measured since it started; nil where its kind, or a
// kind it waits behind, has not been measured: the daemon does not guess.
type DeadlineInfo struct {
	JobID           uint64
	Kind            ProofKind
	Priority        Priority
	State           JobState
	PartitionsDone  uint32
	PartitionsTotal uint32
	DueInMs         uint64
	OverdueMs       uint64
	EndsInMs        *uint64
}

// LateByMs is how long after its deadline the job ends by the projection; nil when it is
// projected on time or its end is not known.
func (j *DeadlineInfo) LateByMs() *uint64 {
	if j.EndsInMs == nil {
		return nil
	}
	end := *j.EndsInMs + j.OverdueMs
	if end <= j.DueInMs {
		return nil
	}
	late := end - j.DueInMs
	return &late
}

func (r DeadlinesRequest) encodeBody(e *encoder) { e.u32(r.Query.Max) }

func (r DeadlinesResponse) encodeBody(e *encoder) {
	e.varint(uint64(len(r.Deadlines.Jobs)))
	for i := range r.Deadlines.Jobs {
		j := &r.Deadlines.Jobs[i]
		e.u64(j.JobID)
		e.variant(uint32(j.Kind))
		e.variant(uint32(j.Priority))
		e.variant(uint32(j.State))
		e.u32(j.PartitionsDone)
		e.u32(j.PartitionsTotal)
		e.u64(j.DueInMs)
		e.u64(j.OverdueMs)
		e.optU64(j.EndsInMs)
	}
	e.u64(r.Deadlines.More)
}

func decodeDeadlinesReport(d *decoder) DeadlinesReport {
	n := d.length("jobs")
	rep := DeadlinesReport{Jobs: make([]DeadlineInfo, 0, n)}
	for j := 0; j < n && d.err == nil; j++ {
		rep.Jobs = append(rep.Jobs, DeadlineInfo{
			JobID:           d.u64("job_id"),
			Kind:            decodeProofKind(d),
			Priority:        decodePriority(d),
			State:           decodeJobState(d),
			PartitionsDone:  d.u32("partitions_done"),
			PartitionsTotal: d.u32("partitions_total"),
			DueInMs:         d.u64("due_in_ms"),
			OverdueMs:       d.u64("overdue_ms"),
			EndsInMs:        d.optU64("ends_in_ms"),
		})
	}
	rep.More = d.u64("more")
	return rep
}
