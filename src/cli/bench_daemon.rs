//! What the daemon benchmarks (`cuzk bench pipeline`, `cuzk bench soak`) share: a real
//! `cuzkd` child on a temporary socket with the default configuration and `--set` keys, the
//! sealed sample's inputs, and the daemon's memory and descriptors read from `/proc`.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};

use crate::proto::{Client, ProofInput, Submit};

/// The daemon and its inputs, shared by the daemon benchmarks.
#[derive(Debug, clap::Args)]
pub struct DaemonFlags {
    /// Inputs made by `cuzk sample` (c1.json, winning-post.json).
    #[arg(long, default_value = "/tmp/s")]
    pub sample: PathBuf,
    /// Miner id and sector number the sample was sealed for.
    #[arg(long, default_value_t = 1000)]
    pub miner_id: u64,
    /// The sample's sector number.
    #[arg(long, default_value_t = 1)]
    pub sector_number: u64,
    /// The daemon to start [default: cuzkd next to this cuzk].
    #[arg(long)]
    pub daemon: Option<PathBuf>,
    /// A configuration key for the daemon, `section.key=<TOML value>` (repeatable); the
    /// default configuration otherwise.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl DaemonFlags {
    /// The daemon's executable: `--daemon`, else `cuzkd` next to this `cuzk`.
    pub fn exe(&self) -> anyhow::Result<PathBuf> {
        match &self.daemon {
            Some(p) => Ok(p.clone()),
            None => std::env::current_exe()?
                .parent()
                .map(|d| d.join("cuzkd"))
                .ok_or_else(|| anyhow!("cannot locate cuzkd; pass --daemon")),
        }
    }

    /// The sample's PoRep C1 output and WinningPoSt input.
    pub fn inputs(&self) -> anyhow::Result<Inputs> {
        let read = |name: &str| {
            let path = self.sample.join(name);
            std::fs::read(&path)
                .with_context(|| format!("{}: run `cuzk sample` first", path.display()))
        };
        Ok(Inputs {
            c1: Arc::new(read("c1.json")?),
            winning: Arc::new(read("winning-post.json")?),
            miner_id: self.miner_id,
            sector_number: self.sector_number,
        })
    }
}

/// A sealed sample's inputs.
#[derive(Clone)]
pub struct Inputs {
    c1: Arc<Vec<u8>>,
    winning: Arc<Vec<u8>>,
    miner_id: u64,
    sector_number: u64,
}

impl Inputs {
    /// The sample's PoRep C2.
    pub fn porep(&self) -> Submit {
        submit(ProofInput::PoRep {
            c1: self.c1.as_ref().clone(),
            miner_id: self.miner_id,
            sector_number: Some(self.sector_number),
        })
    }

    /// The sample's WinningPoSt.
    pub fn winning(&self) -> Submit {
        submit(ProofInput::WinningPoSt {
            input: self.winning.as_ref().clone(),
        })
    }
}

fn submit(input: ProofInput) -> Submit {
    Submit {
        request_id: None,
        priority: None,
        input,
    }
}

/// A started daemon, stopped (SIGTERM, then waited for) when dropped, and sent SIGTERM by
/// the kernel when the benchmark's process dies without dropping it.
pub struct Daemon {
    child: Child,
    socket: PathBuf,
    /// The name its clients give in Hello.
    client_name: &'static str,
    /// Its socket, configuration and log; removed when the daemon is stopped.
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Daemon {
    /// Starts `exe` with parameters `params` and the `--set` keys `set`, in a directory of
    /// its own named after `client_name` (`cuzk-bench-pipeline`: `/tmp/cuzk-bench-pipeline-<pid>`);
    /// returns once its socket exists.
    pub fn start(
        exe: &Path,
        params: &Path,
        set: &[String],
        client_name: &'static str,
    ) -> anyhow::Result<Self> {
        let dir = Self::dir_for(client_name);
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("cuzk.sock");
        let config = dir.join("cuzk.toml");
        std::fs::write(&config, config_text(&socket, params, set)?)?;
        let log = std::fs::File::create(dir.join("cuzkd.log"))?;
        let mut command = Command::new(exe);
        command
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: runs in the forked child before exec; prctl(PR_SET_PDEATHSIG) is
        // async-signal-safe and changes only the child's own death signal: when this
        // benchmark dies (^C, a kill, a panic that aborts), the daemon gets SIGTERM and
        // drains instead of running on with nobody to stop it.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                    .map_err(std::io::Error::from)
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut daemon = Self {
            child,
            socket,
            client_name,
            dir,
        };
        let start = Instant::now();
        while !daemon.socket.exists() {
            if let Some(status) = daemon.child.try_wait()? {
                bail!(
                    "{} exited at start ({status}):\n{}",
                    exe.display(),
                    daemon.log_tail()
                );
            }
            if start.elapsed() > Duration::from_secs(120) {
                bail!("{} did not open its socket within 120 s", exe.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    /// The directory [`Daemon::start`] gives a daemon started for `client_name`.
    pub fn dir_for(client_name: &str) -> PathBuf {
        PathBuf::from(format!("/tmp/{client_name}-{}", std::process::id()))
    }

    /// The daemon's exit status, if it has exited.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last 2000 characters of the daemon's log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("cuzkd.log")).unwrap_or_default();
        let skip = log.chars().count().saturating_sub(2000);
        log.chars().skip(skip).collect()
    }

    /// How many lines of the daemon's log contain `needle` (read in full: for the end of a
    /// run).
    pub fn log_count(&self, needle: &str) -> usize {
        std::fs::read_to_string(self.dir.join("cuzkd.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// The size of the daemon's log so far.
    pub fn log_bytes(&self) -> u64 {
        std::fs::metadata(self.dir.join("cuzkd.log")).map_or(0, |m| m.len())
    }

    /// A client of the daemon, past Hello; answers may take minutes under load.
    pub fn client(&self) -> anyhow::Result<Client> {
        connect(&self.socket, self.client_name)
    }

    /// The daemon's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Fails when the daemon has exited, with its status and log.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("cuzkd exited ({status}):\n{}", self.log_tail());
        }
        Ok(())
    }

    /// The daemon's peak resident set size so far.
    pub fn peak_rss(&self) -> Option<u64> {
        super::rss::peak_rss_of(&self.child.id().to_string())
    }

    /// The daemon's resident set size now (`VmRSS`), in bytes.
    pub fn rss(&self) -> Option<u64> {
        super::rss::status_bytes(&self.child.id().to_string(), "VmRSS:")
    }

    /// The daemon's open file descriptors now (the entries of `/proc/<pid>/fd`).
    pub fn open_fds(&self) -> anyhow::Result<usize> {
        let dir = format!("/proc/{}/fd", self.child.id());
        let entries = std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))?;
        Ok(entries.filter(|e| e.is_ok()).count())
    }
}

/// A client of the daemon at `socket`, past Hello as `client_name`; answers may take
/// minutes under load.
pub fn connect(socket: &Path, client_name: &str) -> anyhow::Result<Client> {
    Ok(Client::connect_with(
        socket,
        client_name,
        Some(Duration::from_secs(600)),
    )?)
}

/// The daemon's configuration: its socket and parameters, then the `--set` keys by section.
pub fn config_text(socket: &Path, params: &Path, set: &[String]) -> anyhow::Result<String> {
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add =
        |section: &str, line: String| sections.entry(section.to_string()).or_default().push(line);
    add(
        "socket",
        format!("path = {:?}", socket.display().to_string()),
    );
    add(
        "params",
        format!("dir = {:?}", params.display().to_string()),
    );
    add("daemon", "allow_root = true".into());
    add("queue", "max_queued = 4096".into());
    for kv in set {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {kv}: expected section.key=value"))?;
        let (section, key) = key
            .trim()
            .split_once('.')
            .ok_or_else(|| anyhow!("--set {kv}: expected section.key=value"))?;
        add(section, format!("{key} = {}", value.trim()));
    }
    let mut out = String::new();
    for (section, lines) in sections {
        out += &format!("[{section}]\n{}\n", lines.join("\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_groups_keys_by_section() {
        let set = [
            "proving.workers=4".to_string(),
            "proving.backend=\"cpu\"".into(),
        ];
        let text = config_text(Path::new("/s"), Path::new("/p"), &set).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        assert_eq!(doc["proving"]["workers"].as_integer(), Some(4));
        assert_eq!(doc["proving"]["backend"].as_str(), Some("cpu"));
        assert_eq!(doc["socket"]["path"].as_str(), Some("/s"));
        assert!(config_text(Path::new("/s"), Path::new("/p"), &["x".into()]).is_err());
    }
}
