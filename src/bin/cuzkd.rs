//! `cuzkd`, the cuzk proving daemon. Everything lives in [`cuzk::daemon`].

use clap::Parser;

fn main() -> std::process::ExitCode {
    cuzk::daemon::main(cuzk::daemon::cli::Args::parse())
}
