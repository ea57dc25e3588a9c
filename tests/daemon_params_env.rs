//! `cuzkd` honours `FIL_PROOFS_PARAMETER_CACHE` as every Filecoin tool does: it is the default
//! of `params.dir`; a `params.dir` the configuration file sets wins, and a conflict between the
//! two is logged with both directories. Runs the real binary.

mod daemon_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use daemon_support::{wait_exit, ConfigBuilder, Daemon, Env, CUZKD};
use nix::sys::signal::Signal;

/// The test configuration of `env` without `params.dir`: socket, quick drain, root allowed
/// where the tests run as root.
fn config_without_params_dir(env: &Env) -> ConfigBuilder {
    let root = nix::unistd::geteuid().is_root();
    ConfigBuilder::default()
        .set("daemon.allow_root", if root { "true" } else { "false" })
        .set(
            "socket.path",
            &format!("{:?}", env.socket.display().to_string()),
        )
        .set("daemon.drain_grace", "\"30s\"")
        .set("daemon.log_level", "\"info\"")
        .set("proving.backend", "\"cpu\"")
}

/// `cuzkd --check-config` for `config` with `FIL_PROOFS_PARAMETER_CACHE=dir`: (success, the
/// printed configuration, stderr).
fn check_config(env: &Env, config: &ConfigBuilder, dir: &Path) -> (bool, toml::Table, String) {
    let path = env.write_config(config);
    let out = Command::new(CUZKD)
        .arg("--check-config")
        .arg("--config")
        .arg(&path)
        .env("FIL_PROOFS_PARAMETER_CACHE", dir)
        .stdin(Stdio::null())
        .output()
        .expect("run cuzkd --check-config");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let printed: toml::Table = stdout.parse().expect("prints TOML");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), printed, stderr)
}

fn params_dir(printed: &toml::Table) -> &str {
    printed["params"]["dir"].as_str().expect("params.dir")
}

/// Starts cuzkd on `config` with `FIL_PROOFS_PARAMETER_CACHE=dir`, waits for READY=1, stops it
/// and returns what it logged.
fn run_daemon(env: Env, config: &ConfigBuilder, dir: &Path) -> String {
    let mut cmd = env.command(config);
    cmd.env("FIL_PROOFS_PARAMETER_CACHE", dir);
    let mut child = cmd.spawn().expect("spawn cuzkd");
    let startup = env.wait_notify("READY=1", Duration::from_secs(60), &mut child);
    let mut daemon = Daemon {
        env,
        child,
        startup,
    };
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{}", daemon.env.stderr());
    daemon.env.stderr()
}

#[test]
fn the_variable_is_the_default_parameter_directory() {
    let env = Env::new();
    let dir = env.dir.path().join("zk-params");
    std::fs::create_dir(&dir).unwrap();
    let config = config_without_params_dir(&env);

    let (ok, printed, stderr) = check_config(&env, &config, &dir);
    assert!(ok, "{stderr}");
    assert_eq!(params_dir(&printed), dir.to_str().unwrap());
    assert!(!stderr.contains("warning"), "{stderr}");

    // The daemon itself opens that directory as its parameter cache.
    let log = run_daemon(env, &config, &dir);
    assert!(
        log.contains("parameter cache") && log.contains(&format!("dir={}", dir.display())),
        "{log}"
    );
    assert!(!log.contains("FIL_PROOFS_PARAMETER_CACHE="), "{log}");
}

#[test]
fn an_explicit_params_dir_wins_and_a_conflict_is_logged() {
    let env = Env::new();
    let configured = env.dir.path().join("configured");
    let from_env = env.dir.path().join("from-env");
    for d in [&configured, &from_env] {
        std::fs::create_dir(d).unwrap();
    }
    let config = config_without_params_dir(&env).set(
        "params.dir",
        &format!("{:?}", configured.display().to_string()),
    );

    let (ok, printed, stderr) = check_config(&env, &config, &from_env);
    assert!(ok, "{stderr}");
    assert_eq!(params_dir(&printed), configured.to_str().unwrap());
    for needle in [
        "warning",
        configured.to_str().unwrap(),
        from_env.to_str().unwrap(),
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in {stderr}");
    }

    let log = run_daemon(env, &config, &from_env);
    let warning = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("FIL_PROOFS_PARAMETER_CACHE"))
        .unwrap_or_else(|| panic!("no warning about the conflict in {log}"));
    assert!(
        warning.contains(configured.to_str().unwrap())
            && warning.contains(from_env.to_str().unwrap()),
        "{warning}"
    );
    assert!(
        log.contains(&format!("dir={}", configured.display())),
        "the configured directory is used: {log}"
    );
}

#[test]
fn the_same_directory_twice_is_no_conflict() {
    let env = Env::new();
    let dir = env.dir.path().join("params");
    std::fs::create_dir(&dir).unwrap();
    let config = config_without_params_dir(&env)
        .set("params.dir", &format!("{:?}", dir.display().to_string()));
    let (ok, printed, stderr) = check_config(&env, &config, &dir);
    assert!(ok, "{stderr}");
    assert_eq!(params_dir(&printed), dir.to_str().unwrap());
    assert!(!stderr.contains("warning"), "{stderr}");
    // Without the variable the built-in default applies, and nothing is said either.
    let path = env.write_config(&config_without_params_dir(&env));
    let mut child = Command::new(CUZKD)
        .arg("--check-config")
        .arg("--config")
        .arg(&path)
        .env_remove("FIL_PROOFS_PARAMETER_CACHE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20), &env);
    assert!(status.success());
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let printed: toml::Table = stdout.parse().unwrap();
    assert_eq!(params_dir(&printed), cuzk::srs::DEFAULT_PARAM_DIR);
}
