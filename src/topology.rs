//! NUMA topology and placement: which CPUs belong to which node, which node each GPU hangs
//! off, and where synthesis threads and device workers run (`proving.numa = "auto" | "off"`).
//!
//! On a multi-socket host, a synthesis thread whose memory lives on the other socket pays for
//! every access across the interconnect, and a device worker far from its GPU's PCI root pays
//! for every host-to-device copy. So the daemon reads the topology from sysfs once
//! ([`Topology::read`], which takes the sysfs root so that tests use a fake tree), narrows it to
//! the CPUs the process may use ([`Topology::restricted`], [`allowed_cpus`]), looks up each
//! GPU's node ([`gpu_numa_node`]) and builds a [`Placement`]: pure logic, no I/O, that pins
//! each device's worker to its GPU's node and spreads synthesis threads over the nodes in
//! proportion to their CPUs ([`Placement::enter_synthesis`]).
//!
//! Everything read is bounded: files to [`MAX_FILE_BYTES`], nodes to [`MAX_NODES`], CPU
//! numbers below [`MAX_CPUS`]. Pinning is best effort: a failed `sched_setaffinity` (a seccomp
//! filter, a cpuset changed under us) is logged at debug level and the thread runs unpinned.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPU numbers at or above this are refused in a cpulist: it bounds what a cpulist can make us
/// allocate, and no Linux build supports more (`CONFIG_NR_CPUS` tops out at 8192).
pub const MAX_CPUS: usize = 65536;

/// At most this many NUMA nodes are read (the kernel's `MAX_NUMNODES` is 1024).
pub const MAX_NODES: usize = 1024;

/// At most this many bytes are read from one sysfs file; a cpulist of every CPU below
/// [`MAX_CPUS`] written one by one would not fit, ranges always do.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// At most this many entries of the node directory are looked at (nodes plus the kernel's
/// other files there: `online`, `possible`, `has_cpu`, ...).
const MAX_DIR_ENTRIES: usize = 4 * MAX_NODES;

/// How much of a malformed cpulist an error message quotes.
const EXCERPT_CHARS: usize = 64;

/// Why the topology could not be read or a cpulist not parsed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A cpulist that is not in the kernel's format (see [`parse_cpulist`]).
    #[error("malformed cpulist {list:?}: {reason}")]
    Cpulist {
        /// The list, cut to its first 64 characters.
        list: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A cpulist names a CPU at or above [`MAX_CPUS`].
    #[error("cpulist names CPU {cpu}, beyond the supported {max}", max = MAX_CPUS)]
    CpuOutOfRange {
        /// The CPU number (saturated at `u64::MAX`).
        cpu: u64,
    },
    /// A sysfs file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A sysfs file larger than [`MAX_FILE_BYTES`].
    #[error("{path}: larger than {max} bytes", max = MAX_FILE_BYTES)]
    FileTooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A sysfs file whose content is wrong.
    #[error("{path}: {source}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        source: Box<TopologyError>,
    },
    /// More NUMA nodes, or more directory entries, than the bounds allow.
    #[error("{path}: more than {nodes} NUMA nodes or {entries} entries", nodes = MAX_NODES, entries = MAX_DIR_ENTRIES)]
    TooManyNodes {
        /// The node directory.
        path: PathBuf,
    },
    /// No node has a CPU.
    #[error("no CPU found under {path}")]
    NoCpus {
        /// The sysfs root.
        path: PathBuf,
    },
}

/// Parses the kernel's cpulist format: comma-separated CPU numbers and inclusive ranges, as in
/// `0-3,8-11` or `5`. Surrounding whitespace (the trailing newline of a sysfs file) is ignored
/// and an empty list is valid (a memory-only node). The result is sorted and deduplicated.
///
/// The stride syntax `0-7:2/4` that the kernel accepts on input is refused: sysfs never writes
/// it. CPU numbers at or above [`MAX_CPUS`] are refused, so the result holds at most
/// [`MAX_CPUS`] entries whatever the input.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, TopologyError> {
    let text = s.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    // Ranges first, expanded after merging, so that overlapping ranges cannot allocate more than
    // MAX_CPUS entries.
    let mut ranges = Vec::new();
    for item in text.split(',') {
        let (low, high) = match item.split_once('-') {
            Some((low, high)) => (parse_cpu(low, s)?, parse_cpu(high, s)?),
            None => {
                let cpu = parse_cpu(item, s)?;
                (cpu, cpu)
            }
        };
        if low > high {
            return Err(malformed(s, "a range that runs backwards"));
        }
        ranges.push((low, high));
    }
    ranges.sort_unstable();
    let mut cpus = Vec::new();
    let mut next = 0; // the lowest CPU not yet in `cpus`
    for (low, high) in ranges {
        cpus.extend(low.max(next)..=high);
        next = next.max(high + 1);
    }
    Ok(cpus)
}

/// One CPU number of a cpulist; `list` is the whole list, for the error message.
fn parse_cpu(token: &str, list: &str) -> Result<usize, TopologyError> {
    if token.contains(':') {
        return Err(malformed(
            list,
            "the stride syntax (a-b:s/g) is not supported",
        ));
    }
    // Digits only: `str::parse` would also take a leading '+'.
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(list, "expected a CPU number or a range a-b"));
    }
    let cpu = token.parse::<u64>().unwrap_or(u64::MAX);
    match usize::try_from(cpu) {
        Ok(cpu) if cpu < MAX_CPUS => Ok(cpu),
        _ => Err(TopologyError::CpuOutOfRange { cpu }),
    }
}

fn malformed(list: &str, reason: &'static str) -> TopologyError {
    TopologyError::Cpulist {
        list: list.chars().take(EXCERPT_CHARS).collect(),
        reason,
    }
}

/// Writes CPUs back in the kernel's cpulist form, ranges collapsed: `[0, 1, 2, 3, 8]` gives
/// `0-3,8`. The input need not be sorted; duplicates are ignored. An empty list gives `""`.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut rest = sorted.as_slice();
    while let Some(&first) = rest.first() {
        // The run is as long as each CPU follows the one before.
        let run = rest
            .iter()
            .enumerate()
            .take_while(|&(i, &cpu)| first.checked_add(i) == Some(cpu))
            .count();
        let last = rest[run - 1];
        parts.push(if run == 1 {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        rest = &rest[run..];
    }
    parts.join(",")
}

/// One NUMA node with CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The kernel's node number (`node<id>` in sysfs).
    pub id: u32,
    /// Its CPUs, sorted, without duplicates.
    pub cpus: Vec<usize>,
}

/// The host's NUMA nodes that have CPUs, sorted by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
}

impl Topology {
    /// A topology of these nodes: CPU lists sorted and deduplicated, nodes without CPUs dropped,
    /// nodes sorted by id, and nodes named twice merged.
    pub fn new(mut nodes: Vec<Node>) -> Topology {
        nodes.retain(|node| !node.cpus.is_empty());
        nodes.sort_by_key(|node| node.id);
        // `dedup_by` hands the later node first; its CPUs move into the one kept.
        nodes.dedup_by(|later, kept| {
            let same = later.id == kept.id;
            if same {
                kept.cpus.append(&mut later.cpus);
            }
            same
        });
        for node in &mut nodes {
            node.cpus.sort_unstable();
            node.cpus.dedup();
        }
        Topology { nodes }
    }

    /// Reads the topology under a sysfs root (`/sys` on a real host): the `cpulist` of every
    /// `<root>/devices/system/node/node<N>`, skipping memory-only nodes and the directory's
    /// other entries. A kernel without NUMA has no node directory: then the topology is one
    /// node 0 with the CPUs of `<root>/devices/system/cpu/online`.
    pub fn read(sysfs_root: &Path) -> Result<Topology, TopologyError> {
        let node_dir = sysfs_root.join("devices/system/node");
        let nodes = match fs::read_dir(&node_dir) {
            Ok(entries) => read_nodes(&node_dir, entries)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let online = sysfs_root.join("devices/system/cpu/online");
                vec![Node {
                    id: 0,
                    cpus: read_cpulist(&online)?,
                }]
            }
            Err(source) => {
                return Err(TopologyError::Io {
                    path: node_dir,
                    source,
                })
            }
        };
        let topology = Topology::new(nodes);
        if topology.nodes.is_empty() {
            return Err(TopologyError::NoCpus {
                path: sysfs_root.to_path_buf(),
            });
        }
        Ok(topology)
    }

    /// The nodes, sorted by id, each with at least one CPU.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// This topology narrowed to the CPUs the process may run on (its affinity mask, which
    /// a cgroup cpuset also narrows: see [`allowed_cpus`]); nodes left without CPUs are
    /// dropped, so the result may have no node at all.
    pub fn restricted(&self, allowed: &[usize]) -> Topology {
        let mut allowed = allowed.to_vec();
        allowed.sort_unstable();
        let nodes = self
            .nodes
            .iter()
            .map(|node| Node {
                id: node.id,
                cpus: node
                    .cpus
                    .iter()
                    .copied()
                    .filter(|cpu| allowed.binary_search(cpu).is_ok())
                    .collect(),
            })
            .collect();
        Topology::new(nodes)
    }
}

/// The `node<N>` entries of the node directory, their CPUs read; other entries are skipped.
fn read_nodes(node_dir: &Path, entries: fs::ReadDir) -> Result<Vec<Node>, TopologyError> {
    let too_many = || TopologyError::TooManyNodes {
        path: node_dir.to_path_buf(),
    };
    let mut nodes = Vec::new();
    for (count, entry) in entries.enumerate() {
        if count >= MAX_DIR_ENTRIES {
            return Err(too_many());
        }
        let entry = entry.map_err(|source| TopologyError::Io {
            path: node_dir.to_path_buf(),
            source,
        })?;
        let Some(id) = entry.file_name().to_str().and_then(node_id) else {
            continue;
        };
        if nodes.len() >= MAX_NODES {
            return Err(too_many());
        }
        let cpus = read_cpulist(&entry.path().join("cpulist"))?;
        nodes.push(Node { id, cpus });
    }
    Ok(nodes)
}

/// The node number of a directory named `node<N>`, in the kernel's form (no sign, no leading
/// zero), so that no two names give one id.
fn node_id(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("node")?;
    let id = digits.parse::<u32>().ok()?;
    (id.to_string() == digits).then_some(id)
}

fn read_cpulist(path: &Path) -> Result<Vec<usize>, TopologyError> {
    let text = read_small(path)?;
    parse_cpulist(&text).map_err(|error| TopologyError::BadFile {
        path: path.to_path_buf(),
        source: Box::new(error),
    })
}

/// Reads a sysfs file of at most [`MAX_FILE_BYTES`] as text.
fn read_small(path: &Path) -> Result<String, TopologyError> {
    let io_error = |source| TopologyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_error)?;
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file at the limit from one beyond it.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TopologyError::FileTooLarge {
            path: path.to_path_buf(),
        });
    }
    String::from_utf8(bytes)
        .map_err(|error| io_error(io::Error::new(io::ErrorKind::InvalidData, error)))
}

/// The CPUs the calling thread may run on: its affinity mask, which the cgroup cpuset and
/// `taskset` narrow. Only CPUs below `CpuSet::count()` (1024 with glibc) are seen; on a host
/// with more, the kernel refuses the call (EINVAL) and the caller should run unpinned.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0))?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

/// Pins the calling thread to these CPUs (`sched_setaffinity` on thread 0, i.e. itself; the
/// threads it spawns afterwards inherit the mask). The pinning outlives any guard: a pooled
/// thread that moves between nodes must pin again for each job. CPUs at or above
/// `CpuSet::count()` are skipped; an empty list changes nothing; a list with no CPU left after
/// skipping is an `InvalidInput` error rather than an empty mask.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = CpuSet::new();
    let mut any = false;
    for &cpu in cpus.iter().filter(|&&cpu| cpu < CpuSet::count()) {
        set.set(cpu)?;
        any = true;
    }
    if !any {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no CPU of {} fits an affinity mask", format_cpulist(cpus)),
        ));
    }
    Ok(sched_setaffinity(Pid::from_raw(0), &set)?)
}

/// The NUMA node of the GPU at a PCI bus id, from `<root>/bus/pci/devices/<id>/numa_node`;
/// `None` when the kernel does not know it (`-1`, a host without NUMA), when the file is
/// missing or unreadable, or when the id is not a PCI bus id.
///
/// CUDA writes the id with an 8-digit domain and upper-case hex (`00000000:1B:00.0`); sysfs
/// names the device `0000:1b:00.0`. The id is parsed into numbers and the directory name
/// written from them, so no text of the caller's (a '/', a "..") ever reaches the path.
pub fn gpu_numa_node(sysfs_root: &Path, pci_bus_id: &str) -> Option<u32> {
    let name = sysfs_pci_name(pci_bus_id)?;
    let path = sysfs_root
        .join("bus/pci/devices")
        .join(name)
        .join("numa_node");
    let text = read_small(&path).ok()?;
    // The kernel writes -1 for "no node"; a negative or oversized number is not a node.
    u32::try_from(text.trim().parse::<i64>().ok()?).ok()
}

/// A PCI bus id (`[domain:]bus:device.function`, hex, any case, up to 8 domain digits) in
/// sysfs' form: `dddd:bb:dd.f`, lower case, the domain at least 4 digits as the kernel prints
/// it. `None` when it is not a bus id.
fn sysfs_pci_name(pci_bus_id: &str) -> Option<String> {
    let (rest, function) = pci_bus_id.trim().rsplit_once('.')?;
    let mut fields = rest.rsplitn(3, ':');
    let device = fields.next()?;
    let bus = fields.next()?;
    let domain = fields.next().unwrap_or("0");
    let domain = hex_field(domain, 8)?;
    let bus = hex_field(bus, 2)?;
    let device = hex_field(device, 2).filter(|&device| device < 32)?;
    let function = hex_field(function, 1).filter(|&function| function < 8)?;
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}"))
}

/// A field of 1 to `max_digits` hex digits.
fn hex_field(text: &str, max_digits: usize) -> Option<u32> {
    let valid =
        (1..=max_digits).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// Why a [`Placement`] pins or does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Two nodes or more and `numa = "auto"`: workers and synthesis threads are pinned.
    Pinned,
    /// `numa = "auto"` but fewer than two nodes: pinning would change nothing.
    OneNode,
    /// `numa = "off"`, or the topology could not be read.
    Off,
}

/// The state shared between a placement (and its clones) and its synthesis slots.
#[derive(Debug)]
struct Slots {
    nodes: Vec<Node>,
    /// Running synthesis threads per node, in the order of `nodes`.
    running: Mutex<Vec<usize>>,
    pin: bool,
}

impl Slots {
    fn running(&self) -> MutexGuard<'_, Vec<usize>> {
        // The counts are plain integers updated in one statement: a panic elsewhere while the
        // lock was held cannot have left them half-written.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where device workers and synthesis threads run. Cloning shares the synthesis counts.
#[derive(Debug, Clone)]
pub struct Placement {
    slots: Arc<Slots>,
    mode: Mode,
    /// Each device's GPU node as sysfs reported it.
    gpu_nodes: Vec<Option<u32>>,
    synthesis_threads: usize,
}

/// One node's share of a [`Placement`], for status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeSummary {
    /// The node's id.
    pub node: u32,
    /// How many of its CPUs the process may use.
    pub cpus: usize,
    /// The devices whose GPU is on this node.
    pub devices: Vec<usize>,
    /// Synthesis threads running on it now.
    pub running_synthesis: usize,
}

impl Placement {
    /// The placement for this topology (already [`Topology::restricted`] to the allowed CPUs),
    /// `synthesis_threads` configured synthesis threads (used for the planned split shown by
    /// `Display`) and devices whose GPUs are on `gpu_nodes[i]`. With `numa` false, or fewer
    /// than two nodes, nothing is pinned, but [`enter_synthesis`](Self::enter_synthesis) still
    /// counts.
    pub fn new(
        topology: &Topology,
        synthesis_threads: usize,
        gpu_nodes: &[Option<u32>],
        numa: bool,
    ) -> Placement {
        let nodes = topology.nodes().to_vec();
        let mode = match (numa, nodes.len()) {
            (false, _) => Mode::Off,
            (true, 0 | 1) => Mode::OneNode,
            (true, _) => Mode::Pinned,
        };
        Placement {
            slots: Arc::new(Slots {
                running: Mutex::new(vec![0; nodes.len()]),
                nodes,
                pin: mode == Mode::Pinned,
            }),
            mode,
            gpu_nodes: gpu_nodes.to_vec(),
            synthesis_threads,
        }
    }

    /// No placement at all, for `devices` devices: for `numa = "off"` or when the topology
    /// could not be read.
    pub fn off(devices: usize) -> Placement {
        Placement::new(&Topology::default(), 0, &vec![None; devices], false)
    }

    /// Whether anything is pinned.
    pub fn pins(&self) -> bool {
        self.slots.pin
    }

    /// The CPUs device `device`'s worker thread is to be pinned to: its GPU's node's. `None`
    /// when nothing is pinned, the GPU's node is unknown, or that node has no allowed CPU.
    pub fn device_cpus(&self, device: usize) -> Option<&[usize]> {
        if !self.slots.pin {
            return None;
        }
        let id = (*self.gpu_nodes.get(device)?)?;
        let node = self.slots.nodes.iter().find(|node| node.id == id)?;
        Some(&node.cpus)
    }

    /// Takes a synthesis slot on the node with the fewest running synthesis threads for its
    /// CPUs (ties: the lowest id). The slot is released when the guard drops; call
    /// [`SynthesisSlot::pin_current_thread`] on the thread that synthesizes.
    pub fn enter_synthesis(&self) -> SynthesisSlot {
        let mut running = self.slots.running();
        let index = least_loaded(&self.slots.nodes, &running);
        if let Some(index) = index {
            running[index] += 1;
        }
        SynthesisSlot {
            slots: Arc::clone(&self.slots),
            index,
        }
    }

    /// Each node's CPUs, devices and running synthesis threads.
    pub fn summary(&self) -> Vec<NodeSummary> {
        let running = self.slots.running();
        self.slots
            .nodes
            .iter()
            .zip(running.iter())
            .map(|(node, &running)| NodeSummary {
                node: node.id,
                cpus: node.cpus.len(),
                devices: self.devices_on(node.id),
                running_synthesis: running,
            })
            .collect()
    }

    fn devices_on(&self, id: u32) -> Vec<usize> {
        self.gpu_nodes
            .iter()
            .enumerate()
            .filter(|&(_, &node)| node == Some(id))
            .map(|(device, _)| device)
            .collect()
    }
}

/// The index of the node with the fewest running threads per CPU; the first such on a tie.
fn least_loaded(nodes: &[Node], running: &[usize]) -> Option<usize> {
    // running[a] / cpus[a] < running[b] / cpus[b], cross-multiplied to stay in integers.
    let load = |i: usize| (running[i] as u128, nodes[i].cpus.len() as u128);
    (0..nodes.len()).reduce(|best, i| {
        let ((r_i, c_i), (r_best, c_best)) = (load(i), load(best));
        if r_i * c_best < r_best * c_i {
            i
        } else {
            best
        }
    })
}

/// How `threads` synthesis threads entering one after another spread over the nodes.
fn planned_split(nodes: &[Node], threads: usize) -> Vec<usize> {
    let total: usize = nodes.iter().map(|node| node.cpus.len()).sum();
    if total == 0 {
        return vec![0; nodes.len()];
    }
    // After `rounds * total` threads every node holds exactly `rounds` per CPU (no node passes
    // that ratio before all reach it), and the chooser's picks from there repeat those from
    // zero: only the remainder, fewer than `total`, needs simulating.
    let rounds = threads / total;
    let mut split: Vec<usize> = nodes.iter().map(|node| rounds * node.cpus.len()).collect();
    let mut extra = vec![0; nodes.len()];
    for _ in 0..threads % total {
        if let Some(index) = least_loaded(nodes, &extra) {
            extra[index] += 1;
        }
    }
    for (planned, extra) in split.iter_mut().zip(extra) {
        *planned += extra;
    }
    split
}

/// One-line summary for the start-up log, e.g. `2 nodes: node0 cpus 0-3 (gpu 0, 4 synthesis
/// threads), node1 cpus 4-7 (gpu 1, 4 synthesis threads)`.
impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes = &self.slots.nodes;
        match (self.mode, nodes.len()) {
            (Mode::Off, 0) => return f.write_str("off"),
            (Mode::Off, n) => write!(f, "off, {n} node{}", plural(n))?,
            (Mode::OneNode, n) => write!(f, "{n} node{}, not pinned", plural(n))?,
            (Mode::Pinned, n) => write!(f, "{n} nodes")?,
        }
        let split = planned_split(nodes, self.synthesis_threads);
        let mut parts: Vec<String> = nodes
            .iter()
            .zip(split)
            .map(|(node, planned)| self.describe_node(node, planned))
            .collect();
        // A GPU whose node is unknown or has no allowed CPU runs unpinned: say so.
        for (device, node) in self.gpu_nodes.iter().enumerate() {
            if !node.is_some_and(|id| nodes.iter().any(|node| node.id == id)) {
                parts.push(format!("device {device} unplaced"));
            }
        }
        if !parts.is_empty() {
            write!(f, ": {}", parts.join(", "))?;
        }
        Ok(())
    }
}

impl Placement {
    /// `node0 cpus 0-3 (gpu 0, 4 synthesis threads)`; the split only when pinned.
    fn describe_node(&self, node: &Node, planned: usize) -> String {
        let mut notes: Vec<String> = self
            .devices_on(node.id)
            .iter()
            .map(|device| format!("device {device}"))
            .collect();
        if self.mode == Mode::Pinned {
            notes.push(format!("{planned} synthesis thread{}", plural(planned)));
        }
        let cpus = format_cpulist(&node.cpus);
        if notes.is_empty() {
            format!("node{} cpus {cpus}", node.id)
        } else {
            format!("node{} cpus {cpus} ({})", node.id, notes.join(", "))
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A running synthesis thread's place on a node; the node's count drops when it drops.
#[derive(Debug)]
pub struct SynthesisSlot {
    slots: Arc<Slots>,
    /// Index into `slots.nodes`; `None` when the placement has no node.
    index: Option<usize>,
}

impl SynthesisSlot {
    /// The node this slot counts against (also when nothing is pinned).
    pub fn node(&self) -> Option<u32> {
        Some(self.slots.nodes[self.index?].id)
    }

    /// The CPUs the synthesis thread is to run on; empty when nothing is pinned.
    pub fn cpus(&self) -> &[usize] {
        match self.index {
            Some(index) if self.slots.pin => &self.slots.nodes[index].cpus,
            _ => &[],
        }
    }

    /// Pins the calling thread to [`cpus`](Self::cpus); returns whether it did. A refusal (a
    /// seccomp filter, a cpuset changed since start-up) is logged at debug level and the
    /// thread runs where it was: placement is an optimisation, never a reason to fail.
    pub fn pin_current_thread(&self) -> bool {
        let cpus = self.cpus();
        if cpus.is_empty() {
            return false;
        }
        match pin_current_thread(cpus) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(cpus = %format_cpulist(cpus), %error, "synthesis thread not pinned");
                false
            }
        }
    }
}

impl Drop for SynthesisSlot {
    fn drop(&mut self) {
        if let Some(index) = self.index {
            let mut running = self.slots.running();
            running[index] = running[index].saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn write(root: &Path, relative: &str, content: &str) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().expect("a relative path with a parent"))
            .expect("create the fake sysfs directory");
        fs::write(&path, content).expect("write the fake sysfs file");
    }

    /// node0 cpus 0-3, node1 cpus 4-7, memory-only node2, and the node directory's other files.
    fn two_node_sysfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path();
        write(root, "devices/system/node/node0/cpulist", "0-3\n");
        write(root, "devices/system/node/node1/cpulist", "4-7\n");
        write(root, "devices/system/node/node2/cpulist", "\n");
        write(root, "devices/system/node/possible", "0-2\n");
        write(root, "devices/system/node/online", "0-2\n");
        write(root, "devices/system/node/has_cpu", "0-1\n");
        write(root, "devices/system/cpu/online", "0-7\n");
        dir
    }

    fn two_nodes() -> Topology {
        Topology::new(vec![
            Node {
                id: 0,
                cpus: vec![0, 1, 2, 3],
            },
            Node {
                id: 1,
                cpus: vec![4, 5, 6, 7],
            },
        ])
    }

    #[test]
    fn cpulist_ranges_singles_and_empty() {
        assert_eq!(
            parse_cpulist("0-3,8-11").unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist(" 0-1,3\n").unwrap(), vec![0, 1, 3]);
        // Unsorted and overlapping input comes out sorted, once each.
        assert_eq!(parse_cpulist("6,2-4,3-5,2").unwrap(), vec![2, 3, 4, 5, 6]);
        assert_eq!(parse_cpulist("65535").unwrap(), vec![65535]);
    }

    #[test]
    fn cpulist_malformed_is_an_error() {
        for bad in [
            "a", "1-", "-1", "1,,2", ",", "1-2-3", "3-1", "+1", "0 - 3", "1;2", "0-7:2", "0x1",
        ] {
            assert!(
                matches!(parse_cpulist(bad), Err(TopologyError::Cpulist { .. })),
                "{bad:?} should be refused as malformed"
            );
        }
    }

    #[test]
    fn cpulist_huge_is_an_error() {
        for huge in ["65536", "0-4294967296", "99999999999999999999999999"] {
            assert!(
                matches!(
                    parse_cpulist(huge),
                    Err(TopologyError::CpuOutOfRange { .. })
                ),
                "{huge:?} should be refused as out of range"
            );
        }
        // The whole allowed range many times over stays one copy of it.
        let repeated = vec!["0-65535"; 100].join(",");
        assert_eq!(parse_cpulist(&repeated).unwrap().len(), MAX_CPUS);
    }

    #[test]
    fn cpulist_formats_back_to_ranges() {
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 9, 10, 11]), "0-3,8-11");
        assert_eq!(format_cpulist(&[5]), "5");
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[3, 1, 2, 7, 9, 9]), "1-3,7,9");
        let cpus = parse_cpulist("0,2-4,6-7,10").unwrap();
        assert_eq!(format_cpulist(&cpus), "0,2-4,6-7,10");
    }

    #[test]
    fn reads_a_two_node_tree() {
        let sysfs = two_node_sysfs();
        let topology = Topology::read(sysfs.path()).unwrap();
        assert_eq!(topology, two_nodes());
    }

    #[test]
    fn falls_back_to_online_cpus_without_numa() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "devices/system/cpu/online", "0-5\n");
        let topology = Topology::read(dir.path()).unwrap();
        assert_eq!(
            topology.nodes(),
            &[Node {
                id: 0,
                cpus: vec![0, 1, 2, 3, 4, 5]
            }]
        );
    }

    #[test]
    fn unreadable_trees_are_errors() {
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            Topology::read(empty.path()),
            Err(TopologyError::Io { .. })
        ));
        let memory_only = tempfile::tempdir().unwrap();
        write(
            memory_only.path(),
            "devices/system/node/node0/cpulist",
            "\n",
        );
        assert!(matches!(
            Topology::read(memory_only.path()),
            Err(TopologyError::NoCpus { .. })
        ));
        let garbage = tempfile::tempdir().unwrap();
        write(
            garbage.path(),
            "devices/system/node/node0/cpulist",
            "zero\n",
        );
        assert!(matches!(
            Topology::read(garbage.path()),
            Err(TopologyError::BadFile { .. })
        ));
        let large = tempfile::tempdir().unwrap();
        let huge = "0,".repeat(MAX_FILE_BYTES as usize);
        write(large.path(), "devices/system/node/node0/cpulist", &huge);
        assert!(matches!(
            Topology::read(large.path()),
            Err(TopologyError::FileTooLarge { .. })
        ));
    }

    #[test]
    fn node_names_in_kernel_form_only() {
        assert_eq!(node_id("node0"), Some(0));
        assert_eq!(node_id("node17"), Some(17));
        for other in [
            "node", "node01", "node+1", "nodes", "online", "possible", "node-1",
        ] {
            assert_eq!(node_id(other), None, "{other:?}");
        }
    }

    #[test]
    fn restricted_intersects_and_drops_empty_nodes() {
        let topology = two_nodes();
        let narrowed = topology.restricted(&[6, 1, 2, 99]);
        assert_eq!(
            narrowed.nodes(),
            &[
                Node {
                    id: 0,
                    cpus: vec![1, 2]
                },
                Node {
                    id: 1,
                    cpus: vec![6]
                }
            ]
        );
        let one = topology.restricted(&[5, 4]);
        assert_eq!(
            one.nodes(),
            &[Node {
                id: 1,
                cpus: vec![4, 5]
            }]
        );
        assert!(topology.restricted(&[]).nodes().is_empty());
    }

    #[test]
    fn gpu_node_from_a_cuda_bus_id() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "bus/pci/devices/0000:1b:00.0/numa_node", "1\n");
        write(dir.path(), "bus/pci/devices/0000:3d:00.0/numa_node", "-1\n");
        write(
            dir.path(),
            "bus/pci/devices/0000:5e:00.0/numa_node",
            "one\n",
        );
        assert_eq!(gpu_numa_node(dir.path(), "00000000:1B:00.0"), Some(1));
        assert_eq!(gpu_numa_node(dir.path(), "0000:1b:00.0"), Some(1));
        assert_eq!(gpu_numa_node(dir.path(), "00000000:3D:00.0"), None);
        assert_eq!(gpu_numa_node(dir.path(), "00000000:5E:00.0"), None);
        assert_eq!(gpu_numa_node(dir.path(), "00000000:AF:00.0"), None);
    }

    #[test]
    fn hostile_bus_ids_build_no_path() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "x/numa_node", "0\n");
        write(dir.path(), "bus/pci/x/numa_node", "0\n");
        for hostile in [
            "../x",
            "../../x",
            "0000:1b:00.0/..",
            "/x",
            "",
            "0000:1b:00.0/../../x",
        ] {
            assert_eq!(gpu_numa_node(dir.path(), hostile), None, "{hostile:?}");
        }
    }

    #[test]
    fn bus_ids_in_sysfs_form() {
        assert_eq!(
            sysfs_pci_name("00000000:1B:00.0").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(
            sysfs_pci_name("0000:1b:00.0\n").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(sysfs_pci_name("1B:00.0").as_deref(), Some("0000:1b:00.0"));
        assert_eq!(
            sysfs_pci_name("00010000:01:1f.7").as_deref(),
            Some("10000:01:1f.7")
        );
        for bad in [
            "0000:1b:20.0",
            "0000:1b:00.8",
            "000000000:1b:00.0",
            "0000:1b:00",
            "1b",
            "g0:00.0",
        ] {
            assert_eq!(sysfs_pci_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn synthesis_threads_spread_evenly_and_free_their_slots() {
        let placement = Placement::new(&two_nodes(), 8, &[Some(0), Some(1)], true);
        let slots: Vec<SynthesisSlot> = (0..8).map(|_| placement.enter_synthesis()).collect();
        let on = |id| slots.iter().filter(|slot| slot.node() == Some(id)).count();
        assert_eq!((on(0), on(1)), (4, 4));
        let running = |p: &Placement| -> Vec<usize> {
            p.summary()
                .iter()
                .map(|node| node.running_synthesis)
                .collect()
        };
        assert_eq!(running(&placement), vec![4, 4]);

        // Freeing two on node1 sends the next two there.
        let mut slots = slots;
        slots.retain(|slot| slot.node() == Some(0));
        slots.extend((0..2).map(|_| placement.enter_synthesis()));
        assert_eq!(running(&placement), vec![4, 2]);
        assert!(slots[4..].iter().all(|slot| slot.node() == Some(1)));
        assert_eq!(slots[4].cpus(), &[4, 5, 6, 7]);
        drop(slots);
        assert_eq!(running(&placement), vec![0, 0]);
    }

    #[test]
    fn synthesis_spreads_by_cpu_count_ties_to_the_lowest_id() {
        let topology = Topology::new(vec![
            Node {
                id: 3,
                cpus: vec![8, 9],
            },
            Node {
                id: 1,
                cpus: vec![0, 1, 2, 3, 4, 5],
            },
        ]);
        let placement = Placement::new(&topology, 4, &[], true);
        // Both empty: the lowest id first.
        let first = placement.enter_synthesis();
        assert_eq!(first.node(), Some(1));
        let rest: Vec<_> = (0..3).map(|_| placement.enter_synthesis()).collect();
        let on3 = rest.iter().filter(|slot| slot.node() == Some(3)).count();
        assert_eq!(on3, 1, "6 CPUs to 2: three threads on node1, one on node3");
        assert_eq!(planned_split(topology.nodes(), 4), vec![3, 1]);
        assert_eq!(planned_split(topology.nodes(), 17), vec![13, 4]);
        // The shortcut for whole rounds agrees with entering one by one.
        let all: Vec<_> = (0..13).map(|_| placement.enter_synthesis()).collect();
        let counts: Vec<usize> = placement
            .summary()
            .iter()
            .map(|n| n.running_synthesis)
            .collect();
        assert_eq!(counts, vec![13, 4]);
        drop((first, rest, all));
    }

    #[test]
    fn devices_get_their_nodes_cpus() {
        let placement = Placement::new(&two_nodes(), 8, &[Some(1), Some(0), None, Some(7)], true);
        assert!(placement.pins());
        assert_eq!(placement.device_cpus(0), Some(&[4, 5, 6, 7][..]));
        assert_eq!(placement.device_cpus(1), Some(&[0, 1, 2, 3][..]));
        assert_eq!(placement.device_cpus(2), None);
        assert_eq!(
            placement.device_cpus(3),
            None,
            "a node without allowed CPUs"
        );
        assert_eq!(placement.device_cpus(4), None, "no such device");
        assert_eq!(
            placement.summary(),
            vec![
                NodeSummary {
                    node: 0,
                    cpus: 4,
                    devices: vec![1],
                    running_synthesis: 0
                },
                NodeSummary {
                    node: 1,
                    cpus: 4,
                    devices: vec![0],
                    running_synthesis: 0
                },
            ]
        );
    }

    #[test]
    fn off_or_one_node_pins_nothing() {
        let off = Placement::new(&two_nodes(), 8, &[Some(0), Some(1)], false);
        let one = Placement::new(&two_nodes().restricted(&[0, 1]), 8, &[Some(0)], true);
        let none = Placement::off(2);
        for placement in [&off, &one, &none] {
            assert!(!placement.pins());
            assert_eq!(placement.device_cpus(0), None);
            let slot = placement.enter_synthesis();
            assert!(slot.cpus().is_empty());
            assert!(!slot.pin_current_thread());
        }
        // The chooser still counts when nothing is pinned.
        let slots: Vec<_> = (0..4).map(|_| off.enter_synthesis()).collect();
        let counts: Vec<usize> = off.summary().iter().map(|n| n.running_synthesis).collect();
        assert_eq!(counts, vec![2, 2]);
        assert_eq!(slots[0].node(), Some(0));
        assert_eq!(none.enter_synthesis().node(), None);
    }

    #[test]
    fn display_summarises_the_placement() {
        let pinned = Placement::new(&two_nodes(), 8, &[Some(0), Some(1)], true);
        assert_eq!(
            pinned.to_string(),
            "2 nodes: node0 cpus 0-3 (device 0, 4 synthesis threads), \
             node1 cpus 4-7 (device 1, 4 synthesis threads)"
        );
        let uneven = Placement::new(&two_nodes(), 1, &[Some(1), Some(1), None], true);
        assert_eq!(
            uneven.to_string(),
            "2 nodes: node0 cpus 0-3 (1 synthesis thread), \
             node1 cpus 4-7 (device 0, device 1, 0 synthesis threads), device 2 unplaced"
        );
        let off = Placement::new(&two_nodes(), 8, &[Some(0)], false);
        assert_eq!(
            off.to_string(),
            "off, 2 nodes: node0 cpus 0-3 (device 0), node1 cpus 4-7"
        );
        let one = Placement::new(&two_nodes().restricted(&[0, 1]), 8, &[Some(0)], true);
        assert_eq!(
            one.to_string(),
            "1 node, not pinned: node0 cpus 0-1 (device 0)"
        );
        assert_eq!(Placement::off(1).to_string(), "off");
        let nowhere = Placement::new(&Topology::default(), 4, &[None], true);
        assert_eq!(
            nowhere.to_string(),
            "0 nodes, not pinned: device 0 unplaced"
        );
    }

    #[test]
    fn pins_a_thread_for_real() {
        let allowed = allowed_cpus().expect("sched_getaffinity");
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        let seen = thread::spawn(move || {
            pin_current_thread(&[cpu]).expect("sched_setaffinity");
            allowed_cpus().expect("sched_getaffinity")
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        assert!(pin_current_thread(&[]).is_ok());
        assert!(pin_current_thread(&[CpuSet::count()]).is_err());
    }

    #[test]
    fn a_synthesis_slot_pins_its_thread_for_real() {
        let allowed = allowed_cpus().expect("sched_getaffinity");
        let (&first, rest) = allowed.split_first().expect("at least one allowed CPU");
        let Some(&second) = rest.first() else {
            return; // one CPU: no two nodes to make
        };
        let topology = Topology::new(vec![
            Node {
                id: 0,
                cpus: vec![first],
            },
            Node {
                id: 1,
                cpus: vec![second],
            },
        ]);
        let placement = Placement::new(&topology, 2, &[], true);
        let _node0 = placement.enter_synthesis();
        let slot = placement.enter_synthesis();
        let seen = thread::spawn(move || {
            assert!(slot.pin_current_thread());
            allowed_cpus().expect("sched_getaffinity")
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![second]);
    }

    #[test]
    fn reads_this_hosts_topology() {
        let topology = Topology::read(Path::new("/sys")).expect("read /sys");
        assert!(!topology.nodes().is_empty());
        let allowed = allowed_cpus().expect("sched_getaffinity");
        let usable = topology.restricted(&allowed);
        assert!(
            usable
                .nodes()
                .iter()
                .any(|node| node.cpus.iter().any(|cpu| allowed.contains(cpu))),
            "{topology:?} shares no CPU with {allowed:?}"
        );
    }
}
