//! The table of configuration keys: the single place where each key's type, default and
//! meaning are written down. Man pages and the packaged example configuration should be
//! generated from [`KEYS`] (see `cuzkd --check-config` and [`KeyDoc`]).

use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::units::{format_duration, format_size, parse_duration, parse_size};
use super::{
    BackendChoice, Config, ConfigError, DaemonConfig, DebugConfig, ParamsConfig, ProtocolConfig,
    ProvingConfig, QueueConfig, SocketConfig,
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
                      An existing file there is replaced only if it is a stale socket.",
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
                      allowed_gids are both empty, anyone the file permissions let in may connect.",
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
        name: "socket.max_connections",
        kind: "integer",
        default: "64",
        description: "Connections served at once; one more is answered \"busy\" and closed.",
        apply: |c, v| {
            c.socket.max_connections = integer(v, 1, 65_536)?;
            Ok(())
        },
        show: |c| Value::Integer(c.socket.max_connections as i64),
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
        description: "How long a new connection may take to send Hello before it is closed.",
        apply: |c, v| {
            c.protocol.hello_timeout = nonzero_duration(v)?;
            Ok(())
        },
        show: |c| Value::String(format_duration(c.protocol.hello_timeout)),
    },
    KeyDoc {
        name: "params.dir",
        kind: "path",
        default: "\"/var/tmp/filecoin-proof-parameters\"",
        description: "Parameter cache: the directory of the .params/.vk files.",
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
        name: "proving.workers",
        kind: "integer",
        default: "1",
        description:
            "Proofs run at once. One is right for one GPU: a proof already uses every core.",
        apply: |c, v| {
            c.proving.workers = integer(v, 1, 64)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.workers as i64),
    },
    KeyDoc {
        name: "proving.synthesis_threads",
        kind: "integer",
        default: "0",
        description:
            "Threads for circuit synthesis and CPU proving (the rayon pool); 0 = one per CPU.",
        apply: |c, v| {
            c.proving.synthesis_threads = integer(v, 0, 4096)?;
            Ok(())
        },
        show: |c| Value::Integer(c.proving.synthesis_threads as i64),
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
        name: "proving.pinned_memory",
        kind: "size",
        default: "\"0\"",
        description: "Host memory the GPU backend pins (at least its two 32 MiB upload \
                      staging buffers per device; where they are refused, uploads from \
                      pageable memory go through the driver, more slowly). CAP_IPC_LOCK is kept only when this exceeds \
                      RLIMIT_MEMLOCK; every other capability is dropped at start.",
        apply: |c, v| {
            c.proving.pinned_memory = size(v)?;
            Ok(())
        },
        show: |c| Value::String(format_size(c.proving.pinned_memory)),
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
            c.daemon.allow_root = v.as_bool().ok_or("expected true or false")?;
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
            max_connections: 0,
        },
        protocol: ProtocolConfig {
            max_frame_size: 0,
            hello_timeout: Duration::ZERO,
        },
        params: ParamsConfig {
            dir: PathBuf::new(),
        },
        queue: QueueConfig {
            max_queued: 0,
            critical_reserve: 0,
            result_retention: Duration::ZERO,
            max_finished: 0,
        },
        proving: ProvingConfig {
            workers: 0,
            synthesis_threads: 0,
            backend: BackendChoice::Auto,
            pinned_memory: 0,
        },
        daemon: DaemonConfig {
            drain_grace: Duration::ZERO,
            allow_root: false,
            log_level: String::new(),
        },
        debug: DebugConfig {
            job_delay: Duration::ZERO,
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

/// Applies a parsed document to `config`, rejecting unknown sections and keys.
pub(super) fn apply_table(config: &mut Config, table: &toml::Table) -> Result<(), ConfigError> {
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
            let key =
                KEYS.iter()
                    .find(|k| k.name == dotted)
                    .ok_or_else(|| ConfigError::UnknownKey {
                        key: dotted.clone(),
                    })?;
            (key.apply)(config, value).map_err(|message| ConfigError::InvalidValue {
                key: dotted,
                message,
            })?;
        }
    }
    Ok(())
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

fn duration(v: &Value) -> Result<Duration, String> {
    match v {
        Value::String(s) => parse_duration(s),
        Value::Integer(0) => Ok(Duration::ZERO),
        other => Err(format!(
            "expected a duration such as \"30s\", \"5m\" or \"1h\", found {}",
            other.type_str()
        )),
    }
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
        Value::Integer(n) => u32::try_from(*n).map_err(|_| format!("{n} is not a mode"))?,
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

fn id_list(v: &Value) -> Result<Vec<u32>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected an array, found {}", v.type_str()))?;
    items
        .iter()
        .map(|i| {
            i.as_integer()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{i} is not a uid/gid"))
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
