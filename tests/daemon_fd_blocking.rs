//! Inputs passed as file descriptors whose reads block, on a real `cuzkd`: regular files on
//! a FUSE file system served by this test, which never answers their reads until told to.
//! Shows that while such reads are pending the daemon keeps serving other clients, that
//! each is given up at `protocol.input_timeout` (or within a second of its client hanging up) and
//! its share of `protocol.input_memory` freed, so a SubmitFd waiting for that room is then
//! served; and that the reader threads the kernel holds end once their reads return.
//!
//! Needs root and /dev/fuse (as the project's CI container has); fails without them.

mod daemon_support;

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::os::unix::net::UnixStream;

use cuzk::proto::{
    encode_frame, read_response, Client, ClientError, Hello, ProofInput, Request, Submit,
    PROTOCOL_VERSION,
};
use daemon_support::Daemon;

/// The size every file of the FUSE file system claims (the daemon reads it whole).
const SIZE: u64 = 1 << 20;

/// FUSE opcodes and errors this server knows.
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const OPEN: u32 = 14;
const READ: u32 = 15;
const RELEASE: u32 = 18;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;

/// A FUSE file system of one directory whose every name is a regular file of [`SIZE`]
/// bytes, and whose reads are held unanswered until [`Fuse::release_reads`].
struct Fuse {
    dev: Arc<std::fs::File>,
    mount: PathBuf,
    /// The `unique` ids of the reads not answered yet.
    held: Arc<Mutex<Vec<u64>>>,
    /// Reads received in all.
    reads: Arc<Mutex<u64>>,
}

fn out_header(len: usize, error: i32, unique: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&error.to_le_bytes());
    out.extend_from_slice(&unique.to_le_bytes());
    out
}

/// `struct fuse_attr` (88 bytes) of node `ino`: 1 the directory, else a file.
fn attr(ino: u64) -> Vec<u8> {
    let (mode, size) = if ino == 1 {
        (libc::S_IFDIR | 0o755, 0)
    } else {
        (libc::S_IFREG | 0o644, SIZE)
    };
    let mut a = Vec::with_capacity(88);
    for v in [ino, size, size.div_ceil(512), 0, 0, 0] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    // atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags.
    for v in [0, 0, 0, mode, 1, 0, 0, 0, 4096, 0u32] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    a
}

/// The answer's body to request `opcode` on `node`, or an errno; `None`: no answer (held,
/// or a request that takes none).
fn answer(opcode: u32, node: u64, body: &[u8]) -> Option<Result<Vec<u8>, i32>> {
    let valid = [1u64, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<_>>();
    Some(match opcode {
        INIT => {
            // fuse_init_out of protocol 7.31: major, minor, max_readahead, flags,
            // max_background, congestion_threshold, max_write, time_gran, max_pages,
            // map_alignment, flags2, unused.
            let mut o = Vec::new();
            for v in [7u32, 31, 128 << 10, 0] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            o.extend_from_slice(&[16, 0, 12, 0]);
            for v in [128u32 << 10, 1] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            o.resize(64, 0);
            Ok(o)
        }
        LOOKUP if node == 1 && body.first().is_some_and(|&b| b != 0) => {
            // fuse_entry_out: nodeid, generation, entry_valid, attr_valid, their nsecs, attr.
            let mut o = Vec::new();
            for v in [2u64, 0, 1, 1] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            o.extend_from_slice(&[0; 8]);
            o.extend(attr(2));
            Ok(o)
        }
        LOOKUP => Err(libc::ENOENT),
        GETATTR => {
            let mut o = valid;
            o.extend(attr(node));
            Ok(o)
        }
        // fuse_open_out: fh, open_flags (FOPEN_DIRECT_IO: every read comes here), padding.
        OPEN => Ok([1u64.to_le_bytes(), 1u64.to_le_bytes()].concat()),
        RELEASE | FLUSH => Ok(Vec::new()),
        READ | FORGET | BATCH_FORGET | INTERRUPT | DESTROY => return None,
        _ => Err(libc::ENOSYS),
    })
}

impl Fuse {
    /// Mounts a new file system at `mount` and serves it on a thread.
    fn mount(mount: &Path) -> Fuse {
        std::fs::create_dir_all(mount).expect("mount point");
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .expect("/dev/fuse (this test needs FUSE)");
        let target = CString::new(mount.as_os_str().as_bytes()).expect("path");
        let options = CString::new(format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            dev.as_raw_fd()
        ))
        .expect("options");
        // SAFETY: every pointer is a NUL-terminated string alive for the call; mount(2)
        // reads them and keeps none.
        let rc = unsafe {
            libc::mount(
                c"cuzk-test".as_ptr(),
                target.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "mount fuse: {}", std::io::Error::last_os_error());
        let fuse = Fuse {
            dev: Arc::new(dev),
            mount: mount.to_path_buf(),
            held: Arc::default(),
            reads: Arc::default(),
        };
        let (dev, held, reads) = (fuse.dev.clone(), fuse.held.clone(), fuse.reads.clone());
        std::thread::spawn(move || serve(&dev, &held, &reads));
        fuse
    }

    /// Answers every held read with EIO: the readers' pread(2) returns.
    fn release_reads(&self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap());
        for unique in held {
            let _ = (&*self.dev).write_all(&out_header(16, -libc::EIO, unique));
        }
    }

    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

impl Drop for Fuse {
    fn drop(&mut self) {
        self.release_reads();
        let target = CString::new(self.mount.as_os_str().as_bytes()).expect("path");
        // SAFETY: a NUL-terminated path alive for the call.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// The server's loop: one request per read(2) of /dev/fuse, until the file system is gone.
fn serve(dev: &std::fs::File, held: &Mutex<Vec<u64>>, reads: &Mutex<u64>) {
    let mut buf = vec![0u8; (128 << 10) + 4096];
    loop {
        let n = match (&*dev).read(&mut buf) {
            Ok(n) if n >= 40 => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            _ => return,
        };
        let u32_at = |at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
        let (opcode, unique, node) = (u32_at(4), u64_at(8), u64_at(16));
        if opcode == READ {
            held.lock().unwrap().push(unique);
            *reads.lock().unwrap() += 1;
        }
        let reply = match answer(opcode, node, &buf[40..n]) {
            None => continue,
            Some(Ok(body)) => [out_header(16 + body.len(), 0, unique), body].concat(),
            Some(Err(errno)) => out_header(16, -errno, unique),
        };
        let _ = (&*dev).write_all(&reply);
    }
}

fn window_submit(tag: &str) -> Submit {
    Submit {
        request_id: Some(format!("blocking-{tag}")),
        priority: None,
        input: ProofInput::WindowPoSt { input: Vec::new() },
    }
}

/// A sealed memfd of [`SIZE`] bytes: an input whose reads never block.
fn memfd() -> OwnedFd {
    let fd =
        nix::sys::memfd::memfd_create(c"cuzk-input", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
            .expect("memfd_create");
    let mut file = std::fs::File::from(fd);
    file.write_all(&[b'x'; SIZE as usize]).expect("write");
    OwnedFd::from(file)
}

/// The daemon's threads named `cuzk-fdread` (the passed inputs' readers).
fn reader_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "cuzk-fdread")
                })
                .count()
        })
        .unwrap_or(0)
}

/// What a SubmitFd on a thread was answered, and how long it took.
type Answer = (Result<(), String>, Duration);

/// A SubmitFd of `file` on a connection of its own, on a thread: its answer comes on the
/// channel (nothing where the daemon never answers: [`answer_within`] fails then).
fn submit_on_thread(
    socket: &Path,
    file: OwnedFd,
    tag: &'static str,
) -> std::sync::mpsc::Receiver<Answer> {
    let socket = socket.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut c = Client::connect(&socket, tag).expect("connect");
        let r = match c.submit_fd(window_submit(tag), file.as_fd()) {
            Ok(_) => Ok(()),
            Err(ClientError::Server(e)) => Err(e.to_string()),
            Err(e) => Err(format!("not answered: {e}")),
        };
        let _ = tx.send((r, start.elapsed()));
    });
    rx
}

/// The answer on `rx`, which must come within `limit`.
fn answer_within(rx: &std::sync::mpsc::Receiver<Answer>, limit: Duration, what: &str) -> Answer {
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
}

/// Polls `f` until it holds, for at most `timeout`.
fn wait_for(what: &str, timeout: Duration, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn blocking_descriptors_are_given_up_at_their_deadline_and_others_are_served() {
    let timeout = Duration::from_secs(4);
    let d = Daemon::start(&[
        ("protocol.max_input_size", "\"1MiB\""),
        ("protocol.input_memory", "\"4MiB\""),
        ("protocol.input_timeout", "\"4s\""),
    ]);
    let pid = d.child.id();
    let fuse = Fuse::mount(&d.env.dir.path().join("fuse"));
    let open = |name: &str| -> OwnedFd {
        std::fs::File::open(fuse.mount.join(name))
            .expect("open a file of the FUSE file system")
            .into()
    };
    // Four inputs whose reads block take all of protocol.input_memory.
    let start = Instant::now();
    let stalled: Vec<_> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|n| submit_on_thread(&d.env.socket, open(n), "stalled"))
        .collect();
    wait_for("four reads held", Duration::from_secs(5), || {
        fuse.held() >= 4
    });
    // Meanwhile another client is served at once ...
    let ping = Instant::now();
    d.client().ping(1).expect("a Ping while reads are blocked");
    let ping = ping.elapsed();
    assert!(ping < Duration::from_millis(500), "Ping took {ping:?}");
    // ... and a SubmitFd of an input that does not block waits for room, which the stalled
    // reads give back at their deadline.
    let waiting = submit_on_thread(&d.env.socket, memfd(), "waiting");
    for s in &stalled {
        let (r, took) = answer_within(s, timeout * 3, "a SubmitFd whose reads block");
        let e = r.expect_err("a blocked input is refused");
        assert!(e.contains("protocol.input_timeout"), "{e}");
        assert!(took >= timeout, "given up early, after {took:?}");
    }
    let (r, took) = answer_within(&waiting, timeout * 2, "a SubmitFd waiting for room");
    assert!(
        !r.as_ref().is_err_and(|e| e.contains("not answered")),
        "{r:?}"
    );
    let waited = start.elapsed();
    eprintln!(
        "4 blocked reads given up at their {timeout:?} deadline; Ping {ping:?} meanwhile; a \
         SubmitFd waiting for their room answered after {took:?} ({r:?}); {} reader threads \
         still in the kernel",
        reader_threads(pid)
    );
    assert!(
        waited >= timeout,
        "the waiting SubmitFd did not wait for room"
    );
    // The threads blocked in the kernel hold only a read's chunk; they end once the reads
    // return.
    assert_eq!(reader_threads(pid), 4);
    fuse.release_reads();
    wait_for("the reader threads ended", Duration::from_secs(5), || {
        reader_threads(pid) == 0
    });
    hang_ups_free_the_room_at_once(&d, &fuse, timeout);
    assert!(!d.env.stderr().contains("panicked"));
}

/// A connection past Hello that has sent a SubmitFd passing `fd` and reads no answer.
fn send_and_wait(socket: &Path, fd: std::os::fd::BorrowedFd<'_>) -> UnixStream {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let mut s = UnixStream::connect(socket).expect("connect");
    let hello = Request::Hello(Hello {
        protocol_version: PROTOCOL_VERSION,
        client_name: "hang-up".into(),
    });
    s.write_all(&encode_frame(&hello).unwrap()).unwrap();
    read_response(&mut s, 1 << 20).expect("Welcome");
    let frame = encode_frame(&Request::SubmitFd(window_submit("hang-up"))).unwrap();
    let fds = [fd.as_raw_fd()];
    let sent = sendmsg::<()>(
        s.as_raw_fd(),
        &[std::io::IoSlice::new(&frame)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .expect("sendmsg");
    s.write_all(&frame[sent..]).unwrap();
    s
}

/// Four clients whose inputs block hang up: their room is free well before the deadline
/// (the daemon sees a hang-up within its one-second poll).
fn hang_ups_free_the_room_at_once(d: &Daemon, fuse: &Fuse, timeout: Duration) {
    let reads_before = *fuse.reads.lock().unwrap();
    let mut clients = Vec::new();
    for n in ["e", "f", "g", "h"] {
        let file: OwnedFd = std::fs::File::open(fuse.mount.join(n)).unwrap().into();
        clients.push(send_and_wait(&d.env.socket, file.as_fd()));
    }
    wait_for("four more reads held", Duration::from_secs(5), || {
        *fuse.reads.lock().unwrap() >= reads_before + 4
    });
    drop(clients);
    let start = Instant::now();
    let rx = submit_on_thread(&d.env.socket, memfd(), "after-hang-up");
    let (r, _) = answer_within(&rx, timeout * 2, "a SubmitFd after the hang-ups");
    let took = start.elapsed();
    eprintln!("after 4 hang-ups a SubmitFd was answered in {took:?} ({r:?})");
    assert!(
        !r.as_ref().is_err_and(|e| e.contains("not answered")),
        "{r:?}"
    );
    assert!(took < timeout / 2, "answered after {took:?}");
}
