//! The listening socket: taken over from systemd (`LISTEN_FDS`) or bound at `socket.path`.

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::socket::{getsockopt, sockopt};
use nix::sys::stat::{umask, Mode};
use nix::unistd::{chown, Gid, Group};

use super::DaemonError;
use crate::config::SocketConfig;

/// Where the listening socket came from.
#[derive(Debug)]
pub enum SocketOrigin {
    /// systemd passed it; systemd owns the path.
    Activated,
    /// cuzkd bound it at this path and removes it on exit if the path still names the same
    /// file (device and inode as bound): another daemon may have taken the path since.
    Bound(PathBuf, Option<(u64, u64)>),
}

/// A listening Unix socket.
#[derive(Debug)]
pub struct Listener {
    /// The socket (blocking mode; the server sets it non-blocking).
    pub socket: UnixListener,
    /// Where it came from.
    pub origin: SocketOrigin,
}

/// The device and inode of the file at `path` (not following a link).
pub fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Removes the socket file if cuzkd created it, and only if it is still that socket: a
/// daemon started while this one drained may have replaced it, and its clients need it.
pub fn remove_socket_file(origin: &SocketOrigin) {
    if let SocketOrigin::Bound(path, bound) = origin {
        let meta = std::fs::symlink_metadata(path);
        let ours = meta.is_ok_and(|m| {
            m.file_type().is_socket() && bound.is_some_and(|id| id == (m.dev(), m.ino()))
        });
        if ours {
            let _ = std::fs::remove_file(path);
        } else if file_id(path).is_some() {
            tracing::info!(path = %path.display(), "leaving the socket path: another daemon holds it now");
        }
    }
}

/// The sockets systemd passed (socket activation).
#[derive(Debug, Default)]
pub struct Activated {
    /// The protocol's socket (cuzkd.socket).
    pub main: Option<UnixListener>,
    /// The gRPC endpoint's (cuzkd-grpc.socket, `FileDescriptorName=grpc`).
    pub grpc: Option<UnixListener>,
}

/// Whether a passed descriptor's name (`FileDescriptorName=`, by default the socket unit's
/// name) is the gRPC endpoint's.
fn is_grpc_name(name: &str) -> bool {
    name == "grpc" || name == "cuzkd-grpc.socket"
}

/// The sockets systemd passed (socket activation), if any. Must be called before any thread
/// is started: it reads and clears `LISTEN_PID`/`LISTEN_FDS`/`LISTEN_FDNAMES`.
pub fn take_activated() -> Result<Activated, DaemonError> {
    let activation = |m: String| DaemonError::Activation(m);
    let fds = sd_notify::listen_fds_with_names(true).map_err(|e| activation(e.to_string()))?;
    let mut out = Activated::default();
    for (fd, name) in fds {
        let slot = if is_grpc_name(&name) {
            &mut out.grpc
        } else {
            &mut out.main
        };
        if slot.is_some() {
            return Err(activation(format!(
                "more than one socket passed as {name:?}; cuzkd takes one for its protocol \
                 and one named \"grpc\""
            )));
        }
        *slot = Some(listener_from_fd(fd)?);
    }
    Ok(out)
}

fn listener_from_fd(fd: RawFd) -> Result<UnixListener, DaemonError> {
    // SAFETY: sd_notify::listen_fds returned `fd` from LISTEN_FDS, which systemd sets to
    // descriptors it passed to this process and nothing else in cuzkd has taken ownership of;
    // LISTEN_FDS is cleared, so this is the only owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let bad = |m: &str| DaemonError::Activation(format!("descriptor {fd}: {m}"));
    let listening =
        getsockopt(&owned.as_fd(), sockopt::AcceptConn).map_err(|e| bad(&e.to_string()))?;
    let ty = getsockopt(&owned.as_fd(), sockopt::SockType).map_err(|e| bad(&e.to_string()))?;
    if !listening || ty != nix::sys::socket::SockType::Stream {
        return Err(bad(
            "not a listening stream socket (use ListenStream= in the .socket unit)",
        ));
    }
    let listener = UnixListener::from(owned);
    let addr = listener.local_addr().map_err(|e| bad(&e.to_string()))?;
    tracing::info!(path = ?addr.as_pathname().unwrap_or(Path::new("(unnamed)")), "using the socket passed by systemd");
    Ok(listener)
}

/// Binds `config.path` with `config.mode` and `config.group`.
///
/// An existing socket file is replaced only if no one is listening on it; any other kind of
/// file is never removed. The socket is bound, given its mode and group under a staging name
/// beside the path and then linked into place, so that the path appears only once it
/// listens with its final mode: a client that waits for the file and connects at once is
/// never refused by the kernel (between bind and listen) or by the mode (before the chmod).
pub fn bind(config: &SocketConfig) -> Result<UnixListener, DaemonError> {
    let path = &config.path;
    let io = |context: String| move |source| DaemonError::Io { context, source };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    clear_stale(path)?;
    let staging = staging_path(path);
    let at = staging.as_deref().unwrap_or(path);
    let listener = bind_with_mode(config, at)?;
    if staging.is_some() {
        // A link, not a rename: it never replaces a socket another daemon bound at the path
        // since the stale check (the second of two daemons started together fails as a bind
        // would).
        let linked = std::fs::hard_link(at, path);
        let _ = std::fs::remove_file(at);
        linked.map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => DaemonError::InUse(path.to_owned()),
            _ => DaemonError::Io {
                context: format!("linking {} into place", path.display()),
                source,
            },
        })?;
    }
    tracing::info!(path = %path.display(), mode = format!("{:04o}", config.mode), group = config.group.as_deref(), "listening");
    Ok(listener)
}

/// The longest path a Unix socket address holds (`sun_path` less its terminating NUL).
const SUN_PATH_MAX: usize = 107;

/// The staging name `bind` binds first: `.cuzkd-<pid>-<nanoseconds>.binding` beside `path`
/// (the time tells apart two daemons of one pid in two containers that share the directory),
/// or None where that name or `path` itself would not fit a socket address (then the socket
/// is bound at `path`, where the kernel says what is wrong with it).
fn staging_path(path: &Path) -> Option<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(".cuzkd-{}-{nanos}.binding", std::process::id());
    let staging = match path.parent() {
        Some(parent) => parent.join(name),
        None => PathBuf::from(name),
    };
    let fits = |p: &Path| p.as_os_str().len() <= SUN_PATH_MAX;
    (fits(path) && fits(&staging)).then_some(staging)
}

/// Binds `at` (never more open than 0600 before the chmod) and gives it `config`'s group and
/// mode.
fn bind_with_mode(config: &SocketConfig, at: &Path) -> Result<UnixListener, DaemonError> {
    let io = |context: String| move |source| DaemonError::Io { context, source };
    // A restrictive umask while binding; cuzkd is still single-threaded here.
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(at);
    umask(old);
    // Errors name the configured path: the staging name is cuzkd's own detail.
    let shown = config.path.display();
    let listener = bound.map_err(io(format!("binding {shown}")))?;
    let owned = || -> Result<(), DaemonError> {
        if let Some(group) = &config.group {
            let gid = resolve_group(group)?;
            chown(at, None, Some(gid)).map_err(|e| DaemonError::Io {
                context: format!("chgrp {group} {shown}"),
                source: e.into(),
            })?;
        }
        std::fs::set_permissions(at, std::fs::Permissions::from_mode(config.mode))
            .map_err(io(format!("chmod {:o} {shown}", config.mode)))
    };
    // The socket file bound here goes with a failure: nothing else created it.
    owned().inspect_err(|_| {
        let _ = std::fs::remove_file(at);
    })?;
    Ok(listener)
}

/// Removes a stale socket at `path`; refuses a live socket and anything that is not a socket.
fn clear_stale(path: &Path) -> Result<(), DaemonError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(DaemonError::Io {
                context: format!("inspecting {}", path.display()),
                source,
            })
        }
    };
    let ft = meta.file_type();
    if !ft.is_socket() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symbolic link"
        } else if ft.is_file() {
            "a regular file"
        } else {
            "a special file"
        };
        return Err(DaemonError::NotASocket {
            path: path.to_owned(),
            what,
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(DaemonError::InUse(path.to_owned())),
        Err(_) => {
            tracing::info!(path = %path.display(), "removing a stale socket");
            std::fs::remove_file(path).map_err(|source| DaemonError::Io {
                context: format!("removing stale {}", path.display()),
                source,
            })
        }
    }
}

pub(crate) fn resolve_group(group: &str) -> Result<Gid, DaemonError> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(Gid::from_raw(n));
    }
    match Group::from_name(group) {
        Ok(Some(g)) => Ok(g.gid),
        _ => Err(DaemonError::UnknownGroup(group.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staging_name_sits_beside_the_path_and_only_where_both_fit() {
        let path = Path::new("/run/cuzk/cuzk.sock");
        let staging = staging_path(path).expect("a short path is staged");
        assert_eq!(staging.parent(), path.parent());
        let name = staging.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(".cuzkd-") && name.ends_with(".binding"),
            "{name}"
        );
        // A path a socket address cannot hold is bound in place (the kernel's error shows),
        // never staged under a name that fits and linked to one no client can reach.
        let long = PathBuf::from(format!("/run/{}", "s".repeat(SUN_PATH_MAX)));
        assert_eq!(staging_path(&long), None);
        let deep = PathBuf::from(format!("/{}/c.sock", "d".repeat(SUN_PATH_MAX - 9)));
        assert!(deep.as_os_str().len() <= SUN_PATH_MAX);
        assert_eq!(staging_path(&deep), None, "the staging name would not fit");
        // A bare file name is staged in the working directory.
        let bare = staging_path(Path::new("cuzk.sock")).unwrap();
        assert!(bare.parent().is_none_or(|p| p.as_os_str().is_empty()));
    }
}
