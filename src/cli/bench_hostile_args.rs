//! What both modes of `cuzk bench hostile` share: its flags, issue 16's goals (the default
//! of `--frames` is one), and the helpers of the report's table (a row, a goal met or not, a
//! latency ratio). The Unix socket's mode (`bench_hostile.rs`) hands `--grpc` over to the gRPC
//! socket's (`bench_hostile_grpc.rs`), which prints the same table: both read this, so it sits
//! below both.

use std::time::Duration;

use super::bench_daemon::DaemonFlags;

/// The goals of issue 16.
pub(super) const GOAL_FRAMES: u64 = 10_000_000;
pub(super) const GOAL_CLIENTS: usize = 100;

/// `cuzk bench hostile …`
#[derive(Debug, clap::Args)]
pub struct HostileBenchArgs {
    /// Hostile clients at once (each a thread opening one connection after another).
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Fuzzed frames to send in all.
    #[arg(long, default_value_t = GOAL_FRAMES)]
    pub frames: u64,
    /// Honest proofs to complete at least, during the attack (more run while it lasts).
    #[arg(long, default_value_t = 10)]
    pub proofs: usize,
    /// Every this many honest proofs is a WinningPoSt, the others PoRep C2 (0: PoRep only,
    /// 1: WinningPoSt only).
    #[arg(long, default_value_t = 2)]
    pub winning_every: usize,
    /// Attack the gRPC socket instead (`[grpc]` enabled): HTTP/2 clients sending oversized
    /// length prefixes, 1,000 streams, slow writes, idle connections and garbage, refused
    /// peers of a uid the allow list refuses, while an honest client is timed on both
    /// sockets. Needs root (the clients take uids of their own); makes no proof.
    #[arg(long)]
    pub grpc: bool,
    /// With --grpc: how long the attack lasts, in seconds.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// The attackers' random seed (the run prints it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The daemon and its inputs. `socket.max_connections` is raised to the clients plus 16
    /// unless a `--set` gives it.
    #[command(flatten)]
    pub daemon: DaemonFlags,
}

/// One row of the report's table.
pub(super) fn row(a: &str, b: String, c: &str, d: &str) {
    println!("| {a} | {b} | {c} | {d} |");
}

pub(super) fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

pub(super) fn ratio(a: Option<Duration>, b: Option<Duration>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) if !b.is_zero() => a.as_secs_f64() / b.as_secs_f64(),
        _ => f64::NAN,
    }
}
