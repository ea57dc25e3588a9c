//! A process's resident memory as the benchmarks report it, from Linux's `/proc`.

/// Resets the peak-RSS counter (Linux `clear_refs`), so each measurement has its own peak.
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size since the last reset, in bytes.
pub(crate) fn peak_rss() -> u64 {
    peak_rss_of("self").unwrap_or(0)
}

/// The peak resident set size of process `pid` (`"self"` or a number), in bytes: Linux's
/// `VmHWM` in `/proc/<pid>/status`.
pub(crate) fn peak_rss_of(pid: &str) -> Option<u64> {
    status_bytes(pid, "VmHWM:")
}

/// A size `field` of `/proc/<pid>/status` (`VmHWM:`, `VmRSS:`), in bytes.
pub(crate) fn status_bytes(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    crate::daemon::host::kib_field(&status, field)
}
