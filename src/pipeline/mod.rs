//! The proving pipeline, whatever the proof kind: the [`ProvingService`] keeps parameter
//! sets resident and runs each job's partitions through the shared stages (admission,
//! synthesis, the device queue, the devices), with recorded shapes, progress and per-job
//! control. The proof kinds (`crate::proofs`) plug in through [`ProofJob`] and
//! [`partitions::prove_partitions`]; nothing here names a kind.
//!
//! Inside, each module uses only those below it (tests/tidy.rs checks it): `progress`,
//! `control`, `recorded`, `stages`, `service`, `partitions`.

pub(crate) mod control;
pub(crate) mod partitions;
mod progress;
pub(crate) mod recorded;
mod service;
pub(crate) mod stages;

pub use control::{Due, JobControl, ProveError, StageTimings};
pub use progress::{ProgressSink, Step, StepEvent};
pub use service::{
    Device, DeviceMemoryReport, ProofJob, ProofOutput, ProvingService, ResidentParams, SetPlan,
};
pub use stages::{
    bounded, sim, DeviceHealth, DeviceSpec, DeviceStats, HealthPolicy, HealthState,
    PipelineOptions, PipelineStats, PreparedSet, SpanObserver, Stage, StageSpan,
};
