// tidy-fixture: as src/cli/planted.rs
// The command line's library half may print its results, but reads no environment.

fn report(ms: f64) {
    println!("{ms:.1} ms");
    eprintln!("warning: slow");
    let dir = std::env::var_os("CUZK_TEST_PARAMS"); // tidy-expect: env
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", "/x"); // tidy-expect: env
    let _ = crate::daemon::run; // cli is the top layer: fine
}
