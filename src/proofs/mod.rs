//! The Filecoin proof kinds: inputs, circuits, public inputs and verification.
//!
//! [`ProvingService`] is the library's front door: the daemon and the CLI hand it a
//! [`ProofRequest`] and get back verified proof bytes with per-stage timings.

pub mod binary;
mod bytes;
mod pipeline;
pub mod porep;
pub mod post;
mod progress;
mod recorded;
pub mod registry;
mod request;
mod service;
pub mod shapes;
pub mod snap;
mod stages;

pub use progress::{ProgressSink, Step, StepEvent};
pub use request::{PoRepRequest, ProofKind, ProofRequest};
pub use service::{
    Device, DeviceMemoryReport, JobControl, ProofOutput, ProveError, ProvingService,
    ResidentParams, SetPlan, StageTimings,
};
pub use stages::{
    bounded, sim, DeviceHealth, DeviceSpec, DeviceStats, HealthPolicy, HealthState,
    PipelineOptions, PipelineStats, PreparedSet, SpanObserver, Stage, StageSpan,
};
