//! What the host offers the daemon: its memory, or the memory its cgroup may use.

use std::path::Path;

/// The host's memory, or the daemon's cgroup (v2) limit where that is lower; `None` where
/// neither can be read.
pub(crate) fn memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s));
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| cgroup_path(&s).map(str::to_owned))
        .and_then(|p| {
            let file = Path::new("/sys/fs/cgroup")
                .join(p.trim_start_matches('/'))
                .join("memory.max");
            std::fs::read_to_string(file).ok()
        })
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (total, limit) {
        (Some(t), Some(l)) => Some(t.min(l)),
        (t, l) => t.or(l),
    }
}

/// The default memory budget on a host with `total` bytes: an eighth (at least 2 GiB) is
/// left to everything else (the daemon's own buffers, jobs' inputs, the system).
pub(crate) fn budget_from(total: u64) -> u64 {
    let margin = (total / 8).max(2 << 30);
    total.saturating_sub(margin).max(1 << 30)
}

/// The daemon's resident memory now (`/proc/self/statm`'s second field, in pages), in
/// bytes; the stages' probe, read at every admission that waits for memory.
pub(crate) fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    pages.checked_mul(page_size())
}

fn page_size() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(n)) if n > 0 => n as u64,
        _ => 4096,
    }
}

/// The daemon's resident memory now and the most it ever was (`VmRSS`, `VmHWM` of
/// `/proc/self/status`), in bytes.
pub(crate) fn resident_and_peak() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some((kib_field(&status, "VmRSS:")?, kib_field(&status, "VmHWM:")?))
}

/// A `Name:   123 kB` line of a `/proc` status file, in bytes.
pub(crate) fn kib_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The cgroup v2 path of `/proc/self/cgroup` (its `0::` line).
fn cgroup_path(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_processs_own_memory() {
        let status = "Name:\tcuzkd\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(1 << 20));
        assert_eq!(kib_field(status, "VmHWM:"), Some(2 << 20));
        assert_eq!(kib_field(status, "VmSwap:"), None);
        assert_eq!(kib_field("VmRSS: 12 pages\n", "VmRSS:"), None);
        // This test process's own: resident and no more than its peak.
        let (rss, peak) = resident_and_peak().expect("/proc/self/status");
        assert!(rss > 0 && rss <= peak, "{rss} {peak}");
        let statm = resident().expect("/proc/self/statm");
        assert!(statm > 0, "{statm}");
    }

    #[test]
    fn reads_mem_total_and_the_cgroup_path() {
        let meminfo = "MemTotal:       131072000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(meminfo), Some(131_072_000 * 1024));
        assert_eq!(mem_total("MemFree: 3 kB\n"), None);
        assert_eq!(
            cgroup_path("0::/system.slice/cuzkd.service\n"),
            Some("/system.slice/cuzkd.service")
        );
        assert_eq!(cgroup_path("1:name=systemd:/x\n"), None);
    }

    #[test]
    fn the_budget_leaves_an_eighth_or_two_gib() {
        assert_eq!(budget_from(128 << 30), 112 << 30);
        assert_eq!(budget_from(8 << 30), 6 << 30);
        assert_eq!(budget_from(2 << 30), 1 << 30);
    }
}
