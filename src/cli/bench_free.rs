//! `cuzk bench free`: how long a large free holds up the threads that map memory, freed
//! whole (the reference, measured in the same run) against handed back in pieces first
//! ([`crate::prover::gentle`], what the binaries' allocator does), and, for the kernel's
//! sake, handed back in one call (which stalls no one since Linux 6.16, and on older kernels
//! holds the memory-map lock for its whole length).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::prover::gentle::{hand_back, hand_back_in, PIECE};

/// How a block is freed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Freed as it is: the allocator unmaps it.
    Whole,
    /// Its pages handed back in one `madvise` call, then freed.
    OneCall,
    /// Its pages handed back in pieces ([`hand_back`]), then freed.
    Pieces,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Whole => "whole",
            Way::OneCall => "in one madvise",
            Way::Pieces => "in pieces",
        }
    }
}

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

/// One free, and what a thread that starts threads and maps memory saw during it.
struct Freed {
    took: Duration,
    /// The longest probe round that overlapped the free.
    worst: Duration,
    /// Probe rounds that overlapped it.
    probes: usize,
}

/// Runs the benchmark: `rounds` rounds, each freeing a block every way in turn, each free
/// beside the probe.
pub fn run(args: FreeBenchArgs) -> anyhow::Result<()> {
    let len = usize::try_from(args.size)?;
    anyhow::ensure!(len >= 1 << 20, "--size must be at least 1 MiB");
    let gib = args.size as f64 / (1u64 << 30) as f64;
    let ways = [Way::Whole, Way::OneCall, Way::Pieces];
    let mut worst = [Duration::ZERO; 3];
    let mut unseen = false;
    for _ in 0..args.rounds.max(1) {
        for (k, way) in ways.into_iter().enumerate() {
            let f = free_beside_probe(len, way)?;
            worst[k] = worst[k].max(f.worst);
            unseen |= f.probes == 0;
            println!(
                "free of {gib:.2} GiB {}: {:.3} s; the longest thread start and 1 MiB map \
                 during it: {:.4} s ({} of them)",
                way.name(),
                f.took.as_secs_f64(),
                f.worst.as_secs_f64(),
                f.probes
            );
        }
    }
    let ratio = |w: Duration| w.as_secs_f64() / worst[0].as_secs_f64().max(1e-9);
    let met = match (unseen, worst[2] <= GOAL) {
        (true, _) => "not measured: a free no probe round overlapped",
        (false, true) => "met",
        (false, false) => "NOT met",
    };
    println!(
        "longest stall in pieces {:.4} s against whole {:.4} s: {:.3}× (goal ≤ {} ms: {met}); \
         in one madvise {:.4} s ({:.3}×); pieces of {} MiB",
        worst[2].as_secs_f64(),
        worst[0].as_secs_f64(),
        ratio(worst[2]),
        GOAL.as_millis(),
        worst[1].as_secs_f64(),
        ratio(worst[1]),
        PIECE >> 20
    );
    Ok(())
}

/// Allocates `len` bytes as a vector's buffer is (through `malloc`), touches every page, and
/// frees them `way` while another thread starts threads and maps memory in a loop.
fn free_beside_probe(len: usize, way: Way) -> anyhow::Result<Freed> {
    let layout = Layout::from_size_align(len, 8)?;
    // SAFETY: a non-zero size; checked for null before use.
    let ptr = unsafe { System.alloc(layout) };
    anyhow::ensure!(!ptr.is_null(), "cannot allocate {len} bytes");
    // SAFETY: `ptr` is a live block of `len` bytes, only written here.
    unsafe { std::ptr::write_bytes(ptr, 1, len) };
    let (started, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let (span, rounds) = std::thread::scope(|s| {
        let probe = s.spawn(|| {
            let mut rounds = Vec::new();
            started.store(true, Ordering::SeqCst);
            while !done.load(Ordering::SeqCst) {
                let t = Instant::now();
                let _ = std::thread::spawn(|| std::hint::black_box(vec![1u8; 4096])).join();
                map_and_unmap(1 << 20);
                rounds.push((t, Instant::now()));
            }
            rounds
        });
        while !started.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        match way {
            Way::Whole => {}
            // SAFETY: the block is ours and freed just below: no one reads it again.
            Way::Pieces => unsafe { hand_back(ptr, len) },
            // SAFETY: as above, its whole pages in one call.
            Way::OneCall => unsafe { hand_back_in(ptr, len, 1 << 62) },
        }
        // SAFETY: `ptr` came from `System` with `layout`, freed once.
        unsafe { System.dealloc(ptr, layout) };
        let end = Instant::now();
        done.store(true, Ordering::SeqCst);
        ((t, end), probe.join().unwrap_or_default())
    });
    let during: Vec<Duration> = rounds
        .iter()
        .filter(|(a, b)| *a < span.1 && *b > span.0)
        .map(|(a, b)| *b - *a)
        .collect();
    Ok(Freed {
        took: span.1 - span.0,
        worst: during.iter().copied().max().unwrap_or_default(),
        probes: during.len(),
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
