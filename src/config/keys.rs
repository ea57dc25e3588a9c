//! The table of configuration keys: the single place where each key's type, default and
//! meaning are written down. Man pages and the packaged example configuration should be
//! generated from [`KEYS`] (see `cuzkd --check-config` and [`KeyDoc`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::units::{format_duration, format_size, parse_duration, parse_size};
use super::{
    BackendChoice, Config, ConfigError, DaemonConfig, DebugConfig, FaultConfig, FaultKind,
    FaultStage, GpuConfig, GpuSelection, GrpcConfig, MetricsConfig, ParamsConfig, ProtocolConfig,
    ProvingConfig, QueueConfig, SocketConfig, MAX_QUARANTINE,
};

/// One configuration key.
pub struct KeyDoc {
    /// Dotted name: `section.key`.
    pub name: &'static str,
    /// The value's type as an operator reads it (`size`, `duration`, `integer`, ...).
    pub kind: &'static str,
    /// The built-in default, as a TOML literal.
    pub default: &'static str,
    /// What the key does.
    pub description: &'static str,
    pub(super) apply: fn(&mut Config, &Value) -> Result<(), String>,
    pub(super) show: fn(&Config) -> Value,
}

impl KeyDoc {
    /// The section (`socket` for `socket.path`).
    pub fn section(&self) -> &'static str {
        self.name.split_once('.').map_or(self.name, |(s, _)| s)
    }
    /// The key inside its section (`path` for `socket.path`).
    pub fn short_name(&self) -> &'static str {
        self.name.split_once('.').map_or(self.name, |(_, k)| k)
    }
}

/// Every configuration key, grouped by section, in the order `--check-config` prints them.
pub static KEYS: &[KeyDoc] = &[
    KeyDoc {
        name: "socket.path",
        kind: "path",
        default: "\"/run/cuzk/cuzk.sock\"",
        description:
            "Unix socket to listen on. Ignored when systemd passes a socket (LISTEN_FDS). \
                      An existing file there is replaced only if it is a stale socket. The path \
                      appears once the socket listens with its mode and group.",
        apply: |c, v| {
            c.socket.path = PathBuf::from(string(v)?);
            Ok(())
        },
        show: |c| Value::String(c.socket.path.display().to_string()),
    },
    KeyDoc {
        name: "socket.mode",
        kind: "octal string",
        default: "\"0660\"",
        description: "Permission bits of the socket file.",
        apply: |c, v| {
            c.socket.mode = mode(v)?;
            Ok(())
        },
        show: |c| Value::String(format!("{:04o}", c.socket.mode)),
    },
    KeyDoc {
        name: "socket.group",
        kind: "string",
        default: "\"\"",
        description: "Group (name or numeric gid) given to the socket file; \"\" leaves the \
                      daemon's own group.",
        apply: |c, v| {
            let g = string(v)?;
            c.socket.group = (!g.is_empty()).then_some(g);
            Ok(())
        },
        show: |c| Value::String(c.socket.group.clone().unwrap_or_default()),
    },
    KeyDoc {
        name: "socket.allowed_uids",
        kind: "array of integers",
        default: "[]",
        description: "Peer uids (read with SO_PEERCRED) allowed to connect. When this and \
                      allowed_gids are both empty, anyone the file permissions let in may \
                      connect; otherwise only the listed uids and gids, root included.",
        apply: |c, v| {
            c.socket.allowed_uids = id_list(v)?;
            Ok(())
        },
        show: |c| ids(&c.socket.allowed_uids),
    },
    KeyDoc {
        name: "socket.allowed_gids",
        kind: "array of integers",
        default: "[]",
        description: "Peer primary gids allowed to connect (see allowed_uids).",
        apply: |c, v| {
            c.socket.allowed_gids = id_list(v)?;
            Ok(())
        },
        show: |c| ids(&c.socket.allowed_gids),
    },
    KeyDoc {
        name: "socket.admin_uids",
        kind: "array of integers",
        default: "[]",
        description: "Peer uids (SO_PEERCRED) that are admins besides root and the daemon's \
                      own uid, which always are. An admin sees and may act on every job \
                      (Status, Jobs, Await, Cancel, Lookup) and may load and drop parameter \
                      sets (Preload, Evict); every other client sees and acts on only the \
                      jobs it submitted itself, and is refused Preload and Evict. Being \
                      listed here does not let a uid connect: allowed_uids, allowed_gids and \
                      the socket's permissions decide that.",
        apply: |c, v| {
            c.socket.admin_uids = id_list(v)?;
            Ok(())
        },
        show: |c| ids(&c.socket.admin_uids),
    },
    KeyDoc {
        name: "socket.max_connections",
        kind: "integer",
        default: "64",
        description: "Connections served at once, the protocol's socket and the gRPC \
                      endpoint's together; one more is answered \"busy\" (a GOAWAY on the \
                      gRPC socket) and closed when it is accepted.",
        apply: |c, v| {
            c.socket.max_connections = integer(v, 1, 65_536)?;
            Ok(())
        },
        show: |c| Value::Integer(c.socket.max_connections as i64),
    },
    KeyDoc {
        name: "socket.max_connections_per_uid",
        kind: "integer",
        default: "0",
        description: "Connections one peer uid (SO_PEERCRED) may hold at once, root \
                      included; one more is answered \"busy\" and closed, so that one user \
                      cannot take every slot. 0: max_connections less an eighth (56 of \
                      64), so that a miner running every client as one user keeps most slots \
                      and the others still get in. At most max_connections, which turns the \
                      limit off.",
        apply: |c, v| {
            c.socket.max_connections_per_uid = integer(v, 0, 65_536)?;
            Ok(())
        },
        show: |c| Value::Integer(c.socket.max_connections_per_uid as i64),
    },
    KeyDoc {
        name: "protocol.max_frame_size",
        kind: "size",
        default: "\"64MiB\"",
        description:
            "Largest frame payload accepted or sent (checked before allocating). A 32 GiB \
                      PoRep C1 output is about 50 MiB of JSON.",
        apply: |c, v| {
            let n = size(v)?;
            if !(1024..=1 << 31).contains(&n) {
                return Err("must be between 1KiB and 2GiB".into());
            }
            c.protocol.max_frame_size = n as u32;
            Ok(())
        },
        show: |c| Value::String(format_size(c.protocol.max_frame_size.into())),
    },
    KeyDoc {
        name: "protocol.hello_timeout",
        kind: "duration",
        default: "\"10s\"",
        description: "How long a new connection may take to send Hello (on the gRPC \
                      socket: to make its first call) before it is closed.",
        apply: |c, v| {
            c.protocol.hello_timeout = nonzero_duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.protocol.hello_timeout)),
    },
    KeyDoc {
        name: "protocol.idle_timeout",
        kind: "duration",
        default: "\"10m\"",
        description: "How long a connection past Hello may go without sending a request, \
                      while none is being answered, before it is closed (without a message); \
                      on the gRPC socket, how long after its last call ended. An Await or \
                      Prove waiting for its job is not idle. \"0s\": never.",
        apply: |c, v| {
            let d = duration(v)?;
            c.protocol.idle_timeout = (!d.is_zero()).then_some(d);
            Ok(())
        },
        show: |c| Value::String(format_duration(c.protocol.idle_timeout.unwrap_or_default())),
    },
    KeyDoc {
        name: "protocol.max_input_size",
        kind: "size",
        default: "\"256MiB\"",
        description: "Largest input a client may pass as a file descriptor (SubmitFd and \
                      ProveFd: a memfd or the C1 file itself, read by cuzkd rather than sent \
                      in a frame); a larger one is refused before a byte of it is read.",
        apply: |c, v| {
            c.protocol.max_input_size = size(v)?.max(1);
            Ok(())
        },
        show: |c| Value::String(format_size(c.protocol.max_input_size)),
    },
    KeyDoc {
        name: "protocol.input_memory",
        kind: "size",
        default: "\"1GiB\"",
        description: "Bytes of passed inputs (file descriptors) being read at once, all \
                      clients together: a read that does not fit waits until earlier ones \
                      have been handed to the queue. gRPC messages being received count \
                      here too, past the first 16KiB of each: one that does not fit now is \
                      refused RESOURCE_EXHAUSTED. At least protocol.max_input_size is \
                      used, so that one input of the largest size always fits.",
        apply: |c, v| {
            c.protocol.input_memory = size(v)?;
            Ok(())
        },
        show: |c| Value::String(format_size(c.protocol.input_memory)),
    },
    KeyDoc {
        name: "protocol.input_timeout",
        kind: "duration",
        default: "\"60s\"",
        description: "How long reading a passed input (SubmitFd, ProveFd) may take; also \
                      given up when the client hangs up. A file whose reads block (a stalled \
                      network or FUSE mount) is then refused \"invalid input\", and the memory \
                      read so far and its share of protocol.input_memory are given back at \
                      once; a reader thread still blocked in the kernel ends when its read \
                      returns.",
        apply: |c, v| {
            c.protocol.input_timeout = nonzero_duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.protocol.input_timeout)),
    },
    KeyDoc {
        name: "grpc.enabled",
        kind: "boolean",
        default: "false",
        description: "Serve cuzk.v1.ProvingEngine, the gRPC protocol of Curio's proving client \
                      (Curio's [Cuzk] section), on a second Unix socket: the same engine, \
                      queue, journal, allow lists and admins as the first. Curio's Address \
                      is then unix://<grpc.path>. Under systemd, enable cuzkd-grpc.socket \
                      too.",
        apply: |c, v| {
            c.grpc.enabled = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.grpc.enabled),
    },
    KeyDoc {
        name: "grpc.path",
        kind: "path",
        default: "\"/run/cuzk/cuzk-grpc.sock\"",
        description: "The gRPC endpoint's Unix socket. Ignored when systemd passes it \
                      (cuzkd-grpc.socket, FileDescriptorName=grpc).",
        apply: |c, v| {
            c.grpc.path = PathBuf::from(string(v)?);
            Ok(())
        },
        show: |c| Value::String(c.grpc.path.display().to_string()),
    },
    KeyDoc {
        name: "grpc.mode",
        kind: "octal string",
        default: "\"0660\"",
        description: "Permission bits of the gRPC socket file; its group is socket.group.",
        apply: |c, v| {
            c.grpc.mode = mode(v)?;
            Ok(())
        },
        show: |c| Value::String(format!("{:04o}", c.grpc.mode)),
    },
    KeyDoc {
        name: "grpc.max_message_size",
        kind: "size",
        default: "\"256MiB\"",
        description: "Largest gRPC message accepted or sent (Curio's client allows 256 MiB \
                      each way). A message is held whole in memory while it is decoded; its bytes \
                      count as they arrive, never what its length prefix claims.",
        apply: |c, v| {
            let n = size(v)?;
            if !(1024..=1 << 31).contains(&n) {
                return Err("must be between 1KiB and 2GiB".into());
            }
            c.grpc.max_message_size = n;
            Ok(())
        },
        show: |c| Value::String(format_size(c.grpc.max_message_size)),
    },
    KeyDoc {
        name: "params.dir",
        kind: "path",
        default: "\"/var/tmp/filecoin-proof-parameters\"",
        description: "Parameter cache: the directory of the .params/.vk files. Where this key \
                      is not set, cuzkd takes FIL_PROOFS_PARAMETER_CACHE from its environment \
                      when set, as every Filecoin tool does. Set here, the key wins; if the \
                      variable names another directory, cuzkd logs a warning naming both.",
        apply: |c, v| {
            c.params.dir = PathBuf::from(string(v)?);
            Ok(())
        },
        show: |c| Value::String(c.params.dir.display().to_string()),
    },
    KeyDoc {
        name: "queue.max_queued",
        kind: "integer",
        default: "64",
        description: "Jobs waiting at once, all priorities; a Submit beyond it is answered \
                      \"queue full\".",
        apply: |c, v| {
            c.queue.max_queued = integer(v, 1, 1_000_000)?;
            Ok(())
        },
        show: |c| Value::Integer(c.queue.max_queued as i64),
    },
    KeyDoc {
        name: "queue.critical_reserve",
        kind: "integer",
        default: "4",
        description: "Of max_queued, slots only critical jobs (WinningPoSt) may take, so that a \
                      full PoRep queue never blocks a WinningPoSt.",
        apply: |c, v| {
            c.queue.critical_reserve = integer(v, 0, 1_000_000)?;
            Ok(())
        },
        show: |c| Value::Integer(c.queue.critical_reserve as i64),
    },
    KeyDoc {
        name: "queue.result_retention",
        kind: "duration",
        default: "\"10m\"",
        description: "How long a finished job (proof or error) stays available to Await and \
                      Status before it is dropped.",
        apply: |c, v| {
            c.queue.result_retention = duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.queue.result_retention)),
    },
    KeyDoc {
        name: "queue.max_finished",
        kind: "integer",
        default: "1024",
        description: "Finished jobs kept at most; beyond it the oldest are dropped early.",
        apply: |c, v| {
            c.queue.max_finished = integer(v, 1, 1_000_000)?;
            Ok(())
        },
        show: |c| Value::Integer(c.queue.max_finished as i64),
    },
    KeyDoc {
        name: "queue.journal_dir",
        kind: "path",
        default: "\"\"",
        description: "Directory of the job journal, where cuzkd records every accepted job \
                      (its input, owner, request id, priority, state and result) so that \
                      after a crash or kill -9 a restarted daemon queues the unfinished jobs \
                      again under the same job ids and still answers with the finished ones' \
                      results for the rest of result_retention; job ids are never reused. \
                      An absolute path. \"\" (the default) means $STATE_DIRECTORY/journal \
                      under systemd's StateDirectory= (/var/lib/cuzk/journal for the packaged \
                      unit), else no journal; --check-config prints the directory that \
                      applies. A directory named here that cannot be used (made, locked, \
                      read) stops the start with status 78; the default one only costs a \
                      warning, and the daemon runs without a journal.",
        apply: |c, v| {
            let dir = string(v)?;
            if dir.is_empty() {
                // The default: whatever the environment gave (see EnvDefaults).
                return Ok(());
            }
            if !dir.starts_with('/') {
                return Err(format!("{dir:?} is not an absolute path"));
            }
            if dir.contains('\0') {
                return Err("must not contain a NUL byte".into());
            }
            c.queue.journal_dir = Some(PathBuf::from(dir));
            Ok(())
        },
        show: |c| {
            Value::String(
                c.queue
                    .journal_dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            )
        },
    },
    KeyDoc {
        name: "queue.journal_max_size",
        kind: "size",
        default: "\"4GiB\"",
        description: "Most disk the journal takes: its log and the stored inputs of the \
                      unfinished jobs together (a 32 GiB sector's C1 output is about 50 MiB; \
                      a result a few KiB). A job whose input would pass it is still proved \
                      but its input is not stored (a warning says so): if the daemon \
                      restarts before it finishes, it is reported failed (ShuttingDown), \
                      not queued again. Inputs are deleted as their jobs finish, and the log \
                      is rewritten without expired results. \"0\" turns the journal off; \
                      otherwise at least 1MiB.",
        apply: |c, v| {
            let n = size(v)?;
            if n != 0 && n < 1 << 20 {
                return Err("must be 0 (no journal) or at least 1MiB".into());
            }
            c.queue.journal_max_size = n;
            Ok(())
        },
        show: |c| Value::String(format_size(c.queue.journal_max_size)),
    },
    KeyDoc {
        name: "proving.workers",
        kind: "integer",
        default: "0",
        description: "Jobs in flight at once: each takes a job from the queue, parses its \
                      input, hands its partitions to the synthesis and device stages and \
                      verifies the proof. One more takes only critical jobs (WinningPoSt). \
                      0 = proving.synthesis_threads + 2, enough that jobs of one partition \
                      keep every synthesis thread busy. Memory is bounded by \
                      proving.memory_budget, not by this.",
        apply: |c, v| {
            c.proving.workers = integer(v, 0, 1024)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.workers as i64),
    },
    KeyDoc {
        name: "proving.synthesis_threads",
        kind: "integer",
        default: "0",
        description: "Partitions synthesized at once, from all jobs, highest priority first \
                      (critical partitions have one more thread of their own); 0 = one per \
                      CPU.",
        apply: |c, v| {
            c.proving.synthesis_threads = integer(v, 0, 4096)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.synthesis_threads as i64),
    },
    KeyDoc {
        name: "proving.memory_budget",
        kind: "size",
        default: "\"0\"",
        description: "Host memory for resident parameters and partitions in flight together. \
                      A partition reserves its bytes (measured per circuit shape) before its \
                      synthesis starts and frees them when the device has consumed it; \
                      synthesis waits rather than exceeds the budget, and a job whose \
                      partition can never fit fails with an error naming both sizes. \
                      \"0\" = the host's memory (or the service's cgroup limit, where lower) \
                      less an eighth, at least 2GiB; the start-up log shows the figure.",
        apply: |c, v| {
            c.proving.memory_budget = size(v)?;
            Ok(())
        },
        show: |c| Value::String(format_size(c.proving.memory_budget)),
    },
    KeyDoc {
        name: "proving.device_workers",
        kind: "integer",
        default: "1",
        description: "Partitions the proving device works on at once (critical partitions \
                      have one more worker of their own, so a WinningPoSt never waits in the \
                      device queue).",
        apply: |c, v| {
            c.proving.device_workers = integer(v, 1, 16)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.device_workers as i64),
    },
    KeyDoc {
        name: "proving.backend",
        kind: "\"auto\" | \"cpu\" | \"gpu\"",
        default: "\"auto\"",
        description: "Proving backend: the GPU when usable (auto), always the CPU, or the GPU or \
                      fail to start.",
        apply: |c, v| {
            c.proving.backend = match string(v)?.as_str() {
                "auto" => BackendChoice::Auto,
                "cpu" => BackendChoice::Cpu,
                "gpu" => BackendChoice::Gpu,
                other => {
                    return Err(format!(
                        "expected \"auto\", \"cpu\" or \"gpu\", not {other:?}"
                    ))
                }
            };
            Ok(())
        },
        show: |c| {
            Value::String(
                match c.proving.backend {
                    BackendChoice::Auto => "auto",
                    BackendChoice::Cpu => "cpu",
                    BackendChoice::Gpu => "gpu",
                }
                .into(),
            )
        },
    },
    KeyDoc {
        name: "proving.gpus",
        kind: "\"all\" | array of integers",
        default: "\"all\"",
        description: "The CUDA devices to prove on (ordinals as nvidia-smi numbers them unless \
                      CUDA_VISIBLE_DEVICES reorders them), each with its own workers and its \
                      own copy of the resident parameters; partitions of all jobs are spread \
                      over them. \"all\": every device the driver shows.",
        apply: |c, v| {
            c.proving.gpus = gpu_selection(v)?;
            Ok(())
        },
        show: |c| match &c.proving.gpus {
            GpuSelection::All => Value::String("all".into()),
            GpuSelection::List(l) => {
                Value::Array(l.iter().map(|&n| Value::Integer(n as i64)).collect())
            }
        },
    },
    KeyDoc {
        name: "proving.cpu_device",
        kind: "integer",
        default: "0",
        description: "CPU proving devices beside the GPUs (a CPU device takes no critical \
                      partition while there is a GPU). Where no GPU is used, the CPU is the \
                      device: this many of them (at least one), which share the cores.",
        apply: |c, v| {
            c.proving.cpu_device = integer(v, 0, 16)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.cpu_device as i64),
    },
    KeyDoc {
        name: "proving.numa",
        kind: "\"auto\" | \"off\"",
        default: "\"auto\"",
        description: "NUMA placement: on a host of several nodes (read from /sys), synthesis \
                      threads are spread over the nodes and pinned to one each, and each GPU's \
                      workers run on its node. \"off\": the kernel places every thread.",
        apply: |c, v| {
            c.proving.numa = match string(v)?.as_str() {
                "auto" => true,
                "off" => false,
                other => return Err(format!("expected \"auto\" or \"off\", not {other:?}")),
            };
            Ok(())
        },
        show: |c| Value::String(if c.proving.numa { "auto" } else { "off" }.into()),
    },
    KeyDoc {
        name: "proving.yield_to_critical",
        kind: "boolean",
        default: "true",
        description: "While a critical partition (WinningPoSt) is between its admission and \
                      the end of its device stage, the other partitions' synthesis pauses \
                      (checked every few thousand constraints), so that it has the cores, \
                      their caches and the memory bandwidth to itself. false: they go on at \
                      nice +10.",
        apply: |c, v| {
            c.proving.yield_to_critical = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.proving.yield_to_critical),
    },
    KeyDoc {
        name: "proving.recorded_shapes",
        kind: "boolean",
        default: "true",
        description: "The first non-critical partition of a parameter set records its \
                      circuit's constraints once (kept with the resident parameters, counted \
                      against memory_budget); every later one synthesizes its witness alone, \
                      without building the constraints, waits for the device holding only its \
                      assignment, and has A, B and C evaluated from the recorded constraints \
                      when a device worker takes it. false: every partition records its \
                      evaluations during synthesis.",
        apply: |c, v| {
            c.proving.recorded_shapes = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.proving.recorded_shapes),
    },
    KeyDoc {
        name: "proving.partition_threads",
        kind: "integer",
        default: "0",
        description: "Threads that one partition's independent parts (a PoRep partition's \
                      challenges) are synthesized on at once, from a pool of that many shared \
                      by all partitions, so that a sector of few large partitions uses every \
                      core; the result is the same as synthesizing it on one thread. 1 = \
                      every partition on its own thread. Critical partitions (a \
                      WinningPoSt's runs of sector slots) have as many threads of their own, \
                      at the daemon's priority. 0 = one per CPU.",
        apply: |c, v| {
            c.proving.partition_threads = integer(v, 0, 4096)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.partition_threads as i64),
    },
    KeyDoc {
        name: "proving.pinned_memory",
        kind: "size",
        default: "\"0\"",
        description: "Page-locked host memory for synthesized partitions: a partition that \
                      finds room here is copied into it by its synthesis thread, and a GPU \
                      uploads it directly, without staging copies on the device's time. 0: \
                      none (partitions go up through gpu.staging_memory; measured faster on \
                      the H200 host, docs/benchmarks.md). Counted against memory_budget. Also \
                      decides at start whether CAP_IPC_LOCK is kept: only when this exceeds \
                      RLIMIT_MEMLOCK (the packaged unit sets LimitMEMLOCK=infinity); where the \
                      staging buffers (gpu.staging_memory per GPU) need more than \
                      RLIMIT_MEMLOCK and it cannot be raised, set this to at least that.",
        apply: |c, v| {
            c.proving.pinned_memory = size(v)?;
            Ok(())
        },
        show: |c| Value::String(format_size(c.proving.pinned_memory)),
    },
    KeyDoc {
        name: "proving.quarantine_after",
        kind: "integer",
        default: "3",
        description: "Consecutive failed partitions (a device error, out of memory, or a proof \
                      that failed verification and then verified on another device) after \
                      which a device is quarantined: it takes no partitions for \
                      proving.quarantine_time, then one as a probe; success ends the \
                      quarantine, failure doubles the back-off (at most 1h). A failed \
                      partition is proved again on another device, or on a CPU prover where no \
                      other device is usable (1 to 1000).",
        apply: |c, v| {
            c.proving.quarantine_after = integer(v, 1, 1000)? as u32;
            Ok(())
        },
        show: |c| Value::Integer(i64::from(c.proving.quarantine_after)),
    },
    KeyDoc {
        name: "proving.quarantine_time",
        kind: "duration",
        default: "\"5m\"",
        description: "How long a quarantined device first stays out before it is probed again \
                      (1s to 1h); doubled after each failed probe, up to 1h.",
        apply: |c, v| {
            let d = duration(v)?;
            if d < Duration::from_secs(1) || d > MAX_QUARANTINE {
                return Err("must be from 1s to 1h".into());
            }
            c.proving.quarantine_time = d;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.proving.quarantine_time)),
    },
    KeyDoc {
        name: "gpu.kernel_cache",
        kind: "path",
        default: "\"\"",
        description: "Directory where the compiled GPU kernels are cached, so that only the \
                      first start after an upgrade compiles them (about 10 s). \"\" (the \
                      default) means $CACHE_DIRECTORY/kernels under systemd's CacheDirectory= \
                      (/var/cache/cuzk/kernels for the packaged unit), else \
                      $XDG_CACHE_HOME/cuzk or ~/.cache/cuzk, else no cache; \
                      --check-config prints the directory that applies.",
        apply: |c, v| {
            let dir = string(v)?;
            c.gpu.kernel_cache = (!dir.is_empty()).then(|| PathBuf::from(dir));
            Ok(())
        },
        show: |c| {
            Value::String(
                c.gpu
                    .kernel_cache
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            )
        },
    },
    KeyDoc {
        name: "gpu.staging_memory",
        kind: "size",
        default: "\"64MiB\"",
        description: "Page-locked host memory the GPU backend allocates (on first use) for its \
                      two upload staging buffers, half each: uploads from pageable memory go \
                      through them while the host fills the other (about twice as fast as the \
                      driver's own staging). \"0\" turns staging off; otherwise at least \
                      2MiB. Where the memory is refused, uploads go through the driver.",
        apply: |c, v| {
            let n = size(v)?;
            if n != 0 && n < 2 << 20 {
                return Err("must be 0 (no staging) or at least 2MiB".into());
            }
            c.gpu.staging_memory = n;
            Ok(())
        },
        show: |c| Value::String(format_size(c.gpu.staging_memory)),
    },
    KeyDoc {
        name: "gpu.memory_limit",
        kind: "size",
        default: "\"0\"",
        description: "Device memory cuzk holds at most on each GPU, so that a card can be \
                      shared with other GPU work (a PC2 or TreeR on the same card). \"0\" = \
                      what is free when the device is opened, less a margin of 1GiB (and before \
                      each proof, what is free then). From this budget and each parameter set's sizes, cuzk plans \
                      where every stage of a proof runs (logged at start, shown by cuzk \
                      status): what does not fit is streamed from host memory — the points of \
                      the queries not kept resident, the recorded constraints, the \
                      quotient's vectors parked two at a time. Measured on an H100 80GB \
                      (2026-12-06): a real 32 GiB PoRep proved with 15 GiB of the card free \
                      beside another process; smaller caps on an H200 only, not on smaller \
                      cards (docs/benchmarks.md). Streaming reads the parameters from their host copy, which \
                      is page-locked for it (counted against proving.memory_budget as the \
                      parameters already are; the parked vectors, 8GiB at 32 GiB, are \
                      counted too). A budget too small for a parameter set's smallest form \
                      fails its proofs with an error naming both sizes.",
        apply: |c, v| {
            let n = size(v)?;
            c.gpu.memory_limit = (n != 0).then_some(n);
            Ok(())
        },
        show: |c| Value::String(format_size(c.gpu.memory_limit.unwrap_or(0))),
    },
    KeyDoc {
        name: "daemon.drain_grace",
        kind: "duration",
        default: "\"10m\"",
        description: "After SIGTERM/SIGINT, how long running jobs may take to finish before they \
                      are cancelled. Queued jobs are answered \"shutting down\" at once.",
        apply: |c, v| {
            c.daemon.drain_grace = duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.daemon.drain_grace)),
    },
    KeyDoc {
        name: "daemon.allow_root",
        kind: "boolean",
        default: "false",
        description: "Allow running as root (uid 0). Without it cuzkd refuses to start as root.",
        apply: |c, v| {
            c.daemon.allow_root = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.daemon.allow_root),
    },
    KeyDoc {
        name: "daemon.log_level",
        kind: "string",
        default: "\"info\"",
        description: "tracing filter: error, warn, info, debug, trace, or directives such as \
                      \"cuzk=debug,warn\". The CUZK_LOG environment variable overrides it.",
        apply: |c, v| {
            let s = string(v)?;
            tracing_subscriber::EnvFilter::try_new(&s)
                .map_err(|e| format!("invalid filter: {e}"))?;
            c.daemon.log_level = s;
            Ok(())
        },
        show: |c| Value::String(c.daemon.log_level.clone()),
    },
    KeyDoc {
        name: "metrics.textfile",
        kind: "path",
        default: "\"\"",
        description: "Where to write the metrics (the Prometheus text that cuzk metrics \
                      prints) for node_exporter's textfile collector: an absolute path ending \
                      in .prom, in a directory the daemon may write and node_exporter reads \
                      (its --collector.textfile.directory; under the packaged unit, a \
                      directory in ReadWritePaths=: operating.md in /usr/share/doc/cuzk, \
                      \"Prometheus\", shows a setup). The file is replaced atomically \
                      (a hidden temporary file in the same directory, fsynced, then renamed) \
                      every metrics.textfile_interval and once more at shutdown, after the \
                      drain, so it keeps the last values after the daemon stops \
                      (node_exporter's node_textfile_mtime_seconds tells how old they are). \
                      A failed write is logged as a warning (at most one every 10 minutes, \
                      and one line when writing works again) and retried at the next \
                      interval; it never stops the daemon. \"\" (the default): not written.",
        apply: |c, v| {
            let path = string(v)?;
            c.metrics.textfile = if path.is_empty() {
                None
            } else {
                Some(prom_path(&path)?)
            };
            Ok(())
        },
        show: |c| {
            Value::String(
                c.metrics
                    .textfile
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            )
        },
    },
    KeyDoc {
        name: "metrics.textfile_interval",
        kind: "duration",
        default: "\"15s\"",
        description: "How often metrics.textfile is rewritten (at least 1s). node_exporter \
                      reads whatever is there when it is scraped, so an interval at or below \
                      the scrape interval keeps the values as fresh as the scrapes.",
        apply: |c, v| {
            let d = duration(v)?;
            if d < Duration::from_secs(1) {
                return Err("must be at least 1s".into());
            }
            c.metrics.textfile_interval = d;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.metrics.textfile_interval)),
    },
    KeyDoc {
        name: "debug.job_delay",
        kind: "duration",
        default: "\"0s\"",
        description: "Testing aid, never for production: a cancellable pause at the start of \
                      every job, before proving, to make scheduling observable.",
        apply: |c, v| {
            c.debug.job_delay = duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.debug.job_delay)),
    },
    KeyDoc {
        name: "debug.check_input",
        kind: "boolean",
        default: "true",
        description: "Testing aid, never false in production: whether Submit and Prove parse \
                      and check a request's input before queueing it (an invalid one is \
                      refused at once with InvalidInput). false queues any input and lets the \
                      job fail, so that tests can schedule jobs with bogus inputs.",
        apply: |c, v| {
            c.debug.check_input = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.debug.check_input),
    },
    KeyDoc {
        name: "debug.trace_file",
        kind: "path",
        default: "\"\"",
        description: "Where to write every partition's stage times (admission, synthesis, \
                      device queue, device) as Chrome trace events, which Perfetto and \
                      chrome://tracing open; the file is truncated at start and stops growing \
                      after a million events. \"\" (the default): no trace.",
        apply: |c, v| {
            let path = string(v)?;
            c.debug.trace_file = (!path.is_empty()).then(|| PathBuf::from(path));
            Ok(())
        },
        show: |c| {
            Value::String(
                c.debug
                    .trace_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            )
        },
    },
    KeyDoc {
        name: "debug.cpu_simd",
        kind: "boolean",
        default: "true",
        description: "Tuning: let the CPU prover use its eight-lane AVX-512 IFMA paths (MSM \
                      batch additions, quotient) where the CPU has them. false runs the \
                      portable paths (same results, slower), for A/B runs.",
        apply: |c, v| {
            c.debug.cpu_simd = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.debug.cpu_simd),
    },
    KeyDoc {
        name: "debug.cpu_msm_window_bits",
        kind: "integer",
        default: "0",
        description: "Tuning: window width (2 to 24 bits) forced on the CPU Pippenger MSM; 0 \
                      chooses it per MSM from the size.",
        apply: |c, v| {
            c.debug.cpu_msm_window_bits = optional_bits(v, 2, 24)?;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.cpu_msm_window_bits.unwrap_or(0).into()),
    },
    KeyDoc {
        name: "debug.gpu_msm_window_bits",
        kind: "integer",
        default: "0",
        description: "Tuning: window width (4 to 24 bits) forced on every GPU MSM; 0 chooses it \
                      per MSM from the measured table.",
        apply: |c, v| {
            c.debug.gpu_msm_window_bits = optional_bits(v, 4, 24)?;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.gpu_msm_window_bits.unwrap_or(0).into()),
    },
    KeyDoc {
        name: "debug.gpu_msm_chunk_min",
        kind: "integer",
        default: "128",
        description: "Tuning: smallest chunk, in points, of the GPU MSM's balanced bucket \
                      accumulation.",
        apply: |c, v| {
            c.debug.gpu_msm_chunk_min = integer(v, 1, 1 << 30)? as u64;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.gpu_msm_chunk_min as i64),
    },
    KeyDoc {
        name: "debug.gpu_msm_upload_chunk",
        kind: "integer",
        default: "1048576",
        description: "Tuning: scalars per piece of the GPU MSM's upload, which overlaps the \
                      classification of the piece before.",
        apply: |c, v| {
            c.debug.gpu_msm_upload_chunk = integer(v, 1, 1 << 31)?;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.gpu_msm_upload_chunk as i64),
    },
    KeyDoc {
        name: "debug.gpu_msm_batch_affine",
        kind: "boolean",
        default: "false",
        description: "Tuning: sum the buckets of large G1 MSMs with affine additions that \
                      share their inversions (cuda/msm_affine.cu) instead of XYZZ additions \
                      (A/B runs).",
        apply: |c, v| {
            c.debug.gpu_msm_batch_affine = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.debug.gpu_msm_batch_affine),
    },
    KeyDoc {
        name: "debug.gpu_ntt_max_stages",
        kind: "integer",
        default: "9",
        description: "Tuning: most butterfly stages per GPU NTT pass (1 to 10).",
        apply: |c, v| {
            c.debug.gpu_ntt_max_stages = integer(v, 1, 10)? as u32;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.gpu_ntt_max_stages.into()),
    },
    KeyDoc {
        name: "debug.gpu_ntt_min_threads",
        kind: "integer",
        default: "128",
        description: "Tuning: fewest threads per GPU NTT pass block (1 to 1024).",
        apply: |c, v| {
            c.debug.gpu_ntt_min_threads = integer(v, 1, 1024)? as u32;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.gpu_ntt_min_threads.into()),
    },
    KeyDoc {
        name: "debug.gpu_ntt_split",
        kind: "array of integers",
        default: "[]",
        description: "Tuning: stages per GPU NTT pass, e.g. [10, 9, 8], used for the domain \
                      whose log2 size they add up to (1 to 10 each); [] spreads the stages \
                      evenly.",
        apply: |c, v| {
            c.debug.gpu_ntt_split = id_list(v)?;
            Ok(())
        },
        show: |c| ids(&c.debug.gpu_ntt_split),
    },
    KeyDoc {
        name: "debug.gpu_quotient_serial",
        kind: "boolean",
        default: "false",
        description: "Tuning: upload each GPU quotient input after all earlier work instead of \
                      while the transforms of the one before run (A/B runs).",
        apply: |c, v| {
            c.debug.gpu_quotient_serial = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.debug.gpu_quotient_serial),
    },
    KeyDoc {
        name: "debug.gpu_trace",
        kind: "boolean",
        default: "false",
        description: "Diagnosis: log per-phase GPU MSM times and per-pass NTT times as debug \
                      events (seen with log_level \"info,cuzk::gpu=debug\"). Synchronizes the \
                      device after every phase, which slows proving.",
        apply: |c, v| {
            c.debug.gpu_trace = boolean(v)?;
            Ok(())
        },
        show: |c| Value::Boolean(c.debug.gpu_trace),
    },
    KeyDoc {
        name: "debug.nvrtc_defines",
        kind: "array of strings",
        default: "[]",
        description: "Tuning: kernel variants, each NAME or NAME=VALUE passed to NVRTC as -D \
                      (e.g. \"CUZK_FP_INLINE\"; docs/gpu-notes.md lists them). Variants get \
                      cache entries of their own.",
        apply: |c, v| {
            c.debug.nvrtc_defines = defines(v)?;
            Ok(())
        },
        show: |c| {
            Value::Array(
                c.debug
                    .nvrtc_defines
                    .iter()
                    .map(|d| Value::String(d.clone()))
                    .collect(),
            )
        },
    },
    KeyDoc {
        name: "debug.fault_every",
        kind: "integer",
        default: "0",
        description: "Testing aid, never for production: fault injection on the device \
                      debug.fault_device; every Nth call of its debug.fault_stage fails as \
                      debug.fault_kind says. 0 (the default): no fault injection.",
        apply: |c, v| {
            c.debug.fault.every = integer(v, 0, 1_000_000)? as u64;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.fault.every as i64),
    },
    KeyDoc {
        name: "debug.fault_device",
        kind: "integer",
        default: "0",
        description: "Testing aid: the device faults are injected on, by its index in the \
                      order of Status's devices (the GPUs of proving.gpus, then the CPU \
                      devices); starting fails where there is no such device.",
        apply: |c, v| {
            c.debug.fault.device = integer(v, 0, 255)?;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.fault.device as i64),
    },
    KeyDoc {
        name: "debug.fault_stage",
        kind: "\"h\" | \"witness\" | \"any\"",
        default: "\"any\"",
        description: "Testing aid: the stage of a proof that fails: the H sum (quotient and H \
                      query), the witness sums (L, A and B queries), or either (every call of \
                      either counts).",
        apply: |c, v| {
            c.debug.fault.stage = match string(v)?.as_str() {
                "h" => FaultStage::H,
                "witness" => FaultStage::Witness,
                "any" => FaultStage::Any,
                other => {
                    return Err(format!(
                        "expected \"h\", \"witness\" or \"any\", not {other:?}"
                    ))
                }
            };
            Ok(())
        },
        show: |c| {
            Value::String(
                match c.debug.fault.stage {
                    FaultStage::H => "h",
                    FaultStage::Witness => "witness",
                    FaultStage::Any => "any",
                }
                .into(),
            )
        },
    },
    KeyDoc {
        name: "debug.fault_kind",
        kind: "\"error\" | \"oom\" | \"wrong\"",
        default: "\"error\"",
        description: "Testing aid: how an injected fault fails: a device error, the device out \
                      of memory, or a wrong sum (a proof that fails verification: it is never \
                      returned, the job is proved again on other devices).",
        apply: |c, v| {
            c.debug.fault.kind = match string(v)?.as_str() {
                "error" => FaultKind::Error,
                "oom" => FaultKind::Oom,
                "wrong" => FaultKind::Wrong,
                other => {
                    return Err(format!(
                        "expected \"error\", \"oom\" or \"wrong\", not {other:?}"
                    ))
                }
            };
            Ok(())
        },
        show: |c| {
            Value::String(
                match c.debug.fault.kind {
                    FaultKind::Error => "error",
                    FaultKind::Oom => "oom",
                    FaultKind::Wrong => "wrong",
                }
                .into(),
            )
        },
    },
    KeyDoc {
        name: "debug.fault_limit",
        kind: "integer",
        default: "0",
        description: "Testing aid: at most this many injected faults, after which the device is \
                      healthy again (so that a quarantined device's re-probe succeeds); 0: no \
                      limit.",
        apply: |c, v| {
            c.debug.fault.limit = integer(v, 0, 1_000_000)? as u64;
            Ok(())
        },
        show: |c| Value::Integer(c.debug.fault.limit as i64),
    },
];

/// A configuration whose every field is about to be overwritten by the defaults in [`KEYS`].
pub(super) fn zero_config() -> Config {
    Config {
        socket: SocketConfig {
            path: PathBuf::new(),
            mode: 0,
            group: None,
            allowed_uids: Vec::new(),
            allowed_gids: Vec::new(),
            admin_uids: Vec::new(),
            max_connections: 0,
            max_connections_per_uid: 0,
        },
        protocol: ProtocolConfig {
            max_frame_size: 0,
            hello_timeout: Duration::ZERO,
            idle_timeout: None,
            max_input_size: 0,
            input_memory: 0,
            input_timeout: Duration::ZERO,
        },
        grpc: GrpcConfig {
            enabled: false,
            path: PathBuf::new(),
            mode: 0,
            max_message_size: 0,
        },
        params: ParamsConfig {
            dir: PathBuf::new(),
        },
        queue: QueueConfig {
            max_queued: 0,
            critical_reserve: 0,
            result_retention: Duration::ZERO,
            max_finished: 0,
            journal_dir: None,
            journal_max_size: 0,
        },
        proving: ProvingConfig {
            workers: 0,
            synthesis_threads: 0,
            memory_budget: 0,
            device_workers: 0,
            backend: BackendChoice::Auto,
            gpus: GpuSelection::List(Vec::new()),
            cpu_device: 0,
            numa: false,
            yield_to_critical: false,
            recorded_shapes: false,
            partition_threads: 0,
            pinned_memory: 0,
            quarantine_after: 0,
            quarantine_time: Duration::ZERO,
        },
        gpu: GpuConfig {
            kernel_cache: None,
            staging_memory: 0,
            memory_limit: None,
        },
        daemon: DaemonConfig {
            drain_grace: Duration::ZERO,
            allow_root: false,
            log_level: String::new(),
        },
        metrics: MetricsConfig {
            textfile: None,
            textfile_interval: Duration::ZERO,
        },
        debug: DebugConfig {
            job_delay: Duration::ZERO,
            check_input: true,
            trace_file: None,
            cpu_simd: false,
            cpu_msm_window_bits: None,
            gpu_msm_window_bits: None,
            gpu_msm_chunk_min: 0,
            gpu_msm_upload_chunk: 0,
            gpu_msm_batch_affine: false,
            gpu_ntt_max_stages: 0,
            gpu_ntt_min_threads: 0,
            gpu_ntt_split: Vec::new(),
            gpu_quotient_serial: false,
            gpu_trace: false,
            nvrtc_defines: Vec::new(),
            fault: FaultConfig {
                device: 0,
                stage: FaultStage::Any,
                kind: FaultKind::Error,
                every: 0,
                limit: 0,
            },
        },
    }
}

/// A key's default as a TOML value.
pub(super) fn default_value(key: &KeyDoc) -> Value {
    let doc = format!("v = {}", key.default);
    doc.parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| panic!("default of {} is not a TOML literal", key.name))
}

/// Applies a parsed document to `config`, rejecting unknown sections and keys; returns the
/// dotted keys it set.
pub(super) fn apply_table(
    config: &mut Config,
    table: &toml::Table,
) -> Result<BTreeSet<String>, ConfigError> {
    let mut set = BTreeSet::new();
    for (section, body) in table {
        let known_section = KEYS.iter().any(|k| k.section() == section);
        let Some(body) = body.as_table().filter(|_| known_section) else {
            if known_section {
                return Err(ConfigError::InvalidValue {
                    key: section.clone(),
                    message: format!("expected a [{section}] table"),
                });
            }
            return Err(ConfigError::UnknownKey {
                key: section.clone(),
            });
        };
        for (name, value) in body {
            let dotted = format!("{section}.{name}");
            if let Some(now) = renamed(&dotted, value) {
                return Err(ConfigError::InvalidValue {
                    key: dotted,
                    message: format!("this key was replaced: write {now}"),
                });
            }
            let key =
                KEYS.iter()
                    .find(|k| k.name == dotted)
                    .ok_or_else(|| ConfigError::UnknownKey {
                        key: dotted.clone(),
                    })?;
            (key.apply)(config, value).map_err(|message| ConfigError::InvalidValue {
                key: dotted.clone(),
                message,
            })?;
            set.insert(dotted);
        }
    }
    Ok(set)
}

/// Renders every key of `config` as a commented TOML document.
pub(super) fn render(config: &Config) -> String {
    let mut out = String::from("# cuzkd effective configuration\n");
    let mut section = "";
    for key in KEYS {
        if key.section() != section {
            section = key.section();
            out.push_str(&format!("\n[{section}]\n"));
        }
        out.push_str(&format!(
            "# {} ({}; default {})\n{} = {}\n",
            key.description,
            key.kind,
            key.default,
            key.short_name(),
            (key.show)(config)
        ));
    }
    out
}

fn string(v: &Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("expected a string, found {}", v.type_str()))
}

/// A textfile collector's file: absolute (the daemon's working directory is no place for
/// it), named `*.prom` (node_exporter reads no other file), without a NUL byte, and not a
/// directory.
fn prom_path(path: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(path);
    if !p.is_absolute() {
        return Err(format!("{path:?} is not an absolute path"));
    }
    if path.contains('\0') {
        return Err("must not contain a NUL byte".into());
    }
    let named_prom = p
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.len() > ".prom".len() && n.ends_with(".prom"));
    if !named_prom || path.ends_with('/') {
        return Err(format!(
            "{path:?} must name a file ending in .prom (node_exporter's textfile collector \
             reads only those)"
        ));
    }
    Ok(p)
}

fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool()
        .ok_or_else(|| format!("expected true or false, found {}", v.type_str()))
}

/// A window width in `min..=max` bits, or 0 for "chosen per MSM" (`None`).
fn optional_bits(v: &Value, min: usize, max: usize) -> Result<Option<u32>, String> {
    match integer(v, 0, max)? {
        0 => Ok(None),
        n if n < min => Err(format!("{n} is out of range (0, or {min}..={max})")),
        n => Ok(Some(n as u32)),
    }
}

/// NVRTC definitions: `NAME` or `NAME=VALUE`, NAME a C identifier (no option injection).
fn defines(v: &Value) -> Result<Vec<String>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected an array of strings, found {}", v.type_str()))?;
    items
        .iter()
        .map(|i| {
            let d = i.as_str().ok_or_else(|| format!("{i} is not a string"))?;
            let name = d.split_once('=').map_or(d, |(n, _)| n);
            let identifier = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier {
                return Err(format!("{d:?} is not NAME or NAME=VALUE"));
            }
            Ok(d.to_owned())
        })
        .collect()
}

fn integer(v: &Value, min: usize, max: usize) -> Result<usize, String> {
    let n = v
        .as_integer()
        .ok_or_else(|| format!("expected an integer, found {}", v.type_str()))?;
    usize::try_from(n)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("{n} is out of range ({min}..={max})"))
}

fn size(v: &Value) -> Result<u64, String> {
    match v {
        Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative")),
        Value::String(s) => parse_size(s),
        other => Err(format!(
            "expected a size such as \"64GiB\", found {}",
            other.type_str()
        )),
    }
}

/// The longest duration any key takes: every duration is added to a clock reading
/// somewhere, and one near `u64::MAX` seconds would overflow it (a panic per connection for
/// `protocol.hello_timeout`, per job for `debug.job_delay`).
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

fn duration(v: &Value) -> Result<Duration, String> {
    let d = match v {
        Value::String(s) => parse_duration(s)?,
        Value::Integer(0) => Duration::ZERO,
        other => {
            return Err(format!(
                "expected a duration such as \"30s\", \"5m\" or \"1h\", found {}",
                other.type_str()
            ))
        }
    };
    if d > MAX_DURATION {
        return Err(format!(
            "{} is longer than a year (366d)",
            format_duration(d)
        ));
    }
    Ok(d)
}

fn nonzero_duration(v: &Value) -> Result<Duration, String> {
    let d = duration(v)?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

fn mode(v: &Value) -> Result<u32, String> {
    let m = match v {
        Value::String(s) => u32::from_str_radix(s.trim_start_matches("0o"), 8)
            .map_err(|_| format!("{s:?} is not an octal mode such as \"0660\""))?,
        // TOML integers are decimal: `mode = 400` would be 0620, not the 0400 it looks like.
        Value::Integer(n) => {
            return Err(format!(
                "{n} is a decimal integer; write the mode as an octal string, such as \"0{n}\""
            ))
        }
        other => {
            return Err(format!(
                "expected an octal string such as \"0660\", found {}",
                other.type_str()
            ))
        }
    };
    if m > 0o777 {
        return Err(format!("{m:o} has bits outside 0777"));
    }
    Ok(m)
}

/// What replaces a key an earlier release had, written with the value it was given, so
/// that an old configuration fails with the line to write instead of "unknown key" (and a
/// host that ran one daemon per GPU does not end up with every daemon on every GPU).
fn renamed(key: &str, value: &Value) -> Option<String> {
    match key {
        "gpu.device" => Some(format!("[proving] gpus = [{value}]")),
        _ => None,
    }
}

/// `"all"`, or a list of distinct CUDA ordinals (at most 64).
fn gpu_selection(v: &Value) -> Result<GpuSelection, String> {
    if let Some(s) = v.as_str() {
        return match s {
            "all" => Ok(GpuSelection::All),
            other => Err(format!(
                "expected \"all\" or a list of ordinals, not {other:?}"
            )),
        };
    }
    let items = v.as_array().ok_or_else(|| {
        format!(
            "expected \"all\" or an array of integers, found {}",
            v.type_str()
        )
    })?;
    if items.is_empty() || items.len() > 64 {
        return Err(format!("{} ordinals: give 1..=64", items.len()));
    }
    let mut list = Vec::with_capacity(items.len());
    for i in items {
        let n = integer(i, 0, 1023)?;
        if list.contains(&n) {
            return Err(format!("ordinal {n} is listed twice"));
        }
        list.push(n);
    }
    Ok(GpuSelection::List(list))
}

fn id_list(v: &Value) -> Result<Vec<u32>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected an array, found {}", v.type_str()))?;
    items
        .iter()
        .map(|i| {
            i.as_integer()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{i} is not an integer in 0..=4294967295"))
        })
        .collect()
}

fn ids(list: &[u32]) -> Value {
    Value::Array(list.iter().map(|&n| Value::Integer(n.into())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_parses_and_names_are_unique() {
        let mut c = zero_config();
        for (i, key) in KEYS.iter().enumerate() {
            (key.apply)(&mut c, &default_value(key)).unwrap();
            assert!(
                KEYS[..i].iter().all(|k| k.name != key.name),
                "{} twice",
                key.name
            );
            assert!(key.name.contains('.'), "{} has no section", key.name);
        }
    }
}
