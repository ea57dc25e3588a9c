// tidy-fixture: as src/srs/planted.rs
//! A module of `srs` (the lowest layer) reaching up. The doc mentions crate::daemon::run,
//! which is not a use.

use super::ParamsId; // within srs
use crate::srs::SrsError; // its own top-level module
use crate::proofs::ProofKind; // tidy-expect: layering
use crate::{config::Config, prover::Backend}; // tidy-expect: layering
use crate::{
    srs::load_srs,
    gpu::GpuBackend, // tidy-expect: layering
};
use super::super::engine::Engine; // tidy-expect: layering

fn backend() -> bool {
    let name = "crate::cli::run is only a string";
    crate::gpu::try_backend().is_ok() // tidy-expect: layering
}

macro_rules! here {
    () => {
        $crate::srs::default_param_dir()
    };
}
