//! Inputs passed as file descriptors (SubmitFd, ProveFd): the socket read with recvmsg so
//! that descriptors sent with a frame (SCM_RIGHTS) are kept, and the passed file read
//! within `protocol.max_input_size` and the shared `protocol.input_memory`.
//!
//! Which frame a descriptor came with: Linux delivers a sendmsg's descriptors with the
//! first recvmsg that reads any of its bytes, and ends that read at the sendmsg's last byte
//! read, so the last byte of the read that delivered a descriptor is one of the bytes it
//! was sent with. A client sends a SubmitFd frame's bytes with one sendmsg carrying the
//! descriptor; the descriptor belongs to the frame holding that byte. Descriptors that
//! came with any other frame are closed when that frame is read.

use std::collections::VecDeque;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Descriptors kept at once per connection; more are closed as they arrive.
const MAX_HELD: usize = 4;

/// The unit of `protocol.input_memory`'s permits (a semaphore counts in `u32`s).
const PERMIT_BYTES: u64 = 1 << 10;

/// A client's Unix stream, read with recvmsg: passed descriptors are kept with the offset
/// of the last byte read with them.
pub struct FdStream {
    inner: UnixStream,
    read: u64,
    held: VecDeque<(u64, OwnedFd)>,
    /// Descriptors closed because more than [`MAX_HELD`] were waiting.
    pub dropped: u64,
}

impl FdStream {
    /// Wraps an accepted connection.
    pub fn new(inner: UnixStream) -> Self {
        Self {
            inner,
            read: 0,
            held: VecDeque::new(),
            dropped: 0,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &UnixStream {
        &self.inner
    }

    /// The descriptor that came with the frame occupying stream bytes `start..end`, if any;
    /// every other descriptor from that frame or before it is closed.
    pub fn take_fd(&mut self, start: u64, end: u64) -> Option<OwnedFd> {
        let mut taken = None;
        while let Some((at, _)) = self.held.front() {
            if *at >= end {
                break;
            }
            let (at, fd) = self.held.pop_front()?;
            if at >= start && taken.is_none() {
                taken = Some(fd);
            }
        }
        taken
    }

    fn keep(&mut self, fds: Vec<OwnedFd>, at: u64) {
        for fd in fds {
            if self.held.len() < MAX_HELD {
                self.held.push_back((at, fd));
            } else {
                self.dropped += 1;
            }
        }
    }
}

/// One recvmsg into `buf`, keeping what descriptors come with it.
fn recv_with_fds(fd: RawFd, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; MAX_HELD]);
    let msg = recvmsg::<UnixAddr>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel has just installed these descriptors in this process for
            // this message (SCM_RIGHTS); nothing else knows of them, so each is owned once.
            fds.extend(raw.into_iter().map(|r| unsafe { OwnedFd::from_raw_fd(r) }));
        }
    }
    Ok((msg.bytes, fds))
}

impl AsyncRead for FdStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            std::task::ready!(self.inner.poll_read_ready(cx))?;
            let this = &mut *self;
            let raw = this.inner.as_raw_fd();
            let unfilled = buf.initialize_unfilled();
            match this
                .inner
                .try_io(Interest::READABLE, || recv_with_fds(raw, unfilled))
            {
                Ok((n, fds)) => {
                    buf.advance(n);
                    this.read += n as u64;
                    this.keep(fds, this.read.saturating_sub(1));
                    return Poll::Ready(Ok(()));
                }
                // try_io cleared the readiness: wait for the next.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for FdStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Why a passed input was not read.
#[derive(Debug, thiserror::Error)]
pub enum FdInputError {
    /// The frame came without a descriptor.
    #[error("no file descriptor came with the frame: send it with the frame's bytes (SCM_RIGHTS)")]
    Missing,
    /// The Submit carried a payload too.
    #[error("the input comes from the passed file descriptor: leave the payload empty")]
    Payload,
    /// Not a regular file (a memfd is one).
    #[error("the passed file descriptor is not a regular file (a memfd or a file): {0}")]
    NotAFile(String),
    /// Empty.
    #[error("the passed file is empty")]
    Empty,
    /// Larger than `protocol.max_input_size`.
    #[error("the passed input is {len} bytes; protocol.max_input_size is {max}")]
    TooLarge {
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Reading failed (or the file shrank while it was read).
    #[error("reading the passed input: {0}")]
    Read(std::io::Error),
    /// Reading took longer than `protocol.input_timeout`.
    #[error("reading the passed input took longer than {0:?} (protocol.input_timeout)")]
    Timeout(Duration),
    /// Too many earlier reads are still blocked in the kernel.
    #[error("{0} reads of passed inputs are blocked; pass the input in the frame instead")]
    Stalled(usize),
}

/// `protocol.input_memory`: the bytes of passed inputs being read and checked at once
/// (and of gRPC messages being received), and the reader threads alive.
#[derive(Debug)]
pub struct InputMemory {
    permits: Arc<Semaphore>,
    total: u32,
    readers: Arc<AtomicUsize>,
}

impl InputMemory {
    /// A budget of `bytes` (at least `max_input`, so that one input of the largest size
    /// always fits).
    pub fn new(bytes: u64, max_input: u64) -> Self {
        let units = bytes.max(max_input).div_ceil(PERMIT_BYTES);
        let total = u32::try_from(units).unwrap_or(u32::MAX);
        Self {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
            readers: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Room for `len` bytes, once earlier reads have made it.
    pub async fn reserve(&self, len: u64) -> OwnedSemaphorePermit {
        let units = u32::try_from(len.div_ceil(PERMIT_BYTES))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total);
        match self.permits.clone().acquire_many_owned(units).await {
            Ok(permit) => permit,
            // The semaphore is never closed.
            Err(_) => unreachable!("the input memory semaphore was closed"),
        }
    }

    /// The permits `len` bytes take (more than the whole budget where they do not fit in
    /// it: [`Self::try_reserve_units`] refuses those).
    pub fn units(&self, len: u64) -> usize {
        usize::try_from(len.div_ceil(PERMIT_BYTES)).unwrap_or(usize::MAX)
    }

    /// `units` permits if they are free now, without waiting.
    pub fn try_reserve_units(&self, units: usize) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(units).ok()?;
        self.permits.clone().try_acquire_many_owned(units).ok()
    }

    /// Bytes free now (for tests and the metrics).
    pub fn free(&self) -> u64 {
        self.permits.available_permits() as u64 * PERMIT_BYTES
    }
}

/// The size of the input in `fd`, checked: a regular file of 1 to `max` bytes.
pub fn input_size(fd: &OwnedFd, max: u64) -> Result<u64, FdInputError> {
    let stat =
        nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| FdInputError::NotAFile(e.to_string()))?;
    let kind =
        nix::sys::stat::SFlag::from_bits_truncate(stat.st_mode) & nix::sys::stat::SFlag::S_IFMT;
    if kind != nix::sys::stat::SFlag::S_IFREG {
        return Err(FdInputError::NotAFile(format!("mode {:o}", stat.st_mode)));
    }
    let len = u64::try_from(stat.st_size).unwrap_or(0);
    match len {
        0 => Err(FdInputError::Empty),
        len if len > max => Err(FdInputError::TooLarge { len, max }),
        len => Ok(len),
    }
}

/// How much of a passed input one read takes: all a reader thread still blocked in the
/// kernel after its deadline holds.
const CHUNK: usize = 256 << 10;

/// Reader threads that may be alive at once (those blocked in the kernel past their
/// deadline included); a read beyond is refused ([`FdInputError::Stalled`]).
pub const MAX_READERS: usize = 64;

/// A reader thread's stack: it only reads into a heap chunk.
const READER_STACK: usize = 128 << 10;

/// A file read at offsets (a passed descriptor's `File`; a test's file whose reads block).
pub trait ReadAt: Send + 'static {
    /// Reads into `buf` from `offset`, as pread(2).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

/// Counts a reader thread while it lives.
struct Reader(Arc<AtomicUsize>);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InputMemory {
    /// Reader threads alive now.
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::Acquire)
    }

    /// The first `len` bytes of `file` (the descriptor's own offset is neither used nor
    /// moved), into one buffer of exactly that size, read within `timeout`.
    ///
    /// The reads run on a thread of their own, a [`CHUNK`] at a time, and the chunks are
    /// copied into the buffer here: at the deadline, or when this future is dropped (the
    /// client hung up), the buffer is freed at once. A thread still blocked in a read then
    /// holds one chunk until the read returns, and ends there.
    pub async fn read<R: ReadAt>(
        &self,
        file: R,
        len: u64,
        timeout: Duration,
    ) -> Result<Vec<u8>, FdInputError> {
        let size = usize::try_from(len).map_err(|_| FdInputError::TooLarge { len, max: 0 })?;
        let alive = self.readers.fetch_add(1, Ordering::AcqRel);
        let reader = Reader(self.readers.clone());
        if alive >= MAX_READERS {
            return Err(FdInputError::Stalled(alive));
        }
        let mut buf = Vec::new();
        buf.try_reserve_exact(size)
            .map_err(|e| FdInputError::Read(std::io::Error::other(e.to_string())))?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(1);
        std::thread::Builder::new()
            .name("cuzk-fdread".into())
            .stack_size(READER_STACK)
            .spawn(move || {
                let _reader = reader;
                let mut offset = 0u64;
                while offset < len {
                    let want = (len - offset).min(CHUNK as u64) as usize;
                    let mut chunk = vec![0u8; want];
                    let read = match file.read_at(&mut chunk, offset) {
                        Ok(0) => Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the file is shorter than when it was passed",
                        )),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        other => other,
                    };
                    let failed = read.is_err();
                    let sent = read.map(|n| {
                        chunk.truncate(n);
                        offset += n as u64;
                        chunk
                    });
                    // The reading side gone (deadline, hang-up): nothing more to read for.
                    if tx.blocking_send(sent).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(FdInputError::Read)?;
        let fill = async {
            while buf.len() < size {
                match rx.recv().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => return Err(FdInputError::Read(e)),
                    None => {
                        return Err(FdInputError::Read(std::io::Error::other(
                            "the reader thread ended early",
                        )))
                    }
                }
            }
            Ok(())
        };
        match tokio::time::timeout(timeout, fill).await {
            Ok(Ok(())) => Ok(buf),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(FdInputError::Timeout(timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_frames_descriptor_is_the_one_sent_with_its_bytes() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut s = FdStream::new(UnixStream::from_std(a).unwrap());
            let fd = |_: u8| OwnedFd::from(tempfile::tempfile().unwrap());
            s.keep(vec![fd(0)], 3); // came with the first frame (bytes 0..10)
            s.keep(vec![fd(1), fd(2)], 15); // the second frame's (10..20): two
            s.keep(vec![fd(3)], 25); // the third's
            assert!(s.take_fd(0, 10).is_some());
            assert!(
                s.take_fd(10, 20).is_some(),
                "the first of the second frame's"
            );
            assert_eq!(s.held.len(), 1, "its other one closed");
            assert!(
                s.take_fd(30, 40).is_none(),
                "a later frame has none: the third's closed"
            );
            assert!(s.held.is_empty());
            for i in 0..(MAX_HELD + 2) {
                s.keep(vec![fd(i as u8)], 50);
            }
            assert_eq!((s.held.len(), s.dropped), (MAX_HELD, 2));
        });
    }

    #[test]
    fn passed_files_are_checked_and_read_whole() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello world").unwrap();
        let fd = OwnedFd::from(f);
        assert_eq!(input_size(&fd, 100).unwrap(), 11);
        assert!(matches!(
            input_size(&fd, 10),
            Err(FdInputError::TooLarge { len: 11, max: 10 })
        ));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let memory = InputMemory::new(1 << 20, 1 << 20);
        let read = |fd: OwnedFd, len| {
            rt.block_on(memory.read(std::fs::File::from(fd), len, Duration::from_secs(10)))
        };
        assert_eq!(read(fd, 11).unwrap(), b"hello world");
        let empty = OwnedFd::from(tempfile::tempfile().unwrap());
        assert!(matches!(input_size(&empty, 10), Err(FdInputError::Empty)));
        let (sock, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(
            input_size(&OwnedFd::from(sock), 10),
            Err(FdInputError::NotAFile(_))
        ));
        let short = tempfile::tempfile().unwrap();
        short.set_len(4).unwrap();
        assert!(matches!(
            read(OwnedFd::from(short), 8),
            Err(FdInputError::Read(_))
        ));
        // Several chunks.
        let mut big = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..(3 * CHUNK + 5)).map(|i| (i % 251) as u8).collect();
        big.write_all(&data).unwrap();
        assert_eq!(read(OwnedFd::from(big), data.len() as u64).unwrap(), data);
    }

    /// A file whose reads block until it is let go (as on a stalled NFS or FUSE mount).
    struct Blocking {
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl ReadAt for Blocking {
        fn read_at(&self, buf: &mut [u8], _offset: u64) -> std::io::Result<usize> {
            let _ = self.release.lock().unwrap().recv();
            buf.fill(7);
            Ok(buf.len())
        }
    }

    fn blocking() -> (Blocking, std::sync::mpsc::Sender<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let file = Blocking {
            release: std::sync::Mutex::new(rx),
        };
        (file, tx)
    }

    #[test]
    fn a_read_that_blocks_is_given_up_at_its_deadline_or_hang_up_and_others_are_served() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let memory = InputMemory::new(1 << 30, 1 << 30);
        rt.block_on(async {
            let timeout = Duration::from_millis(300);
            // Four stalled reads of 64 MiB each: each given up at its deadline.
            let mut releases = Vec::new();
            let start = std::time::Instant::now();
            let stalled = (0..4).map(|_| {
                let (file, release) = blocking();
                releases.push(release);
                memory.read(file, 64 << 20, timeout)
            });
            let stalled = tokio::time::timeout(timeout * 10, futures::future::join_all(stalled))
                .await
                .expect("the stalled reads given up at their deadline");
            for result in stalled {
                assert!(
                    matches!(result, Err(FdInputError::Timeout(_))),
                    "{result:?}"
                );
            }
            let took = start.elapsed();
            assert!(
                took < timeout * 3,
                "given up at the deadline, took {took:?}"
            );
            assert_eq!(memory.readers(), 4, "their threads still blocked in a read");
            // Meanwhile an ordinary file is read.
            let mut f = tempfile::tempfile().unwrap();
            f.write_all(b"served").unwrap();
            assert_eq!(memory.read(f, 6, timeout).await.unwrap(), b"served");
            // A hang-up: the read's future dropped.
            let (file, release) = blocking();
            releases.push(release);
            let dropped = tokio::time::timeout(
                Duration::from_millis(50),
                memory.read(file, 1 << 20, timeout),
            )
            .await;
            assert!(dropped.is_err(), "still blocked when dropped");
            // Let the reads return: each thread finds no one waiting and ends.
            drop(releases);
            for _ in 0..200 {
                if memory.readers() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(memory.readers(), 0, "the reader threads ended");
            // At most MAX_READERS at once: the next is refused, not queued behind them.
            let mut held = Vec::new();
            let mut waits = Vec::new();
            for _ in 0..MAX_READERS {
                let (file, release) = blocking();
                held.push(release);
                waits.push(memory.read(file, 1, Duration::from_millis(20)));
            }
            futures::future::join_all(waits).await;
            let (file, _release) = blocking();
            assert!(matches!(
                memory.read(file, 1, timeout).await,
                Err(FdInputError::Stalled(MAX_READERS))
            ));
        });
    }

    #[test]
    fn input_memory_waits_for_room() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let memory = InputMemory::new(4 << 20, 3 << 20);
            let first = memory.reserve(3 << 20).await;
            assert_eq!(memory.free(), 1 << 20);
            let second = tokio::time::timeout(
                std::time::Duration::from_millis(50),
                memory.reserve(2 << 20),
            )
            .await;
            assert!(second.is_err(), "no room until the first is released");
            drop(first);
            let _second = memory.reserve(2 << 20).await;
            // Larger than the whole budget: waits for all of it, never forever.
            let small = InputMemory::new(0, 1 << 20);
            drop(small.reserve(5 << 20).await);
        });
    }
}
