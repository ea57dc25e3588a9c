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

/// What `cuzk sample --out dir` writes for the daemon benchmarks, from a freshly sealed 2 KiB
/// sector of miner 1000: `c1.json` (PoRep C1) and `winning-post.json` (randomness all
/// `sector_number`).
pub fn sample_inputs(dir: &std::path::Path, sector_number: u64) {
    let sector = cuzk::sealing::seal_sector(
        &dir.join("sector"),
        filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        sector_number,
    )
    .expect("sealing a 2 KiB sector");
    std::fs::write(dir.join("c1.json"), &sector.c1_json).expect("writing c1.json");
    let winning = sector
        .winning_post_input([sector_number as u8; 32])
        .expect("a WinningPoSt input");
    std::fs::write(
        dir.join("winning-post.json"),
        serde_json::to_vec(&winning).expect("WinningPoSt JSON"),
    )
    .expect("writing winning-post.json");
}
