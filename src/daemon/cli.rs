//! `cuzkd`'s command line.

use std::path::PathBuf;

use clap::Parser;

/// cuzkd — the cuzk proving daemon: proves Filecoin Groth16 requests from clients on a Unix
/// socket.
#[derive(Debug, Parser)]
#[command(name = "cuzkd", version, about, long_about = None)]
pub struct Args {
    /// Configuration file. Without this option, /etc/cuzk/cuzk.toml is read if it exists,
    /// and the built-in defaults are used otherwise.
    #[arg(long, short = 'c', value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Validate the configuration, print the effective configuration (every key, defaults
    /// filled in) and exit: 0 if valid, 78 if not.
    #[arg(long)]
    pub check_config: bool,
}
