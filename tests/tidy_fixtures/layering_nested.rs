// tidy-fixture: as src/gpu/backend/sums.rs
// Inside a nested folder (`gpu/backend`): a child uses lower children only, read from
// `crate::gpu::backend::…` and from `super::` chains that climb to the folder's root; as part
// of `backend`, it answers to `gpu`'s layers too.

use super::residency::State; // a lower child
use super::turns::{DeviceGuard, Shared}; // lower children
use super::prepared::GpuPrepared; // tidy-expect: layering
use crate::gpu::backend::{host::Host, planned::Fill}; // tidy-expect: layering
use crate::gpu::backend::GpuBackend; // an item of the folder's root: not checked
use super::super::msm::Curve; // a lower child of `gpu`
use crate::gpu::selftest::check; // tidy-expect: layering

fn lower() {
    let _ = crate::gpu::backend::prepared::pin_streamed; // tidy-expect: layering
    let _ = super::sums::check_aux; // itself
    let _ = crate::gpu::plan::plan; // `gpu`'s lower child
}
