// tidy-fixture: as src/pipeline/stages/planted.rs
// Inside `pipeline`: a child uses lower children only, read from `crate::pipeline::…` and
// from `super::` chains that climb to the folder's root.

use super::super::control::ProveError; // a lower child
use super::super::service::ProvingService; // tidy-expect: layering
use crate::pipeline::{progress::Step, partitions::Proved}; // tidy-expect: layering
use crate::pipeline::ProveError as Root; // an item of the folder's root: not checked
use super::gate::Gate; // its own submodule

fn lower() {
    let _ = crate::pipeline::service::ProvingService::new; // tidy-expect: layering
    let _ = crate::pipeline::stages::bounded("", 1); // itself
}
