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
    /// Connections served at once; more are answered "busy" and closed.
    pub max_connections: usize,
}

/// Wire-protocol limits.
#[derive(Clone, Debug, PartialEq)]
pub struct ProtocolConfig {
    /// Largest frame (payload bytes, without the 4-byte length) accepted or sent.
    pub max_frame_size: u32,
    /// How long a new connection may take to say Hello.
    pub hello_timeout: Duration,
}

/// The parameter cache.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamsConfig {
    /// Directory of the `.params`/`.vk` files.
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
}

/// The proving workers.
#[derive(Clone, Debug, PartialEq)]
pub struct ProvingConfig {
    /// Proofs run at once.
    pub workers: usize,
    /// Threads for circuit synthesis and CPU proving; 0 = one per CPU.
    pub synthesis_threads: usize,
    /// Backend selection.
    pub backend: BackendChoice,
    /// Host memory the GPU backend pins; decides whether `CAP_IPC_LOCK` is kept.
    pub pinned_memory: u64,
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

/// Testing aids; never set in production.
#[derive(Clone, Debug, PartialEq)]
pub struct DebugConfig {
    /// A cancellable pause at the start of every job, before proving.
    pub job_delay: Duration,
}

/// The complete effective configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[socket]`
    pub socket: SocketConfig,
    /// `[protocol]`
    pub protocol: ProtocolConfig,
    /// `[params]`
    pub params: ParamsConfig,
    /// `[queue]`
    pub queue: QueueConfig,
    /// `[proving]`
    pub proving: ProvingConfig,
    /// `[daemon]`
    pub daemon: DaemonConfig,
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

impl Config {
    /// Parses a configuration document over the built-in defaults.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    message: e.to_string(),
                })?;
        let mut config = Config::default();
        keys::apply_table(&mut config, &table)?;
        config.validate()?;
        Ok(config)
    }

    /// Loads `path`, or the built-in defaults when `path` is `None` and the default file
    /// does not exist.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let (path, explicit) = match path {
            Some(p) => (p.to_owned(), true),
            None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_toml_str(&text, &path),
            Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::default())
            }
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
        if self.socket.path.as_os_str().is_empty() {
            return Err(invalid("socket.path", "must not be empty"));
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
            "[socket]\nmode = \"0600\"\ngroup = \"cuzk\"\nallowed_uids = [1000, 1001]\n\
             [queue]\nresult_retention = \"1h\"\n[protocol]\nmax_frame_size = \"16MiB\"\n\
             [daemon]\ndrain_grace = \"30s\"\n[proving]\npinned_memory = \"64GiB\"\n",
        )
        .unwrap();
        assert_eq!(c.socket.mode, 0o600);
        assert_eq!(c.socket.group.as_deref(), Some("cuzk"));
        assert_eq!(c.socket.allowed_uids, vec![1000, 1001]);
        assert_eq!(c.queue.result_retention, Duration::from_secs(3600));
        assert_eq!(c.protocol.max_frame_size, 16 << 20);
        assert_eq!(c.daemon.drain_grace, Duration::from_secs(30));
        assert_eq!(c.proving.pinned_memory, 64 << 30);
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
