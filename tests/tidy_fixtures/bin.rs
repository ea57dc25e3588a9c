// tidy-fixture: as src/bin/planted.rs
// A binary: reads the environment, prints, and uses any layer.

fn main() {
    let log = std::env::var("CUZK_LOG").unwrap_or_default();
    let cache = std::env::var_os("FIL_PROOFS_PARAMETER_CACHE");
    eprintln!("cuzkd: starting ({log})");
    cuzk::daemon::main();
}
