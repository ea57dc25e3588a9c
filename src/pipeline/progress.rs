//! What a running proof reports as it goes, for whoever watches its job: the parameters
//! being loaded and ready, each partition entering and leaving synthesis and the device,
//! and the verification. The stages and the pipeline report them through the job's
//! [`JobControl`](super::JobControl); the engine attaches a sink per job
//! ([`JobControl::on_progress`](super::JobControl::on_progress)).
//!
//! A sink is called on the thread where the step happened (a synthesis thread, a device
//! worker, the job's worker): it must return at once and never block. Steps of one
//! partition are reported in order; steps of different partitions interleave as they
//! happen.

use std::sync::Arc;
use std::time::Duration;

/// One step of a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The job's parameter set is not resident: it is being loaded (and prepared on the
    /// devices), which takes minutes for a 32 GiB set.
    ParamsLoading,
    /// The parameter set is resident and prepared; `took` is the time getting it took (about
    /// zero when it was resident).
    ParamsReady,
    /// A partition was admitted (a synthesis thread and its host memory) and is being
    /// synthesized; `took` is the time it waited for admission.
    SynthesisStarted,
    /// A partition is synthesized and queued for a device; `took` is its synthesis time.
    SynthesisDone,
    /// A device worker took the partition; `took` is the time it waited in the device queue.
    DeviceStarted,
    /// The partition is proved; `took` is its time on the device.
    DeviceDone,
    /// Every partition is proved: the proof is being verified.
    Verifying,
}

impl Step {
    /// Lower-case name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::ParamsLoading => "params_loading",
            Step::ParamsReady => "params_ready",
            Step::SynthesisStarted => "synthesis_started",
            Step::SynthesisDone => "synthesis_done",
            Step::DeviceStarted => "device_started",
            Step::DeviceDone => "device_done",
            Step::Verifying => "verifying",
        }
    }
}

/// One reported step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepEvent {
    /// What happened.
    pub step: Step,
    /// The partition it happened to (0-based, in proof order); `None` for the job's own
    /// steps (parameters, verification).
    pub partition: Option<usize>,
    /// The time spent in the stage the step ends (see [`Step`]); zero where it ends none.
    pub took: Duration,
}

/// Receives a job's [`StepEvent`]s; must not block.
pub type ProgressSink = Arc<dyn Fn(&StepEvent) + Send + Sync>;
