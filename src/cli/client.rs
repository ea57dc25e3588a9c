//! Commands that talk to a running `cuzkd` over its Unix socket.
//!
//! Transitional: the daemon client is being written (issue 4); until it lands, this module
//! only says so.

use clap::Subcommand;

/// Options shared by every command that talks to the daemon.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonOpts {
    /// The daemon's socket.
    #[arg(long, env = "CUZK_SOCKET", default_value = "/run/cuzk/cuzk.sock", global = true)]
    pub socket: std::path::PathBuf,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Daemon client subcommands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Show the daemon's status.
    Status(DaemonOpts),
}

/// Runs a daemon client subcommand.
pub fn run(cmd: ClientCommand) -> anyhow::Result<()> {
    match cmd {
        ClientCommand::Status(_) => anyhow::bail!("the daemon client is not built yet"),
    }
}

/// Proves `request` through the daemon and returns the proof bytes.
pub fn prove_via_daemon(
    _request: crate::proofs::ProofRequest,
    _opts: &DaemonOpts,
) -> anyhow::Result<Vec<u8>> {
    anyhow::bail!("the daemon client is not built yet; use --standalone")
}
