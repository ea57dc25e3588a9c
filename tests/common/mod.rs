//! Shared set-up for the integration tests: the test-parameter directory.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Once;

use cuzk::proofs::ProofKind;

/// `$CUZK_TEST_PARAMS`, or filecoin-proofs' default cache directory.
pub fn param_dir() -> PathBuf {
    std::env::var_os("CUZK_TEST_PARAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/filecoin-proof-parameters"))
}

static INIT: Once = Once::new();

/// Points filecoin-proofs (which reads its settings once per process) at the test parameters
/// and makes sure the 2 KiB parameters of `kinds` exist, generating missing ones (slow:
/// `scripts/test.sh` generates them up front).
pub fn init(kinds: &[ProofKind]) -> PathBuf {
    let dir = param_dir();
    INIT.call_once(|| {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));
    });
    for &kind in kinds {
        cuzk::params_gen::ensure_params(&dir, kind, 2048, &mut |m| eprintln!("{m}"))
            .expect("test parameters");
    }
    dir
}
