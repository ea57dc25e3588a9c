//! `cuzkd`'s configuration: a strict TOML file over built-in defaults.
//!
//! Every key is described once, in [`KEYS`] (key, type, default, description): the parser,
//! the defaults, `cuzkd --check-config` and the documentation are all driven by that table,
//! so they cannot drift apart. An unknown key, a value of the wrong type, a bad size
//! (`"64GiB"`) or a bad duration (`"30s"`, `"5m"`, `"1h"`) is a [`ConfigError`] that names the
//! key; `cuzkd` exits with status [`EXIT_CONFIG`] on one.

mod keys;
mod units;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use keys::{KeyDoc, KEYS};
pub use units::{format_duration, format_size, parse_duration, parse_size};

/// The exit status for a configuration error (`EX_CONFIG` from sysexits.h).
pub const EXIT_CONFIG: u8 = 78;

/// Where `cuzkd` looks for its configuration when `--config` is not given. A missing file at
/// this default path means "built-in defaults"; a missing file named explicitly is an error.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/cuzk/cuzk.toml";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The configuration file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{path}: not valid TOML: {message}")]
    Syntax {
        /// The configuration file.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// A key that cuzkd does not know (often a typo).
    #[error("unknown configuration key `{key}`")]
    UnknownKey {
        /// The dotted key, e.g. `socket.pathh`.
        key: String,
    },
    /// A known key with a value of the wrong type or out of range.
    #[error("configuration key `{key}`: {message}")]
    InvalidValue {
        /// The dotted key, e.g. `queue.result_retention`.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
}

/// Which proving backend the daemon uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// Always the CPU.
    Cpu,
    /// The GPU; starting fails when none is usable.
    Gpu,
}

/// Which GPUs the daemon proves on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// Every CUDA device the driver shows.
    All,
    /// These CUDA ordinals, in this order.
    List(Vec<usize>),
}

/// The listening socket and who may connect to it.
#[derive(Clone, Debug, PartialEq)]
pub struct SocketConfig {
    /// Path of the Unix socket (ignored under systemd socket activation).
    pub path: PathBuf,
    /// Permission bits of the socket file.
    pub mode: u32,
    /// Group given to the socket file (name or numeric gid); `None` leaves it unchanged.
    pub group: Option<String>,
    /// Peer uids allowed to connect; together with `allowed_gids`, empty means "anyone the
    /// file permissions let in".
    pub allowed_uids: Vec<u32>,
    /// Peer primary gids allowed to connect.
    pub allowed_gids: Vec<u32>,
    /// Peer uids that are admins, besides root and the daemon's own uid (which always are):
    /// they see and act on every job and may load and drop parameter sets; other clients
    /// see and act on their own jobs only.
    pub admin_uids: Vec<u32>,
    /// Connections served at once; more are answered "busy" and closed.
    pub max_connections: usize,
    /// Connections one peer uid may hold at once, root included; 0 = all but an eighth of
    /// `max_connections` (see [`SocketConfig::per_uid_limit`]).
    pub max_connections_per_uid: usize,
}

impl SocketConfig {
    /// Connections one peer uid may hold at once: `max_connections_per_uid`, or (0)
    /// `max_connections` less an eighth (rounded down, at least one): a miner that runs all
    /// its clients as one user keeps most slots, and an eighth stays for the others (an
    /// operator's `cuzk status`, another miner).
    pub fn per_uid_limit(&self) -> usize {
        match self.max_connections_per_uid {
            0 => (self.max_connections - self.max_connections / 8).max(1),
            n => n,
        }
    }
}

/// Wire-protocol limits.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolConfig {
    /// Largest frame (payload bytes, without the 4-byte length) accepted or sent.
    pub max_frame_size: u32,
    /// How long a new connection may take to say Hello.
    pub hello_timeout: Duration,
    /// How long a connection past Hello may go without a request (none in progress) before
    /// it is closed; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Largest input read from a file descriptor passed with a request (SubmitFd, ProveFd).
    pub max_input_size: u64,
    /// Bytes of passed inputs being read at once, all connections together; a read waits
    /// for room.
    pub input_memory: u64,
    /// How long reading a passed input may take.
    pub input_timeout: Duration,
}

/// The gRPC endpoint (`cuzk.v1.ProvingEngine`, Curio's proving client's protocol).
#[derive(Clone, Debug, PartialEq)]
pub struct GrpcConfig {
    /// Whether cuzkd serves it.
    pub enabled: bool,
    /// Its Unix socket (ignored when systemd passes one named `grpc`).
    pub path: PathBuf,
    /// Permission bits of its socket file (its group is `socket.group`'s).
    pub mode: u32,
    /// Largest message accepted or sent.
    pub max_message_size: u64,
}

/// The parameter cache.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamsConfig {
    /// Directory of the `.params`/`.vk` files. Its default is `FIL_PROOFS_PARAMETER_CACHE`
    /// where `cuzkd` was started with it (see [`EnvDefaults`]).
    pub dir: PathBuf,
}

/// The job queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueConfig {
    /// Jobs waiting at once (all classes); a Submit beyond it is answered "queue full".
    pub max_queued: usize,
    /// Of `max_queued`, slots that only critical jobs (WinningPoSt) may use.
    pub critical_reserve: usize,
    /// How long a finished job's result stays available to Await.
    pub result_retention: Duration,
    /// Finished jobs kept at most (the oldest are dropped first).
    pub max_finished: usize,
    /// The job journal's directory; `None`: no journal. Its default is
    /// `$STATE_DIRECTORY/journal` where `cuzkd` was started with it (see [`EnvDefaults`]).
    pub journal_dir: Option<PathBuf>,
    /// Most bytes the journal (log and stored inputs) takes; 0: no journal.
    pub journal_max_size: u64,
}

/// The proving workers.
#[derive(Clone, Debug, PartialEq)]
pub struct ProvingConfig {
    /// Jobs in flight at once (not counting the critical lane's); 0 = synthesis threads + 2.
    pub workers: usize,
    /// Partitions synthesized at once; 0 = one per CPU.
    pub synthesis_threads: usize,
    /// Host bytes for resident parameters and partitions in flight; 0 = derived from the
    /// host's memory by the daemon.
    pub memory_budget: u64,
    /// Partitions the device proves at once (besides the critical worker).
    pub device_workers: usize,
    /// Backend selection.
    pub backend: BackendChoice,
    /// The GPUs proved on (when the backend is a GPU).
    pub gpus: GpuSelection,
    /// CPU devices beside the GPUs; where no GPU is used, the CPU devices (at least one).
    pub cpu_device: usize,
    /// Whether synthesis threads and device workers are pinned to NUMA nodes.
    pub numa: bool,
    /// Whether non-critical synthesis pauses while a critical partition is in flight.
    pub yield_to_critical: bool,
    /// Whether non-critical partitions use recorded circuit shapes.
    pub recorded_shapes: bool,
    /// Threads one partition's independent parts are synthesized on; 0 = one per CPU.
    pub partition_threads: usize,
    /// Page-locked host memory for synthesized partitions, which the GPUs upload from
    /// directly; also decides at start whether `CAP_IPC_LOCK` is kept (when it exceeds
    /// `RLIMIT_MEMLOCK`).
    pub pinned_memory: u64,
    /// Consecutive device failures after which a device is quarantined (takes no
    /// partitions for a while).
    pub quarantine_after: u32,
    /// A quarantine's first back-off; doubled (up to [`MAX_QUARANTINE`]) each time the
    /// re-probe fails.
    pub quarantine_time: Duration,
}

/// The longest a quarantine's back-off grows to, whatever `proving.quarantine_time`.
pub const MAX_QUARANTINE: Duration = Duration::from_secs(3600);

/// The GPU backend's device and caches.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuConfig {
    /// Directory of the compiled-kernel cache; `None`: no cache (every start compiles).
    pub kernel_cache: Option<PathBuf>,
    /// Page-locked host memory of the two upload staging buffers (half each); 0: no staging.
    pub staging_memory: u64,
    /// Device memory each GPU's backend may hold at most; `None`: what is free when the device
    /// is opened, less a margin.
    pub memory_limit: Option<u64>,
}

/// Process-level settings.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonConfig {
    /// How long running jobs may take to finish after SIGTERM.
    pub drain_grace: Duration,
    /// Whether running as root is allowed.
    pub allow_root: bool,
    /// tracing filter (`info`, `debug`, `cuzk=debug,warn`, ...).
    pub log_level: String,
}

/// Metrics exported besides the socket's Metrics request.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsConfig {
    /// Where the metrics are written for node_exporter's textfile collector (an absolute
    /// path ending in `.prom`); `None`: not written.
    pub textfile: Option<PathBuf>,
    /// How often the textfile is rewritten.
    pub textfile_interval: Duration,
}

/// Testing aids and tuning knobs; never set in production (the defaults are the measured
/// best). Each tuning knob names the option it fills (`prover::cpu::CpuOptions`,
/// `gpu::GpuOptions`).
#[derive(Clone, Debug, PartialEq)]
pub struct DebugConfig {
    /// A cancellable pause at the start of every job, before proving.
    pub job_delay: Duration,
    /// Whether Submit and Prove check a request's input before queueing it.
    pub check_input: bool,
    /// Where to write every partition's stage times as Chrome trace events; `None`: nowhere.
    pub trace_file: Option<PathBuf>,
    /// Whether the CPU prover's eight-lane AVX-512 IFMA paths may run.
    pub cpu_simd: bool,
    /// A window width forced on the CPU Pippenger (2..=24); `None`: chosen per MSM.
    pub cpu_msm_window_bits: Option<u32>,
    /// A window width forced on the GPU MSM (4..=24); `None`: chosen per MSM.
    pub gpu_msm_window_bits: Option<u32>,
    /// Smallest bucket-accumulation chunk of the GPU MSM, in points.
    pub gpu_msm_chunk_min: u64,
    /// Scalars per piece of the GPU MSM's overlapped upload.
    pub gpu_msm_upload_chunk: usize,
    /// Large G1 bucket sums in the batch-affine walk instead of XYZZ additions.
    pub gpu_msm_batch_affine: bool,
    /// Most butterfly stages per GPU NTT pass (1..=10).
    pub gpu_ntt_max_stages: u32,
    /// Fewest threads per GPU NTT pass block (1..=1024).
    pub gpu_ntt_min_threads: u32,
    /// Stages per GPU NTT pass for the domain they add up to; empty: even spread.
    pub gpu_ntt_split: Vec<u32>,
    /// Each GPU quotient input uploaded after all earlier work.
    pub gpu_quotient_serial: bool,
    /// GPU per-phase timings as debug events (synchronizes after every phase).
    pub gpu_trace: bool,
    /// Extra NVRTC `-D` definitions (kernel variants).
    pub nvrtc_defines: Vec<String>,
    /// Fault injection on one proving device (tests only); off by default.
    pub fault: FaultConfig,
}

/// Where in a device's proof an injected fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultStage {
    /// The H sum (the quotient and the H query's MSM).
    H,
    /// The witness sums (the L, A and B queries' MSMs).
    Witness,
    /// Either: every call of either stage counts.
    Any,
}

/// What an injected fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The device reports an error.
    Error,
    /// The device reports that it ran out of memory.
    Oom,
    /// The device returns a wrong sum, which the proof's verification must catch.
    Wrong,
}

/// `debug.fault_*`: a testing aid that makes one device fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultConfig {
    /// The device (its index in the order the devices are listed: GPUs, then CPUs).
    pub device: usize,
    /// The stage that fails.
    pub stage: FaultStage,
    /// How it fails.
    pub kind: FaultKind,
    /// Every Nth call of the stage fails; 0: no fault injection.
    pub every: u64,
    /// At most this many faults, then the device is healthy again; 0: no limit.
    pub limit: u64,
}

/// The largest configuration file read: far above any real one (every key with a long value
/// is a few KiB), and `--config /dev/zero` ends here instead of filling memory.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The file's text, refused past [`MAX_CONFIG_BYTES`].
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_CONFIG_BYTES} bytes: not a configuration file"),
        ));
    }
    Ok(text)
}

/// The complete effective configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[socket]`
    pub socket: SocketConfig,
    /// `[protocol]`
    pub protocol: ProtocolConfig,
    /// `[grpc]`
    pub grpc: GrpcConfig,
    /// `[params]`
    pub params: ParamsConfig,
    /// `[queue]`
    pub queue: QueueConfig,
    /// `[proving]`
    pub proving: ProvingConfig,
    /// `[gpu]`
    pub gpu: GpuConfig,
    /// `[daemon]`
    pub daemon: DaemonConfig,
    /// `[metrics]`
    pub metrics: MetricsConfig,
    /// `[debug]`
    pub debug: DebugConfig,
}

impl Default for Config {
    /// The built-in defaults: every key's documented default from [`KEYS`].
    fn default() -> Self {
        let mut config = keys::zero_config();
        for key in KEYS {
            let value = keys::default_value(key);
            // The defaults are constants in KEYS; a unit test checks that each one parses.
            if let Err(e) = (key.apply)(&mut config, &value) {
                panic!("built-in default of {} is invalid: {e}", key.name);
            }
        }
        config
    }
}

/// Defaults that come from the process environment, as every Filecoin tool takes them. The
/// library reads no environment: `cuzkd`'s `main` (in `src/bin`) fills this in and hands it to
/// [`Config::load_over`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvDefaults {
    /// `FIL_PROOFS_PARAMETER_CACHE`: the default of `params.dir`.
    pub params_dir: Option<PathBuf>,
    /// The default of `gpu.kernel_cache`: `$CACHE_DIRECTORY/kernels` under systemd's
    /// `CacheDirectory=`, else `$XDG_CACHE_HOME/cuzk` or `$HOME/.cache/cuzk`.
    pub kernel_cache: Option<PathBuf>,
    /// The default of `queue.journal_dir`: `$STATE_DIRECTORY/journal` under systemd's
    /// `StateDirectory=`.
    pub journal_dir: Option<PathBuf>,
}

impl EnvDefaults {
    /// The built-in defaults with these applied: what a file that sets nothing means.
    pub fn config(&self) -> Config {
        let mut config = Config::default();
        if let Some(dir) = &self.params_dir {
            config.params.dir = dir.clone();
        }
        if let Some(dir) = &self.kernel_cache {
            config.gpu.kernel_cache = Some(dir.clone());
        }
        if let Some(dir) = &self.journal_dir {
            config.queue.journal_dir = Some(dir.clone());
        }
        config
    }
}

/// The default kernel cache directory from the environment's cache locations (each the value
/// of its variable, read by the caller): `$CACHE_DIRECTORY/kernels` (systemd's
/// `CacheDirectory=`; the first where it lists several), else `$XDG_CACHE_HOME/cuzk`, else
/// `$HOME/.cache/cuzk`; none without any of them.
pub fn default_kernel_cache(
    cache_directory: Option<&std::ffi::OsStr>,
    xdg_cache_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    fn non_empty(v: Option<&std::ffi::OsStr>) -> Option<&std::ffi::OsStr> {
        v.filter(|v| !v.is_empty())
    }
    if let Some(dirs) = non_empty(cache_directory) {
        use std::os::unix::ffi::OsStrExt;
        let first = dirs
            .as_bytes()
            .split(|&b| b == b':')
            .next()
            .unwrap_or_default();
        return Some(PathBuf::from(std::ffi::OsStr::from_bytes(first)).join("kernels"));
    }
    if let Some(d) = non_empty(xdg_cache_home) {
        return Some(PathBuf::from(d).join("cuzk"));
    }
    non_empty(home).map(|h| PathBuf::from(h).join(".cache/cuzk"))
}

/// The default job journal directory from systemd's `STATE_DIRECTORY` (its value, read by the
/// caller; the first directory where it lists several): `<it>/journal`; none without it.
pub fn default_journal_dir(state_directory: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let dirs = state_directory.filter(|v| !v.is_empty())?;
    let first = dirs.as_bytes().split(|&b| b == b':').next()?;
    (!first.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(first)).join("journal"))
}

/// The dotted keys a configuration file set explicitly (whatever their value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExplicitKeys(std::collections::BTreeSet<String>);

impl ExplicitKeys {
    /// Whether the file set `key` (`params.dir`, say).
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }
}

/// A loaded configuration and what its file set.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The effective configuration.
    pub config: Config,
    /// The keys the file set (none where no file was read).
    pub explicit: ExplicitKeys,
}

impl Config {
    /// Parses a configuration document over the built-in defaults.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Ok(Self::parse_over(text, path, Config::default())?.config)
    }

    /// Parses a configuration document over `base` (the defaults, changed by the
    /// environment's), and says which keys it set.
    pub fn parse_over(text: &str, path: &Path, base: Config) -> Result<Loaded, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    message: e.to_string(),
                })?;
        let mut config = base;
        let explicit = ExplicitKeys(keys::apply_table(&mut config, &table)?);
        config.validate()?;
        Ok(Loaded { config, explicit })
    }

    /// Loads `path`, or the built-in defaults when `path` is `None` and the default file
    /// does not exist.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Ok(Self::load_over(path, &EnvDefaults::default())?.config)
    }

    /// [`Config::load`] over the built-in defaults as `env` changes them: a key the file sets
    /// wins over the environment's default for it (the caller may warn about a conflict:
    /// [`Loaded::explicit`] says which keys were set).
    pub fn load_over(path: Option<&Path>, env: &EnvDefaults) -> Result<Loaded, ConfigError> {
        let (path, explicit) = match path {
            Some(p) => (p.to_owned(), true),
            None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
        };
        match read_bounded(&path) {
            Ok(text) => Self::parse_over(&text, &path, env.config()),
            Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => Ok(Loaded {
                config: env.config(),
                explicit: ExplicitKeys::default(),
            }),
            Err(source) => Err(ConfigError::Io { path, source }),
        }
    }

    /// Checks constraints between keys.
    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: &str| ConfigError::InvalidValue {
            key: key.into(),
            message: message.into(),
        };
        if self.queue.critical_reserve >= self.queue.max_queued {
            return Err(invalid(
                "queue.critical_reserve",
                "must be smaller than queue.max_queued",
            ));
        }
        if self.socket.max_connections_per_uid > self.socket.max_connections {
            return Err(invalid(
                "socket.max_connections_per_uid",
                "must not exceed socket.max_connections",
            ));
        }
        let socket = &self.socket.path;
        if socket.as_os_str().is_empty() {
            return Err(invalid("socket.path", "must not be empty"));
        }
        // Caught here rather than when the daemon binds (exit 1, and systemd restarting it):
        // a relative path depends on the working directory, and a NUL cannot be in a path.
        if !socket.is_absolute() {
            return Err(invalid("socket.path", "must be an absolute path"));
        }
        if socket.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(invalid("socket.path", "must not contain a NUL byte"));
        }
        if self.params.dir.as_os_str().is_empty() {
            return Err(invalid("params.dir", "must not be empty"));
        }
        let split = &self.debug.gpu_ntt_split;
        if split.iter().any(|t| !(1..=10).contains(t)) {
            return Err(invalid(
                "debug.gpu_ntt_split",
                "every pass has 1 to 10 stages",
            ));
        }
        Ok(())
    }

    /// The effective configuration as a TOML document, every key present.
    pub fn to_toml(&self) -> String {
        keys::render(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_file_is_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.socket.path, PathBuf::from("/run/cuzk/cuzk.sock"));
        assert_eq!(c.socket.mode, 0o660);
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse("[socket]\npathh = \"/x\"\n").unwrap_err();
        assert!(e.to_string().contains("`socket.pathh`"), "{e}");
        let e = parse("[sockets]\npath = \"/x\"\n").unwrap_err();
        assert!(e.to_string().contains("`sockets`"), "{e}");
        let e = parse("verbose = true\n").unwrap_err();
        assert!(e.to_string().contains("`verbose`"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse("[queue]\nresult_retention = \"5 minutes\"\n").unwrap_err();
        assert!(e.to_string().contains("`queue.result_retention`"), "{e}");
        let e = parse("[protocol]\nmax_frame_size = \"64XB\"\n").unwrap_err();
        assert!(e.to_string().contains("`protocol.max_frame_size`"), "{e}");
        let e = parse("[queue]\nmax_queued = \"many\"\n").unwrap_err();
        assert!(e.to_string().contains("`queue.max_queued`"), "{e}");
        let e = parse("[socket]\nmode = \"0999\"\n").unwrap_err();
        assert!(e.to_string().contains("`socket.mode`"), "{e}");
    }

    #[test]
    fn values_parse() {
        let c = parse(
            "[socket]\nmode = \"0600\"\ngroup = \"cuzk\"\nallowed_uids = [1000, 1001]\nadmin_uids = [1001]\n\
             [queue]\nresult_retention = \"1h\"\n[protocol]\nmax_frame_size = \"16MiB\"\n\
             [daemon]\ndrain_grace = \"30s\"\n[proving]\npinned_memory = \"64GiB\"\n",
        )
        .unwrap();
        assert_eq!(c.socket.mode, 0o600);
        assert_eq!(c.socket.group.as_deref(), Some("cuzk"));
        assert_eq!(c.socket.allowed_uids, vec![1000, 1001]);
        assert_eq!(c.socket.admin_uids, vec![1001]);
        assert_eq!(c.queue.result_retention, Duration::from_secs(3600));
        assert_eq!(c.protocol.max_frame_size, 16 << 20);
        assert_eq!(c.daemon.drain_grace, Duration::from_secs(30));
        assert_eq!(c.proving.pinned_memory, 64 << 30);
    }

    #[test]
    fn values_that_would_fail_only_at_start_are_refused_here() {
        for (text, key) in [
            ("[socket]\nmode = 400\n", "socket.mode"),
            ("[socket]\npath = \"relative.sock\"\n", "socket.path"),
            ("[socket]\npath = \"/run/a\\u0000b\"\n", "socket.path"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        let err = parse("[socket]\nmode = 400\n").unwrap_err().to_string();
        assert!(err.contains("\"0400\""), "{err}");
        let zero = Config::load(Some(Path::new("/dev/zero"))).unwrap_err();
        assert!(
            zero.to_string().contains("not a configuration file"),
            "{zero}"
        );
    }

    #[test]
    fn connections_have_a_per_uid_limit_and_an_idle_timeout() {
        let d = Config::default();
        assert_eq!(
            d.socket.per_uid_limit(),
            56,
            "all but an eighth of 64 connections"
        );
        assert_eq!(d.protocol.idle_timeout, Some(Duration::from_secs(600)));
        let c =
            parse("[socket]\nmax_connections = 5\n[protocol]\nidle_timeout = \"0s\"\n").unwrap();
        assert_eq!(c.socket.per_uid_limit(), 5, "an eighth of 5 is none");
        assert_eq!(c.protocol.idle_timeout, None, "0s: never");
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        let one = parse("[socket]\nmax_connections = 1\n").unwrap();
        assert_eq!(one.socket.per_uid_limit(), 1);
        let c = parse(
            "[socket]\nmax_connections = 8\nmax_connections_per_uid = 8\n\
             [protocol]\nidle_timeout = \"90s\"\n",
        )
        .unwrap();
        assert_eq!(c.socket.per_uid_limit(), 8);
        assert_eq!(c.protocol.idle_timeout, Some(Duration::from_secs(90)));
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        for (text, key) in [
            (
                "[socket]\nmax_connections = 8\nmax_connections_per_uid = 9\n",
                "socket.max_connections_per_uid",
            ),
            (
                "[socket]\nmax_connections_per_uid = 40\nmax_connections = 32\n",
                "socket.max_connections_per_uid",
            ),
            (
                "[socket]\nmax_connections_per_uid = -1\n",
                "socket.max_connections_per_uid",
            ),
            (
                "[protocol]\nidle_timeout = \"400d\"\n",
                "protocol.idle_timeout",
            ),
            ("[protocol]\nidle_timeout = 600\n", "protocol.idle_timeout"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(&format!("`{key}`")), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_metrics_textfile_is_an_absolute_prom_path() {
        assert_eq!(Config::default().metrics.textfile, None);
        assert_eq!(
            Config::default().metrics.textfile_interval,
            Duration::from_secs(15)
        );
        let c = parse(
            "[metrics]\ntextfile = \"/run/cuzk-metrics/cuzk.prom\"\ntextfile_interval = \"1m\"\n",
        )
        .unwrap();
        assert_eq!(
            c.metrics.textfile.as_deref(),
            Some(Path::new("/run/cuzk-metrics/cuzk.prom"))
        );
        assert_eq!(c.metrics.textfile_interval, Duration::from_secs(60));
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        for (text, key) in [
            ("textfile = \"cuzk.prom\"", "metrics.textfile"),
            ("textfile = \"/run/cuzk/cuzk.txt\"", "metrics.textfile"),
            ("textfile = \"/run/cuzk/.prom\"", "metrics.textfile"),
            ("textfile = \"/run/cuzk.prom/\"", "metrics.textfile"),
            ("textfile = \"/run/a\\u0000b.prom\"", "metrics.textfile"),
            ("textfile = 1", "metrics.textfile"),
            ("textfile_interval = \"0s\"", "metrics.textfile_interval"),
            ("textfile_interval = \"500ms\"", "metrics.textfile_interval"),
        ] {
            let err = parse(&format!("[metrics]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("`{key}`")), "{text}: {err}");
        }
    }

    #[test]
    fn devices_are_chosen_by_proving_gpus_and_gpu_device_says_so() {
        let c = parse("[proving]\ngpus = [1, 0]\ncpu_device = 2\nnuma = \"off\"\n").unwrap();
        assert_eq!(c.proving.gpus, GpuSelection::List(vec![1, 0]));
        assert_eq!((c.proving.cpu_device, c.proving.numa), (2, false));
        assert_eq!(Config::default().proving.gpus, GpuSelection::All);
        for bad in [
            "gpus = [0, 0]",
            "gpus = []",
            "gpus = \"some\"",
            "gpus = [-1]",
        ] {
            let err = parse(&format!("[proving]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("proving.gpus"), "{bad}: {err}");
        }
        let err = parse("[gpu]\ndevice = 1\n").unwrap_err().to_string();
        assert!(err.contains("[proving] gpus = [1]"), "{err}");
    }

    #[test]
    fn tuning_knobs_parse_and_check_their_ranges() {
        let c = parse(
            "[gpu]\nkernel_cache = \"/k\"\nstaging_memory = \"0\"\n\
             [debug]\ncpu_simd = false\ncpu_msm_window_bits = 12\ngpu_msm_window_bits = 16\n\
             gpu_ntt_split = [10, 9, 8]\nnvrtc_defines = [\"CUZK_FP_INLINE\", \"X=5\"]\n\
             gpu_trace = true\n",
        )
        .unwrap();
        assert_eq!(c.gpu.kernel_cache.as_deref(), Some(Path::new("/k")));
        assert_eq!(c.gpu.staging_memory, 0);
        assert!(!c.debug.cpu_simd);
        assert_eq!(c.debug.cpu_msm_window_bits, Some(12));
        assert_eq!(c.debug.gpu_msm_window_bits, Some(16));
        assert_eq!(c.debug.gpu_ntt_split, vec![10, 9, 8]);
        assert_eq!(c.debug.nvrtc_defines, vec!["CUZK_FP_INLINE", "X=5"]);
        assert!(c.debug.gpu_trace);
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        for (text, key) in [
            (
                "[debug]\ncpu_msm_window_bits = 1\n",
                "debug.cpu_msm_window_bits",
            ),
            (
                "[debug]\ngpu_msm_window_bits = 30\n",
                "debug.gpu_msm_window_bits",
            ),
            ("[debug]\ngpu_ntt_split = [11, 9]\n", "debug.gpu_ntt_split"),
            (
                "[debug]\ngpu_ntt_max_stages = 0\n",
                "debug.gpu_ntt_max_stages",
            ),
            (
                "[debug]\nnvrtc_defines = [\"-DX\"]\n",
                "debug.nvrtc_defines",
            ),
            ("[gpu]\nstaging_memory = \"1KiB\"\n", "gpu.staging_memory"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.to_string().contains(key), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_kernel_cache_follows_systemd_then_xdg_then_home() {
        use std::ffi::OsStr;
        let some = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(
            default_kernel_cache(some("/var/cache/cuzk:/other"), some("/x"), some("/h")),
            Some(PathBuf::from("/var/cache/cuzk/kernels"))
        );
        assert_eq!(
            default_kernel_cache(None, some("/x"), some("/h")),
            Some(PathBuf::from("/x/cuzk"))
        );
        assert_eq!(
            default_kernel_cache(some(""), None, some("/h")),
            Some(PathBuf::from("/h/.cache/cuzk"))
        );
        assert_eq!(default_kernel_cache(None, None, None), None);
    }

    #[test]
    fn the_environment_gives_defaults_that_the_file_overrides() {
        let env = EnvDefaults {
            params_dir: Some(PathBuf::from("/data/zk/params")),
            kernel_cache: Some(PathBuf::from("/var/cache/cuzk/kernels")),
            journal_dir: Some(PathBuf::from("/var/lib/cuzk/journal")),
        };
        let base = env.config();
        assert_eq!(
            base.queue.journal_dir.as_deref(),
            Some(Path::new("/var/lib/cuzk/journal"))
        );
        assert_eq!(base.params.dir, PathBuf::from("/data/zk/params"));
        assert_eq!(
            base.gpu.kernel_cache.as_deref(),
            Some(Path::new("/var/cache/cuzk/kernels"))
        );
        let path = Path::new("test.toml");
        let loaded = Config::parse_over("[queue]\nmax_queued = 7\n", path, base.clone()).unwrap();
        assert_eq!(loaded.config.params.dir, PathBuf::from("/data/zk/params"));
        assert!(!loaded.explicit.contains("params.dir"));
        assert!(loaded.explicit.contains("queue.max_queued"));
        let loaded = Config::parse_over("[params]\ndir = \"/other\"\n", path, base).unwrap();
        assert_eq!(loaded.config.params.dir, PathBuf::from("/other"));
        assert!(loaded.explicit.contains("params.dir"));
    }

    #[test]
    fn the_journal_follows_the_state_directory() {
        use std::ffi::OsStr;
        assert_eq!(
            default_journal_dir(Some(OsStr::new("/var/lib/cuzk:/var/lib/other"))),
            Some(PathBuf::from("/var/lib/cuzk/journal"))
        );
        assert_eq!(default_journal_dir(Some(OsStr::new(""))), None);
        assert_eq!(default_journal_dir(None), None);
    }

    #[test]
    fn the_journal_keys_are_checked() {
        let c = parse("").unwrap();
        assert_eq!(
            (c.queue.journal_dir, c.queue.journal_max_size),
            (None, 4 << 30)
        );
        let c = parse("[queue]\njournal_dir = \"/srv/cuzk\"\njournal_max_size = \"0\"\n").unwrap();
        assert_eq!(c.queue.journal_dir.as_deref(), Some(Path::new("/srv/cuzk")));
        assert_eq!(c.queue.journal_max_size, 0);
        for bad in [
            "journal_dir = \"relative/dir\"",
            "journal_max_size = \"4KiB\"",
        ] {
            let e = parse(&format!("[queue]\n{bad}\n")).unwrap_err();
            assert!(e.to_string().contains("`queue.journal_"), "{e}");
        }
        // "" keeps the environment's default.
        let env = EnvDefaults {
            journal_dir: Some(PathBuf::from("/var/lib/cuzk/journal")),
            ..EnvDefaults::default()
        };
        let loaded = Config::parse_over(
            "[queue]\njournal_dir = \"\"\n",
            Path::new("t"),
            env.config(),
        )
        .unwrap();
        assert_eq!(
            loaded.config.queue.journal_dir.as_deref(),
            Some(Path::new("/var/lib/cuzk/journal"))
        );
    }

    #[test]
    fn rendered_config_round_trips() {
        let c = parse("[socket]\ngroup = \"cuzk\"\n[queue]\nmax_queued = 7\n").unwrap();
        let again = parse(&c.to_toml()).unwrap();
        assert_eq!(c, again);
        assert_eq!(
            parse(&Config::default().to_toml()).unwrap(),
            Config::default()
        );
    }
}
