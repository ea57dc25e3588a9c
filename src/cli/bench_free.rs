//! `cuzk bench free`: how long a large free holds up the threads that map memory, freed
//! whole (the reference, measured in the same run) against handed back in pieces first
//! ([`crate::prover::gentle`], what the binaries' allocator does).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::prover::gentle::{hand_back, PIECE};

/// The stall the pieces should leave at most: well inside a WinningPoSt's slack.
const GOAL: Duration = Duration::from_millis(10);

/// Options of `cuzk bench free`.
#[derive(clap::Args, Debug, Clone)]
pub struct FreeBenchArgs {
    /// The block freed (4GiB: a 32 GiB PoRep partition's assignment).
    #[arg(long, default_value = "4GiB", value_parser = crate::config::parse_size)]
    pub size: u64,
    /// Frees of each kind.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// One free, and what a thread that starts threads and maps memory saw meanwhile.
struct Freed {
    took: Duration,
    worst: Duration,
    probes: usize,
}

/// Runs the benchmark: `rounds` frees whole, then in pieces, each beside the probe.
pub fn run(args: FreeBenchArgs) -> anyhow::Result<()> {
    let len = usize::try_from(args.size)?;
    anyhow::ensure!(len >= 1 << 20, "--size must be at least 1 MiB");
    let gib = args.size as f64 / (1u64 << 30) as f64;
    let mut worst = [Duration::ZERO; 2];
    for (k, pieces) in [false, true].into_iter().enumerate() {
        for _ in 0..args.rounds.max(1) {
            let f = free_beside_probe(len, pieces)?;
            worst[k] = worst[k].max(f.worst);
            println!(
                "free of {gib:.2} GiB {}: {:.3} s; the longest thread start and 1 MiB map \
                 during it: {:.4} s ({} of them)",
                if pieces { "in pieces" } else { "whole" },
                f.took.as_secs_f64(),
                f.worst.as_secs_f64(),
                f.probes
            );
        }
    }
    let ratio = worst[1].as_secs_f64() / worst[0].as_secs_f64().max(1e-9);
    let met = if worst[1] <= GOAL { "met" } else { "NOT met" };
    println!(
        "longest stall in pieces {:.4} s against whole {:.4} s: {ratio:.3}× (goal ≤ {} ms: {met}); pieces of {} MiB",
        worst[1].as_secs_f64(),
        worst[0].as_secs_f64(),
        GOAL.as_millis(),
        PIECE >> 20
    );
    Ok(())
}

/// Allocates `len` bytes, touches every page, and frees them (whole, or handed back in
/// pieces first) while another thread starts threads and maps memory in a loop.
fn free_beside_probe(len: usize, pieces: bool) -> anyhow::Result<Freed> {
    let layout = Layout::from_size_align(len, 4096)?;
    // SAFETY: a non-zero size; checked for null before use.
    let ptr = unsafe { System.alloc(layout) };
    anyhow::ensure!(!ptr.is_null(), "cannot allocate {len} bytes");
    // SAFETY: `ptr` is a live block of `len` bytes, only written here.
    unsafe { std::ptr::write_bytes(ptr, 1, len) };
    let (started, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let (freed, seen) = std::thread::scope(|s| {
        let probe = s.spawn(|| {
            let mut seen = Vec::new();
            started.store(true, Ordering::SeqCst);
            while !done.load(Ordering::SeqCst) {
                let t = Instant::now();
                let _ = std::thread::spawn(|| std::hint::black_box(vec![1u8; 4096])).join();
                map_and_unmap(1 << 20);
                seen.push(t.elapsed());
            }
            seen
        });
        while !started.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        if pieces {
            // SAFETY: the block is ours and freed just below: no one reads it again.
            unsafe { hand_back(ptr, len) };
        }
        // SAFETY: `ptr` came from `System` with `layout`, freed once.
        unsafe { System.dealloc(ptr, layout) };
        let freed = t.elapsed();
        done.store(true, Ordering::SeqCst);
        (freed, probe.join().unwrap_or_default())
    });
    // The probe's last round may have begun after the free ended; the longest overlaps it.
    Ok(Freed {
        took: freed,
        worst: seen.iter().copied().max().unwrap_or_default(),
        probes: seen.len(),
    })
}

/// Maps `len` bytes of anonymous memory and unmaps them: a writer of the process's map.
fn map_and_unmap(len: usize) {
    // SAFETY: an anonymous private mapping at an address the kernel picks; unmapped below
    // with the same length, never read or written.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p != libc::MAP_FAILED {
            libc::munmap(p, len);
        }
    }
}
