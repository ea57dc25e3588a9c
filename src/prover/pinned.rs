//! Scalars in host memory a device can read directly: [`Scalars`] is either an ordinary
//! vector or a [`Lease`] from a [`PinnedPool`] of page-locked blocks.
//!
//! Why: a GPU uploads pageable memory through small page-locked staging buffers, and the
//! host copies into those while the device waits for its turn to be over. A synthesized
//! partition copied into a page-locked block by its synthesis thread (off the device's
//! time) goes up by DMA alone. The pool keeps the blocks it allocated (page-locking is slow:
//! the kernel faults in and pins every page), so partitions of one shape reuse them.
//!
//! The pool is ours, not the driver's: the allocator that makes the blocks is passed in
//! ([`HostAllocator`]), so the bookkeeping is tested without a GPU on ordinary memory.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use blstrs::Scalar;

/// A block of host memory owned by its allocator's kind (page-locked by the GPU backend),
/// freed when dropped. Aligned for [`Scalar`]s.
pub trait RawBlock: Send + Sync {
    /// Its start; valid for [`RawBlock::bytes`] bytes while the block lives.
    fn ptr(&self) -> *mut u8;
    /// Its size in bytes.
    fn bytes(&self) -> usize;
}

/// Makes a block of (at least) the given bytes, or says why it cannot.
pub type HostAllocator = Arc<dyn Fn(usize) -> Result<Box<dyn RawBlock>, String> + Send + Sync>;

/// Blocks are made in multiples of this, so that partitions of nearly the same size share
/// them (and a block is never much larger than its lease).
const GRANULE: usize = 2 << 20;

/// A free block is lent for a request only if it is at most this much larger (in eighths):
/// a large block must not go to a small partition while a large one then gets none.
const SLACK_EIGHTHS: usize = 2;

/// What the pool did since it was made, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// The most bytes the pool may hold.
    pub limit: u64,
    /// Bytes of the blocks it holds (lent and free).
    pub held: u64,
    /// Bytes of the blocks lent now.
    pub lent: u64,
    /// Leases given.
    pub leases: u64,
    /// Requests it could not serve (no room, or the allocator failed).
    pub misses: u64,
}

/// A pool of page-locked blocks, at most `limit` bytes in all.
pub struct PinnedPool {
    shared: Arc<Shared>,
}

struct Shared {
    alloc: HostAllocator,
    limit: usize,
    state: Mutex<State>,
    leases: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Bytes of all blocks, lent or free, and of blocks being allocated.
    held: usize,
    /// Bytes lent now.
    lent: usize,
    free: Vec<Box<dyn RawBlock>>,
    /// The allocator failed once (a memlock limit, say): no more attempts, said once.
    broken: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Plain counters and a list, each updated in one step: usable after a panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PinnedPool {
    /// A pool of at most `limit` bytes, whose blocks `alloc` makes.
    pub fn new(limit: u64, alloc: HostAllocator) -> Self {
        Self {
            shared: Arc::new(Shared {
                alloc,
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
                state: Mutex::new(State::default()),
                leases: AtomicU64::new(0),
                misses: AtomicU64::new(0),
            }),
        }
    }

    /// The pool's counters now.
    pub fn stats(&self) -> PinnedStats {
        let st = self.shared.lock();
        PinnedStats {
            limit: self.shared.limit as u64,
            held: st.held as u64,
            lent: st.lent as u64,
            leases: self.shared.leases.load(Ordering::Relaxed),
            misses: self.shared.misses.load(Ordering::Relaxed),
        }
    }

    /// A copy of `values` in a block of the pool, or `None` where the pool has no room for
    /// it (it then stays where it is). Copies on the calling thread.
    pub fn copy_of(&self, values: &[Scalar]) -> Option<Lease> {
        if values.is_empty() {
            return None;
        }
        let bytes = std::mem::size_of_val(values);
        let block = self.take(bytes)?;
        // SAFETY: the block is at least `bytes` = size_of_val(values) long (`take` checked),
        // aligned for Scalar (RawBlock's contract) and owned by no one else until it is lent
        // below; `values` is another allocation, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                block.ptr().cast::<Scalar>(),
                values.len(),
            )
        };
        self.shared.leases.fetch_add(1, Ordering::Relaxed);
        Some(Lease {
            block: Some(block),
            len: values.len(),
            pool: self.shared.clone(),
        })
    }

    /// A block of the pool holding `len` scalars written by `fill`, or `None` where the pool
    /// has no room (`fill` is then not called).
    ///
    /// # Safety
    /// `fill` must write every element of the slice it is given (it is the lease's content,
    /// read as scalars afterwards).
    pub unsafe fn lease_filled(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<Scalar>]),
    ) -> Option<Lease> {
        if len == 0 {
            return None;
        }
        let block = self.take(len.checked_mul(std::mem::size_of::<Scalar>())?)?;
        let ptr = block.ptr().cast::<std::mem::MaybeUninit<Scalar>>();
        // Made first, so that a panic in `fill` still gives the block back.
        let lease = Lease {
            block: Some(block),
            len,
            pool: self.shared.clone(),
        };
        // SAFETY: the block is at least `len` scalars long (`take` checked), aligned for
        // Scalar (RawBlock's contract) and owned by the lease alone, which is not read
        // before `fill` returns.
        fill(unsafe { std::slice::from_raw_parts_mut(ptr, len) });
        self.shared.leases.fetch_add(1, Ordering::Relaxed);
        Some(lease)
    }

    /// A block of at least `bytes`: a free one that is not much larger, else a new one
    /// where the limit allows (dropping free blocks to make room, only when that is enough).
    fn take(&self, bytes: usize) -> Option<Box<dyn RawBlock>> {
        let size = bytes.div_ceil(GRANULE).saturating_mul(GRANULE);
        let mut st = self.shared.lock();
        let fits =
            |b: &dyn RawBlock| b.bytes() >= bytes && b.bytes() <= size + size / 8 * SLACK_EIGHTHS;
        let best = (0..st.free.len())
            .filter(|&i| fits(st.free[i].as_ref()))
            .min_by_key(|&i| st.free[i].bytes());
        if let Some(i) = best {
            let block = st.free.swap_remove(i);
            st.lent += block.bytes();
            return Some(block);
        }
        // Dropping every free block would not make room (or the allocator is gone): keep
        // them, the next partition of their size reuses them.
        let free: usize = st.free.iter().map(|b| b.bytes()).sum();
        if st.broken || (st.held - free).saturating_add(size) > self.shared.limit {
            drop(st);
            self.shared.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let dropped = self.make_room(&mut st, size);
        st.held += size;
        st.lent += size;
        drop(st);
        // Freeing and page-locking take long (every page): outside the lock.
        drop(dropped);
        let made = (self.shared.alloc)(size);
        let mut st = self.shared.lock();
        match made {
            Ok(block) if block.bytes() >= bytes => {
                // The allocator may round up: account for what it made.
                st.held = st.held - size + block.bytes();
                st.lent = st.lent - size + block.bytes();
                Some(block)
            }
            outcome => {
                st.held -= size;
                st.lent -= size;
                if !st.broken {
                    st.broken = true;
                    let why = outcome.err().unwrap_or_else(|| "a short block".into());
                    tracing::warn!(
                        "no page-locked memory for partitions ({why}); they are uploaded \
                         through the staging buffers"
                    );
                }
                drop(st);
                self.shared.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Takes free blocks out of the pool until `size` more bytes fit its limit (or none is
    /// left); returns them, for the caller to free outside the lock.
    fn make_room(&self, st: &mut State, size: usize) -> Vec<Box<dyn RawBlock>> {
        let mut dropped = Vec::new();
        // The largest first: fewest blocks freed.
        st.free.sort_by_key(|b| b.bytes());
        while st.held + size > self.shared.limit {
            let Some(block) = st.free.pop() else { break };
            st.held -= block.bytes();
            dropped.push(block);
        }
        dropped
    }
}

/// Scalars in a block of a [`PinnedPool`], returned to it when dropped.
pub struct Lease {
    /// Always `Some` until drop.
    block: Option<Box<dyn RawBlock>>,
    len: usize,
    pool: Arc<Shared>,
}

impl Lease {
    /// Bytes of host memory it holds.
    pub fn bytes(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.bytes())
    }
}

impl Deref for Lease {
    type Target = [Scalar];
    fn deref(&self) -> &[Scalar] {
        let ptr = self
            .block
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr());
        if ptr.is_null() {
            return &[];
        }
        // SAFETY: the block holds at least `len` scalars, all written by `copy_of` or by
        // `lease_filled`'s caller, aligned;
        // this lease owns it alone while it lives, and the view borrows the lease.
        unsafe { std::slice::from_raw_parts(ptr.cast::<Scalar>(), self.len) }
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut [Scalar] {
        let ptr = self
            .block
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr());
        if ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as for `deref`, and the view borrows the lease mutably, so it is the only
        // one.
        unsafe { std::slice::from_raw_parts_mut(ptr.cast::<Scalar>(), self.len) }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            let mut st = self.pool.lock();
            st.lent -= block.bytes();
            st.free.push(block);
        }
    }
}

/// Scalars the prover owns: an ordinary vector, or a copy in page-locked memory that a GPU
/// uploads directly.
pub enum Scalars {
    /// On the heap.
    Heap(Vec<Scalar>),
    /// In a block of a [`PinnedPool`].
    Pinned(Lease),
}

impl Scalars {
    /// The scalars as a vector: the heap one as it is, a pinned one copied out (the CPU
    /// backend, which pads and transforms in place, on a partition pinned for a GPU).
    pub fn into_vec(self) -> Vec<Scalar> {
        match self {
            Scalars::Heap(v) => v,
            Scalars::Pinned(l) => l.to_vec(),
        }
    }

    /// Moves heap scalars into a block of `pool` where it has room (the vector is freed);
    /// otherwise, or when already pinned, they stay as they are.
    pub fn pin(self, pool: &PinnedPool) -> Scalars {
        match self {
            Scalars::Heap(v) => match pool.copy_of(&v) {
                Some(lease) => Scalars::Pinned(lease),
                None => Scalars::Heap(v),
            },
            pinned => pinned,
        }
    }

    /// Whether they are in page-locked memory.
    pub fn is_pinned(&self) -> bool {
        matches!(self, Scalars::Pinned(_))
    }

    /// Host bytes they hold (a vector's capacity, a block's size).
    pub fn host_bytes(&self) -> usize {
        match self {
            Scalars::Heap(v) => v.capacity() * std::mem::size_of::<Scalar>(),
            Scalars::Pinned(l) => l.bytes(),
        }
    }
}

impl From<Vec<Scalar>> for Scalars {
    fn from(v: Vec<Scalar>) -> Self {
        Scalars::Heap(v)
    }
}

impl Deref for Scalars {
    type Target = [Scalar];
    fn deref(&self) -> &[Scalar] {
        match self {
            Scalars::Heap(v) => v,
            Scalars::Pinned(l) => l,
        }
    }
}

impl DerefMut for Scalars {
    fn deref_mut(&mut self) -> &mut [Scalar] {
        match self {
            Scalars::Heap(v) => v,
            Scalars::Pinned(l) => l,
        }
    }
}

impl std::fmt::Debug for Scalars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_pinned() { "pinned" } else { "heap" };
        write!(f, "Scalars({kind}, {} values)", self.len())
    }
}

/// A heap block (ordinary memory): the pool's allocator in tests, and a stand-in where no
/// device is at hand.
pub struct HeapBlock {
    /// Owns the memory; only reached through `ptr` after construction.
    _words: Box<[u64]>,
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the block owns its memory (the boxed words, never moved out or touched through the
// box after `new`); who writes through `ptr` is decided by the pool's leases, which lend a
// block to one owner at a time.
unsafe impl Send for HeapBlock {}
// SAFETY: as above: `&HeapBlock` only hands out the address.
unsafe impl Sync for HeapBlock {}

impl HeapBlock {
    /// A zeroed block of at least `bytes`, aligned for u64 (and Scalar).
    pub fn new(bytes: usize) -> Self {
        let mut words = vec![0u64; bytes.div_ceil(8)].into_boxed_slice();
        let ptr = words.as_mut_ptr().cast::<u8>();
        HeapBlock {
            bytes: words.len() * 8,
            _words: words,
            ptr,
        }
    }
}

impl RawBlock for HeapBlock {
    fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// An allocator of [`HeapBlock`]s.
pub fn heap_allocator() -> HostAllocator {
    Arc::new(|bytes: usize| Ok(Box::new(HeapBlock::new(bytes)) as Box<dyn RawBlock>))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    fn values(n: usize, seed: u64) -> Vec<Scalar> {
        (0..n as u64).map(|i| Scalar::from(i * 31 + seed)).collect()
    }

    #[test]
    fn a_pinned_copy_holds_the_values_and_returns_its_block() {
        let pool = PinnedPool::new(64 << 20, heap_allocator());
        let v = values(100_000, 7);
        let s = Scalars::from(v.clone()).pin(&pool);
        assert!(s.is_pinned());
        assert_eq!(&s[..], &v[..]);
        assert_eq!(s.host_bytes(), 4 << 20, "two granules for 3.2 MB");
        let st = pool.stats();
        assert_eq!((st.held, st.lent, st.leases), (4 << 20, 4 << 20, 1));
        assert_eq!(s.into_vec(), v, "copied out whole");
        assert_eq!(pool.stats().lent, 0, "back in the pool");
        // The same shape again reuses the block: nothing more is held.
        let again = Scalars::from(values(100_000, 9)).pin(&pool);
        assert!(again.is_pinned());
        assert_eq!(pool.stats().held, 4 << 20);
    }

    #[test]
    fn the_limit_is_kept_and_a_miss_stays_on_the_heap() {
        let pool = PinnedPool::new(5 << 20, heap_allocator());
        let a = Scalars::from(values(60_000, 1)).pin(&pool); // 1.9 MB: one granule
        let b = Scalars::from(values(60_000, 2)).pin(&pool);
        assert!(a.is_pinned() && b.is_pinned());
        let c = Scalars::from(values(60_000, 3)).pin(&pool);
        assert!(!c.is_pinned(), "a third granule would pass 5 MiB");
        assert_eq!(&c[..], &values(60_000, 3)[..]);
        let st = pool.stats();
        assert_eq!((st.held, st.misses), (4 << 20, 1));
        // Free blocks that do not fit a larger request are dropped to make room for it.
        drop((a, b));
        let big = Scalars::from(values(90_000, 4)).pin(&pool); // 2.9 MB: two granules
        assert!(big.is_pinned());
        assert_eq!(pool.stats().held, 4 << 20, "{:?}", pool.stats());
    }

    #[test]
    fn a_request_that_cannot_fit_keeps_the_free_blocks() {
        let pool = PinnedPool::new(6 << 20, heap_allocator());
        let a = Scalars::from(values(60_000, 1)).pin(&pool); // one granule
        drop(Scalars::from(values(60_000, 2)).pin(&pool)); // one granule, free again
                                                           // 4.5 MB: three granules; with `a` lent only 4 MiB could ever be had.
        let big = Scalars::from(values(140_000, 3)).pin(&pool);
        assert!(!big.is_pinned());
        assert_eq!(pool.stats().held, 4 << 20, "the free block was kept");
        assert!(Scalars::from(values(60_000, 4)).pin(&pool).is_pinned());
        assert_eq!(pool.stats().held, 4 << 20, "and reused");
        drop(a);
    }

    #[test]
    fn a_rounded_up_block_is_accounted_as_made() {
        let rounding: HostAllocator =
            Arc::new(
                |bytes: usize| Ok(Box::new(HeapBlock::new(bytes + 4096)) as Box<dyn RawBlock>),
            );
        let pool = PinnedPool::new(64 << 20, rounding);
        let s = Scalars::from(values(1000, 1)).pin(&pool);
        assert_eq!(pool.stats().held, (2 << 20) + 4096);
        drop(s);
        let st = pool.stats();
        assert_eq!((st.held, st.lent), ((2 << 20) + 4096, 0));
    }

    #[test]
    fn a_large_free_block_is_not_lent_to_a_small_request() {
        let pool = PinnedPool::new(64 << 20, heap_allocator());
        drop(Scalars::from(values(400_000, 1)).pin(&pool)); // 12.8 MB: 14 MiB block
        let small = Scalars::from(values(1000, 2)).pin(&pool);
        assert!(small.is_pinned());
        assert_eq!(small.host_bytes(), 2 << 20, "a block of its own size");
        assert_eq!(pool.stats().held, 16 << 20);
    }

    #[test]
    fn an_allocator_failure_is_said_once_and_not_retried() {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let failing: HostAllocator = Arc::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Err("RLIMIT_MEMLOCK".into())
        });
        let pool = PinnedPool::new(64 << 20, failing);
        for _ in 0..3 {
            assert!(!Scalars::from(values(10, 1)).pin(&pool).is_pinned());
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        let st = pool.stats();
        assert_eq!((st.held, st.lent, st.misses), (0, 0, 3));
    }

    #[test]
    fn empty_and_mutable_views() {
        let pool = PinnedPool::new(64 << 20, heap_allocator());
        assert!(!Scalars::from(Vec::new()).pin(&pool).is_pinned());
        let mut s = Scalars::from(values(10, 0)).pin(&pool);
        s[3] = Scalar::ONE;
        assert_eq!(s[3], Scalar::ONE);
        assert_eq!(format!("{s:?}"), "Scalars(pinned, 10 values)");
    }
}
