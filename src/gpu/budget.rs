//! A device's memory budget: what the planner may use of the memory free, beside the margin
//! the driver keeps. Below both the device handle, which sets its cap from it when it opens a
//! card, and the planner (`super::plan`, which re-exports it).

/// Device memory kept free for the driver beside a budget taken from the free memory: its own
/// allocations while kernels run (their stacks), the stream-ordered pool's rounding. With
/// 512 MiB, a 32 GiB partition beside another process holding all but 14.5 GiB of an H200
/// ran the driver out of memory (docs/benchmarks.md, 2026-12-04).
pub const MARGIN: u64 = 1 << 30;

/// The memory budget of a device with `free` bytes free when it was opened: `limit`
/// (`gpu.memory_limit`) where given and lower, else the free memory less the [`MARGIN`].
pub fn device_budget(free: u64, limit: Option<u64>) -> u64 {
    let available = free.saturating_sub(MARGIN);
    limit.map_or(available, |l| l.min(available))
}

/// What a proof may plan for now ([`device_budget`] of what can be had): the driver's `free`
/// bytes and the `reclaimable` part of the `used` bytes the handle's ledger holds (what a plan
/// frees or counts: resident points, NTT tables, shape copies, the proof's own kept
/// assignment), less the [`MARGIN`], and at most what the ledger's `cap` leaves beside the bytes
/// it holds that the proof cannot free (another proof's assignment, kept on the device between
/// its two turns).
pub fn available_budget(free: u64, used: u64, reclaimable: u64, cap: u64) -> u64 {
    let reclaimable = reclaimable.min(used);
    let held = used - reclaimable;
    device_budget(
        free.saturating_add(reclaimable),
        Some(cap.saturating_sub(held)),
    )
}
