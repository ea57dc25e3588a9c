// tidy-fixture: as src/prover/pippenger/planted.rs
// `super` chains: two levels up is still `prover`; three levels up is the crate root.

use super::super::groth16::prove;
use super::super::super::daemon::Daemon; // tidy-expect: layering

mod inner {
    use super::super::super::ntt::Domain; // still prover: one more level for `inner`
    use super::super::super::super::cli::Cli; // tidy-expect: layering
}

fn lower() {
    let _ = crate::synth::synthesize; // a lower layer
    let _ = crate::srs::SrsCache::new(); // a lower layer
}
