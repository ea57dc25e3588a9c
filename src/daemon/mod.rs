//! `cuzkd`: the proving daemon. A thin shell over [`crate::engine`]: it owns the socket, the
//! wire protocol, systemd integration, privileges and logging.
//!
//! Start-up order matters: configuration → logging → root check → socket (bound, or taken
//! from systemd) → capabilities dropped (before any thread exists, since capabilities are per
//! thread) → job journal opened and read (`journal.rs`; before the backend, so that an
//! unusable configured directory fails the start at once) → proving service and engine
//! (which takes up the journal's jobs) → runtime → `READY=1`.
//!
//! The daemon reads no environment itself: `src/bin/cuzkd.rs` gathers what it needs into an
//! [`Environment`] once, at start, and passes it to [`main`].

mod access;
mod admission;
pub mod cli;
mod connection;
mod fdinput;
mod frames;
mod grpc;
mod handler;
pub(crate) mod host;
pub mod journal;
mod listener;
mod logging;
mod metrics;
mod notify;
mod privileges;
mod ratelimit;
mod server;
mod service;
mod textfile;
pub mod trace;
mod watchers;
mod wire;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

pub use listener::{Listener, SocketOrigin};
pub use notify::Notifier;

use crate::config::{Config, EnvDefaults, Loaded};
use crate::engine::{Engine, EngineConfig, JobEvent, JobResult, JobSnapshot};
use crate::gpu::GpuOptions;
use crate::pipeline::{Device, HealthPolicy, PipelineOptions, ProvingService};
use crate::prover::cpu::CpuOptions;
use crate::prover::PinnedPool;

/// What `cuzkd` takes from its process environment, read once by its `main` (in `src/bin`)
/// before anything else runs. Socket activation's `LISTEN_*` are read by the `sd-notify` crate
/// when the listener takes the socket over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// `FIL_PROOFS_PARAMETER_CACHE`: the default of `params.dir`.
    pub param_cache: Option<PathBuf>,
    /// `CUZK_LOG`: a tracing filter that overrides `daemon.log_level`.
    pub log_filter: Option<String>,
    /// `NOTIFY_SOCKET`: where systemd takes notifications.
    pub notify_socket: Option<OsString>,
    /// `WATCHDOG_USEC`: the watchdog interval systemd asked for.
    pub watchdog_usec: Option<String>,
    /// `WATCHDOG_PID`: the process the watchdog interval is meant for.
    pub watchdog_pid: Option<String>,
    /// `JOURNAL_STREAM`: the journal's stream, if stdout/stderr were connected to it.
    pub journal_stream: Option<OsString>,
    /// The default of `gpu.kernel_cache`, from `CACHE_DIRECTORY`, `XDG_CACHE_HOME` or `HOME`
    /// ([`crate::config::default_kernel_cache`]).
    pub kernel_cache: Option<PathBuf>,
    /// `STATE_DIRECTORY`: systemd's `StateDirectory=`, where the job journal goes by default
    /// ([`crate::config::default_journal_dir`]).
    pub state_directory: Option<OsString>,
}

impl Environment {
    /// The configuration defaults this environment changes.
    pub fn defaults(&self) -> EnvDefaults {
        EnvDefaults {
            params_dir: self.param_cache.clone(),
            kernel_cache: self.kernel_cache.clone(),
            journal_dir: crate::config::default_journal_dir(self.state_directory.as_deref()),
        }
    }
}

/// `params.dir` set in the configuration file to another directory than
/// `FIL_PROOFS_PARAMETER_CACHE`: the key wins, and the operator is warned (not an error: the
/// daemon starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamsDirConflict {
    /// The directory the configuration file names (the one used).
    pub configured: PathBuf,
    /// The directory the environment names (ignored).
    pub env: PathBuf,
}

impl std::fmt::Display for ParamsDirConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "params.dir = {:?} (configuration file) and FIL_PROOFS_PARAMETER_CACHE={:?} name \
             different directories; using params.dir {:?}",
            self.configured, self.env, self.configured
        )
    }
}

/// The conflict between an explicit `params.dir` and `FIL_PROOFS_PARAMETER_CACHE`, if any.
pub fn params_dir_conflict(loaded: &Loaded, env: &Environment) -> Option<ParamsDirConflict> {
    let from_env = env.param_cache.as_ref()?;
    let configured = &loaded.config.params.dir;
    (loaded.explicit.contains("params.dir") && from_env != configured).then(|| ParamsDirConflict {
        configured: configured.clone(),
        env: from_env.clone(),
    })
}

/// Why the daemon could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Something other than a socket is at the socket path; it is never removed.
    #[error("refusing to use {path}: it is {what}, not a socket; remove it or change socket.path")]
    NotASocket {
        /// The socket path.
        path: PathBuf,
        /// What is there instead.
        what: &'static str,
    },
    /// Another process listens on the socket path.
    #[error("{0} is in use: another cuzkd is listening there")]
    InUse(PathBuf),
    /// `socket.group` names no group.
    #[error("socket.group: unknown group {0:?}")]
    UnknownGroup(String),
    /// Started as root without `daemon.allow_root`.
    #[error("refusing to run as root; run as an unprivileged user (the packaged unit uses `cuzk`) or set daemon.allow_root = true")]
    Root,
    /// The systemd-passed socket is unusable.
    #[error("socket activation: {0}")]
    Activation(String),
    /// Capabilities could not be read or dropped.
    #[error("capabilities: {0}")]
    Capabilities(String),
    /// No proving backend.
    #[error("backend: {0}")]
    Backend(String),
    /// The job journal's directory is unusable (`explicit`: named by `queue.journal_dir`,
    /// a configuration error).
    #[error("job journal (queue.journal_dir): {source}")]
    Journal {
        /// Whether the configuration named the directory.
        explicit: bool,
        /// Why it cannot be used.
        source: journal::JournalError,
    },
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// What connection handlers share.
pub struct Context {
    /// The effective configuration.
    pub config: Config,
    /// The job engine.
    pub engine: Arc<Engine>,
    /// The proving service (parameter cache, backend).
    pub service: Arc<ProvingService>,
    /// The backend's name.
    pub backend: String,
    /// How many devices are GPUs and how many CPUs (for Info).
    pub devices: DeviceCounts,
    /// Jobs in flight at once (`proving.workers` resolved).
    pub workers: usize,
    /// When the daemon started.
    pub started: Instant,
    /// Open connections.
    pub connections: AtomicUsize,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Connections refused (too many in all or for the peer's uid, or not allowed).
    pub connections_refused: AtomicU64,
    /// The connection limits of both sockets (`socket.max_connections`, and each uid's share).
    pub admission: admission::Admission,
    /// The daemon's own (effective) uid: an admin, like root and `socket.admin_uids`.
    pub own_uid: u32,
    /// The connections watching jobs (`Watch`), fed by the engine's observer.
    pub watchers: Arc<watchers::Hub>,
    /// The job journal's files, where there is a journal (for the metrics).
    pub journal: Option<Arc<journal::FileJournal>>,
    /// `protocol.input_memory`: room for inputs passed as file descriptors.
    pub input_memory: fdinput::InputMemory,
}

impl Context {
    /// Starts the engine on `service`, whose devices are `devices`, and assembles the shared
    /// state.
    pub fn new(
        config: Config,
        service: Arc<ProvingService>,
        devices: DeviceCounts,
        journal: Option<OpenJournal>,
    ) -> Result<Arc<Self>, DaemonError> {
        let (journal, journal_files) = journal.unzip();
        let workers = jobs_in_flight(&config);
        let engine_config = EngineConfig {
            workers,
            max_queued: config.queue.max_queued,
            critical_reserve: config.queue.critical_reserve,
            result_retention: config.queue.result_retention,
            max_finished: config.queue.max_finished,
        };
        let runner = Arc::new(service::ServiceRunner {
            service: service.clone(),
            delay: config.debug.job_delay,
            check_input: config.debug.check_input,
        });
        // Every job event is logged and handed to the job's watchers (if any).
        let watchers = Arc::new(watchers::Hub::default());
        let hub = watchers.clone();
        let observer = Arc::new(move |event: JobEvent| {
            hub.publish(&event);
            log_event(event);
        });
        let engine =
            Engine::start_with(engine_config, runner, observer, journal).map_err(|source| {
                DaemonError::Io {
                    context: "starting the workers".into(),
                    source,
                }
            })?;
        let input_memory =
            fdinput::InputMemory::new(config.protocol.input_memory, config.protocol.max_input_size);
        let admission = admission::Admission::new(config.socket.max_connections);
        Ok(Arc::new(Context {
            backend: service.backend_name(),
            devices,
            workers,
            config,
            engine: Arc::new(engine),
            service,
            started: Instant::now(),
            connections: AtomicUsize::new(0),
            connections_total: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            admission,
            own_uid: nix::unistd::geteuid().as_raw(),
            input_memory,
            watchers,
            journal: journal_files,
        }))
    }
}

/// How many of the proving devices are GPUs and how many the host's CPUs. Counted from the
/// backends when the service is built, since the service does not say which is which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Accelerators ([`Backend::is_accelerator`](crate::prover::Backend::is_accelerator)).
    pub gpus: usize,
    /// The others: CPU devices.
    pub cpus: usize,
}

impl DeviceCounts {
    /// The counts of `backends`.
    pub fn of(backends: &[Arc<dyn crate::prover::Backend>]) -> Self {
        let gpus = backends.iter().filter(|b| b.is_accelerator()).count();
        Self {
            gpus,
            cpus: backends.len() - gpus,
        }
    }
}

/// The stages' sizes: the configuration's, with 0 resolved against this host
/// (`host_memory`: its memory or cgroup limit, where known).
fn pipeline_options(config: &Config, host_memory: Option<u64>) -> PipelineOptions {
    let defaults = PipelineOptions::default();
    let p = &config.proving;
    PipelineOptions {
        synthesis_threads: match p.synthesis_threads {
            0 => defaults.synthesis_threads,
            n => n,
        },
        memory_budget: match (p.memory_budget, host_memory) {
            (0, Some(total)) => host::budget_from(total),
            (0, None) => defaults.memory_budget,
            (n, _) => n,
        },
        device_workers: p.device_workers.max(1),
        yield_to_critical: p.yield_to_critical,
        recorded_shapes: p.recorded_shapes,
        partition_threads: match p.partition_threads {
            0 => defaults.partition_threads,
            n => n,
        },
        health: HealthPolicy {
            quarantine_after: p.quarantine_after,
            quarantine_time: p.quarantine_time,
            max_backoff: crate::config::MAX_QUARANTINE,
        },
    }
}

/// Jobs in flight: `proving.workers`, or (0) enough that jobs of one partition keep every
/// synthesis thread and the device busy.
fn jobs_in_flight(config: &Config) -> usize {
    match config.proving.workers {
        0 => pipeline_options(config, None).synthesis_threads + 2,
        n => n,
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// Logs job starts (debug) and ends (info, with timings), with journald-friendly fields:
/// CUZK_JOB_ID, PROOF_KIND, MINER, SECTOR (PoRep) and JOB_PRIORITY. The job id is not called
/// JOB_ID because systemd itself writes that field on its unit-job messages (so
/// `journalctl JOB_ID=7` would match those too), and the priority class is not called
/// PRIORITY because journald reserves that field for the syslog level that `journalctl -p`
/// filters on.
fn log_event(event: JobEvent) {
    match event {
        JobEvent::Started(s) => tracing::debug!(
            cuzk_job_id = s.id,
            proof_kind = %s.kind,
            miner = s.miner,
            sector = s.sector,
            job_priority = s.priority.as_str(),
            queue_wait_ms = ms(s.age),
            "job started"
        ),
        JobEvent::Finished(s, result) => log_finished(&s, &result),
        // The stages log partitions at debug level themselves; watchers get the steps.
        JobEvent::Progress(_) => {}
    }
}

fn log_finished(s: &JobSnapshot, result: &JobResult) {
    match result {
        Ok(out) => {
            let t = &out.timings;
            tracing::info!(
                cuzk_job_id = s.id,
                proof_kind = %s.kind,
                miner = s.miner,
                sector = s.sector,
                job_priority = s.priority.as_str(),
                outcome = "succeeded",
                queue_wait_ms = ms(t.queue_wait),
                param_load_ms = ms(t.param_load),
                synthesis_ms = ms(t.synthesis),
                proving_ms = ms(t.proving),
                verification_ms = ms(t.verification),
                total_ms = ms(t.total),
                partitions = out.output.partitions,
                backend = %out.output.backend,
                "job finished"
            );
        }
        Err(f) => tracing::info!(
            cuzk_job_id = s.id,
            proof_kind = %s.kind,
            miner = s.miner,
            sector = s.sector,
            job_priority = s.priority.as_str(),
            outcome = s.state.as_str(),
            total_ms = ms(s.age),
            error = %f.message,
            "job finished"
        ),
    }
}

/// A configuration read for cuzkd: the effective values, and an explicit `params.dir` that
/// disagrees with `FIL_PROOFS_PARAMETER_CACHE`, if any.
pub struct Startup {
    /// The effective configuration.
    pub config: Config,
    /// The disagreement to warn about.
    pub conflict: Option<ParamsDirConflict>,
    /// Whether the configuration file named the journal directory (`queue.journal_dir`)
    /// rather than taking the state directory's: an unusable one is then a configuration
    /// error (exit 78) instead of a warning.
    pub journal_explicit: bool,
}

/// Reads cuzkd's configuration file over the defaults its environment gives. An error is a
/// configuration error: `src/bin/cuzkd.rs` prints it and exits with [`crate::config::EXIT_CONFIG`].
pub fn load(args: &cli::Args, env: &Environment) -> Result<Startup, crate::config::ConfigError> {
    let loaded = Config::load_over(args.config.as_deref(), &env.defaults())?;
    // A group that does not exist would fail only when the socket is made (exit 1, and
    // systemd restarting the unit every few seconds): a configuration error, said here.
    if let Some(group) = &loaded.config.socket.group {
        if listener::resolve_group(group).is_err() {
            return Err(crate::config::ConfigError::InvalidValue {
                key: "socket.group".into(),
                message: format!("no group named {group:?} on this host"),
            });
        }
    }
    let conflict = params_dir_conflict(&loaded, env);
    let journal_explicit = loaded.explicit.contains("queue.journal_dir")
        && loaded.config.queue.journal_dir != env.defaults().journal_dir;
    Ok(Startup {
        config: loaded.config,
        conflict,
        journal_explicit,
    })
}

/// Runs cuzkd with a configuration [`load`] read: exit 0 after a clean stop, 1 otherwise.
pub fn serve(startup: Startup, env: Environment) -> ExitCode {
    let Startup {
        config,
        conflict,
        journal_explicit,
    } = startup;
    logging::init(&config.daemon.log_level, &env);
    if let Some(c) = conflict {
        tracing::warn!(
            params_dir = %c.configured.display(),
            fil_proofs_parameter_cache = %c.env.display(),
            "{c}"
        );
    }
    match run(config, &env, journal_explicit) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ DaemonError::Journal { explicit: true, .. }) => {
            tracing::error!("cannot run: {e}");
            ExitCode::from(crate::config::EXIT_CONFIG)
        }
        Err(e) => {
            tracing::error!("cannot run: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT and the drain that follows.
fn run(config: Config, env: &Environment, journal_explicit: bool) -> Result<(), DaemonError> {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        pid = std::process::id(),
        "cuzkd starting"
    );
    privileges::check_root(&config)?;
    let watchdog =
        notify::watchdog_interval(env.watchdog_usec.as_deref(), env.watchdog_pid.as_deref());
    let notifier = Notifier::new(env.notify_socket.as_deref());
    let activated = listener::take_activated()?;
    let listener = match activated.main {
        Some(socket) => Listener {
            socket,
            origin: SocketOrigin::Activated,
        },
        None => {
            let socket = listener::bind(&config.socket)?;
            let path = config.socket.path.clone();
            let id = listener::file_id(&path);
            Listener {
                socket,
                origin: SocketOrigin::Bound(path, id),
            }
        }
    };
    let grpc = match grpc_listener(&config, activated.grpc) {
        Ok(grpc) => grpc,
        Err(e) => {
            listener::remove_socket_file(&listener.origin);
            return Err(e);
        }
    };
    let Listener { socket, origin } = listener;
    let (grpc_socket, grpc_origin) = grpc.map(|l| (l.socket, l.origin)).unzip();
    let result = run_bound(
        config,
        socket,
        grpc_socket,
        watchdog,
        notifier,
        journal_explicit,
    );
    listener::remove_socket_file(&origin);
    if let Some(origin) = grpc_origin {
        listener::remove_socket_file(&origin);
    }
    result
}

/// The gRPC endpoint's socket where `grpc.enabled`: systemd's, or bound at `grpc.path`
/// (with `grpc.mode` and `socket.group`). One systemd passes while it is off is closed.
fn grpc_listener(
    config: &Config,
    activated: Option<std::os::unix::net::UnixListener>,
) -> Result<Option<Listener>, DaemonError> {
    if !config.grpc.enabled {
        if activated.is_some() {
            tracing::warn!(
                "systemd passed the gRPC socket but grpc.enabled is false: not serving it \
                 (set grpc.enabled = true, or disable cuzkd-grpc.socket)"
            );
        }
        return Ok(None);
    }
    if let Some(socket) = activated {
        return Ok(Some(Listener {
            socket,
            origin: SocketOrigin::Activated,
        }));
    }
    let socket_config = crate::config::SocketConfig {
        path: config.grpc.path.clone(),
        mode: config.grpc.mode,
        ..config.socket.clone()
    };
    let socket = listener::bind(&socket_config)?;
    let id = listener::file_id(&socket_config.path);
    Ok(Some(Listener {
        socket,
        origin: SocketOrigin::Bound(socket_config.path, id),
    }))
}

fn run_bound(
    config: Config,
    socket: std::os::unix::net::UnixListener,
    grpc: Option<std::os::unix::net::UnixListener>,
    watchdog: Option<Duration>,
    notifier: Notifier,
    journal_explicit: bool,
) -> Result<(), DaemonError> {
    privileges::drop_capabilities(&config)?;
    // Before the service: a journal named in the configuration that cannot be used stops the
    // start at once (78), without loading a backend first.
    let journal = open_journal(&config, journal_explicit)?;
    let (service, devices) = start_service(&config)?;
    let ctx = Context::new(config, service, devices, journal)?;
    let io = |context: &str| {
        let context = context.to_owned();
        move |source| DaemonError::Io { context, source }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cuzkd-io")
        .build()
        .map_err(io("starting the runtime"))?;
    runtime.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        socket
            .set_nonblocking(true)
            .map_err(io("configuring the socket"))?;
        let socket =
            tokio::net::UnixListener::from_std(socket).map_err(io("registering the socket"))?;
        let grpc = match grpc {
            Some(g) => {
                g.set_nonblocking(true)
                    .map_err(io("configuring the gRPC socket"))?;
                Some(
                    tokio::net::UnixListener::from_std(g)
                        .map_err(io("registering the gRPC socket"))?,
                )
            }
            None => None,
        };
        let mut term =
            signal(SignalKind::terminate()).map_err(io("installing the SIGTERM handler"))?;
        let mut int =
            signal(SignalKind::interrupt()).map_err(io("installing the SIGINT handler"))?;
        let line = notify::status_line(&ctx.engine, &ctx.service);
        notifier.send(&[NotifyState::Ready, NotifyState::Status(&line)]);
        tracing::info!(backend = %ctx.backend, "ready");
        tokio::spawn(notify::status_loop(
            notifier.clone(),
            ctx.engine.clone(),
            ctx.service.clone(),
        ));
        if let Some(interval) = watchdog {
            tokio::spawn(notify::watchdog_loop(
                notifier.clone(),
                ctx.engine.clone(),
                interval,
            ));
        }
        tokio::spawn(reap_loop(ctx.engine.clone()));
        let force = Arc::new(AtomicBool::new(false));
        let force_on_second = force.clone();
        let stopping = notifier.clone();
        let shutdown = async move {
            let name = tokio::select! { _ = term.recv() => "SIGTERM", _ = int.recv() => "SIGINT" };
            tracing::info!(signal = name, "stopping");
            stopping.send(&[
                NotifyState::Stopping,
                NotifyState::Status("stopping: draining"),
            ]);
            // A second signal skips the rest of the drain grace.
            tokio::spawn(async move {
                tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                tracing::warn!("second signal: cancelling running jobs now");
                force_on_second.store(true, Ordering::SeqCst);
            });
        };
        server::serve(ctx, socket, grpc, shutdown, force, notifier).await;
        Ok::<(), DaemonError>(())
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    tracing::info!("stopped");
    Ok(())
}

/// An opened job journal: what the engine starts with, and the files (for the metrics).
pub type OpenJournal = (crate::engine::journal::Journal, Arc<journal::FileJournal>);

/// Opens the job journal where there is one (see `queue.journal_dir`), and logs what it took
/// up. A directory the configuration named that cannot be used is an error; the state
/// directory's costs a warning and the daemon runs without a journal.
fn open_journal(config: &Config, explicit: bool) -> Result<Option<OpenJournal>, DaemonError> {
    let q = &config.queue;
    let Some(dir) = q.journal_dir.clone() else {
        tracing::info!(
            "no job journal (neither queue.journal_dir nor systemd's StateDirectory=): queued \
             and running jobs do not survive a restart"
        );
        return Ok(None);
    };
    if q.journal_max_size == 0 {
        tracing::info!("no job journal (queue.journal_max_size = 0)");
        return Ok(None);
    }
    let options = journal::Options {
        dir: dir.clone(),
        max_bytes: q.journal_max_size,
        retention: q.result_retention,
        max_finished: q.max_finished,
    };
    match journal::open(options, std::time::SystemTime::now()) {
        Ok((journal, report, files)) => {
            for j in &journal.jobs {
                if let crate::engine::journal::RecoveredState::Queued(_) = j.state {
                    tracing::info!(
                        cuzk_job_id = j.id,
                        proof_kind = %j.kind,
                        miner = j.miner,
                        sector = j.sector,
                        job_priority = j.priority.as_str(),
                        uid = j.owner,
                        was_running = j.was_running,
                        "job queued again from the journal"
                    );
                }
            }
            tracing::info!(
                dir = %dir.display(),
                requeued = report.requeued,
                were_running = report.were_running,
                lost = report.lost,
                results = report.results,
                skipped = report.skipped,
                next_job_id = report.next_id,
                bytes = report.bytes,
                "job journal opened"
            );
            Ok(Some((journal, files)))
        }
        Err(source) if explicit => Err(DaemonError::Journal {
            explicit: true,
            source,
        }),
        Err(e) => {
            tracing::warn!(
                dir = %dir.display(),
                "job journal not usable: {e}; running without one (queued and running jobs \
                 will not survive a restart)"
            );
            Ok(None)
        }
    }
}

/// Sizes the stages, selects the backend and opens the parameter cache.
fn start_service(config: &Config) -> Result<(Arc<ProvingService>, DeviceCounts), DaemonError> {
    let pipeline = pipeline_options(config, host::memory());
    // The options, built once from the configuration; nothing later reads another source.
    let (gpu, cpu) = (
        GpuOptions::from_config(config),
        CpuOptions::from_config(config),
    );
    tracing::debug!(?gpu, ?cpu, "proving options");
    let backends = service::select_devices(&config.proving, &gpu, cpu.clone())?;
    let backends = service::inject_faults(backends, &config.debug.fault)?;
    let placement = service::placement(
        Path::new("/sys"),
        &backends,
        pipeline.synthesis_threads,
        config.proving.numa,
    );
    tracing::info!(placement = %placement, "NUMA placement");
    let counts = DeviceCounts::of(&backends);
    let devices = backends
        .into_iter()
        .enumerate()
        .map(|(i, backend)| Device {
            backend,
            cpus: placement
                .device_cpus(i)
                .map(<[usize]>::to_vec)
                .unwrap_or_default(),
        })
        .collect::<Vec<_>>();
    let pinned = pinned_pool(
        config.proving.pinned_memory,
        pipeline.memory_budget,
        &devices,
    );
    let dir = &config.params.dir;
    match crate::srs::list_param_dir(dir, &crate::proofs::registry::known_params()) {
        Ok(found) => tracing::info!(dir = %dir.display(), files = found.len(), "parameter cache"),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "parameter cache not readable: {e}; proofs will fail until it is")
        }
    }
    let service = ProvingService::with_devices(dir.clone(), devices, &pipeline)
        .map_err(|source| DaemonError::Io {
            context: "starting the device workers".into(),
            source,
        })?
        .with_placement(placement)
        .with_fallback(Arc::new(crate::prover::cpu::CpuBackend::fallback(cpu)));
    let service = match pinned {
        Some(pool) => service.with_pinned_pool(pool),
        None => service,
    };
    // The budget is a cap on the process: admission also waits for its measured memory.
    service.measure_memory_with(Box::new(host::resident));
    if let Some(path) = &config.debug.trace_file {
        match trace::open(path) {
            Ok(observer) => {
                service.observe_stages(observer);
                tracing::info!(path = %path.display(), "writing the stage trace");
            }
            Err(e) => tracing::warn!(path = %path.display(), "cannot write the stage trace: {e}"),
        }
    }
    tracing::info!(
        backend = %service.backend_name(),
        synthesis_threads = pipeline.synthesis_threads,
        device_workers = pipeline.device_workers,
        memory_budget = pipeline.memory_budget,
        "proving backend initialised"
    );
    Ok((Arc::new(service), counts))
}

/// The pool of page-locked memory partitions are copied into for the GPUs: `bytes` of it
/// (at most half the memory budget, which counts all of it) where one of `devices` uploads
/// from such memory, else none.
fn pinned_pool(bytes: u64, budget: u64, devices: &[Device]) -> Option<PinnedPool> {
    if bytes == 0 {
        return None;
    }
    let bytes = if bytes > budget / 2 {
        tracing::warn!(
            pinned_memory = bytes,
            memory_budget = budget,
            "proving.pinned_memory is more than half of the memory budget, which counts all \
             of it: the pool gets half"
        );
        budget / 2
    } else {
        bytes
    };
    let alloc = devices.iter().find_map(|d| d.backend.host_allocator());
    if alloc.is_none() {
        tracing::info!("proving.pinned_memory is set but no device uploads from it");
    }
    alloc.map(|alloc| PinnedPool::new(bytes, alloc))
}

/// Drops expired results even when no one submits.
async fn reap_loop(engine: Arc<Engine>) {
    let period =
        (engine.retention() / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        tokio::time::sleep(period).await;
        engine.reap();
    }
}

/// A daemon running inside this process on its own threads (for `cuzk demo` and tests):
/// the same engine, protocol and drain as `cuzkd`, without signals or systemd.
pub struct InProcess {
    socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcess {
    /// Binds `config.socket.path` and serves it with `service`, whose devices are
    /// `devices`.
    pub fn start(
        config: Config,
        service: Arc<ProvingService>,
        devices: DeviceCounts,
    ) -> Result<Self, DaemonError> {
        let socket_path = config.socket.path.clone();
        let std_listener = listener::bind(&config.socket)?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| DaemonError::Io {
                context: "configuring the socket".into(),
                source,
            })?;
        let ctx = Context::new(config, service, devices, None)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| DaemonError::Io {
                context: "starting the runtime".into(),
                source,
            })?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("cuzk-daemon".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(socket) = tokio::net::UnixListener::from_std(std_listener) else {
                        tracing::error!("cannot register the socket");
                        return;
                    };
                    let shutdown = async move {
                        let _ = stop_rx.await;
                    };
                    let force = Arc::new(AtomicBool::new(false));
                    server::serve(ctx, socket, None, shutdown, force, Notifier::new(None)).await;
                })
            })
            .map_err(|source| DaemonError::Io {
                context: "starting the daemon thread".into(),
                source,
            })?;
        Ok(Self {
            socket: socket_path,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The socket path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Drains and stops the daemon, and removes its socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.shutdown();
    }
}
