// tidy-fixture: as src/prover/planted.rs
// Environment reads in library code.

use std::env::{self, set_var}; // tidy-expect: env

fn knobs() -> Option<String> {
    let a = std::env::var("CUZK_X").ok(); // tidy-expect: env
    let b = env::var_os("CUZK_Y"); // tidy-expect: env
    for (k, v) in std::env::vars() {} // tidy-expect: env
    unsafe_free();
    let version = env!("CARGO_PKG_VERSION"); // compile time, fine
    let args: Vec<String> = std::env::args().collect(); // not a variable read
    let mut cmd = std::process::Command::new("true");
    cmd.env("A", "b"); // a child's environment, fine
    let s = "std::env::var(\"IN_A_STRING\")";
    let f = EnvFilter::try_from_env("CUZK_LOG"); // tidy-expect: env
    let g = tracing_subscriber::EnvFilter::from_default_env(); // tidy-expect: env
    let h = EnvFilter::new("info"); // a value: fine
    let shape = PassShape::from_env(); // our own function: its env::var is flagged where it is
    // std::env::var("IN_A_COMMENT")
    a
}

fn unsafe_free() {}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_in_tests_are_fine() {
        let _ = std::env::var("HOME");
    }
}
