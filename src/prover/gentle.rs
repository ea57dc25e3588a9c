//! Large frees that do not stall the process's other threads ([`GentleAlloc`]).
//!
//! Why: freeing a heap block of gigabytes unmaps it, and the kernel holds the process's
//! memory-map lock while it hands every page of it back. Meanwhile every thread that maps
//! memory waits: a new thread (its stack, its first allocation's arena), a large allocation,
//! the GPU driver's own mappings. A proof frees a partition's 4 GiB assignment after each
//! partition, so a WinningPoSt arriving then waited before its partition was even admitted.
//! Handing the pages back first with `madvise(MADV_DONTNEED)`, in pieces, lets the lock go
//! between the pieces; the unmapping that follows finds nothing left to free. It costs the
//! freeing thread no more time than the unmapping alone would.
//!
//! Since Linux 6.16 `MADV_DONTNEED` takes only the mapping's own lock, so one call over the
//! whole block would do there; the pieces are for the older kernels a distribution may run,
//! where each call holds the memory-map lock for reading until it is done.
//!
//! A large block given back through `realloc` is handed back the same way where the system
//! allocator would copy it (alignments above 16 bytes); a large block shrunk in place is
//! passed on as it is (its tail unmapped at once: the vectors here shrink only capacity they
//! never touched).
//!
//! The binaries install it as their global allocator; library code never assumes it.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are handed back in pieces before they are freed.
pub const GENTLE_FROM: usize = 64 << 20;

/// The bytes handed back at a time, at most: what another thread that maps memory may wait
/// for. A power of two, so that the cuts fall on huge-page boundaries (2 MiB) too.
pub const PIECE: usize = 32 << 20;

/// The alignment up to which the system allocator reallocates in place (glibc's `realloc`);
/// above it, it copies into a new block and frees the old one itself.
const SYSTEM_REALLOC_ALIGN: usize = 16;

/// The system allocator, but a block of [`GENTLE_FROM`] bytes or more has its pages handed
/// back in pieces of [`PIECE`] before it is freed.
pub struct GentleAlloc;

// SAFETY: every block comes from the system allocator and goes back to it. Before a large
// block goes back, `dealloc` drops the whole pages inside its own bytes, which the caller has
// given up: for private anonymous memory that is the same as writing zeros there, which any
// owner of those bytes may do, and an allocator keeps nothing it needs in a block it has
// handed out. `realloc` of a large over-aligned block is an allocation, a copy of the bytes
// both layouts hold and this `dealloc`, as the system allocator itself does it.
unsafe impl GlobalAlloc for GentleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let in_place = layout.align() <= SYSTEM_REALLOC_ALIGN && layout.align() <= new_size;
        if in_place || layout.size() < GENTLE_FROM {
            // SAFETY: the caller's contract for `realloc`, passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // The system allocator would copy and free the old block without handing it back.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `new_size` is non-zero (the caller's contract for `realloc`).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live and distinct, each at least as long as the bytes
            // copied; the old one is then given back once, with the layout it was made with.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= GENTLE_FROM {
            // SAFETY: `ptr` is a live block of `layout.size()` bytes that the caller gives up
            // here: its contents are never read again.
            unsafe { hand_back(ptr, layout.size()) };
        }
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Drops the whole pages of the `len` bytes at `ptr` from the process, at most [`PIECE`]
/// bytes at a time: they read as zeros afterwards (private anonymous memory) until written.
/// A range the kernel refuses (mlocked pages, say) is left as it is: this is only a head start
/// on freeing them. Pages a GPU driver has page-locked in place (`cuMemHostRegister`) are not
/// mlocked and would be dropped: such a registration must end before its memory is given
/// back, as `gpu::pinned`'s registrations do (they are dropped before what they lock).
///
/// # Safety
/// `ptr..ptr + len` must be memory this process owns and whose contents no one needs; the
/// bytes outside its whole pages are left alone.
pub unsafe fn hand_back(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract, passed on.
    unsafe { hand_back_in(ptr, len, PIECE) }
}

/// [`hand_back`] in runs of at most `piece` bytes (see [`pieces`]; `1 << 62`: in one call).
///
/// # Safety
/// As for [`hand_back`].
pub unsafe fn hand_back_in(ptr: *mut u8, len: usize, piece: usize) {
    for (start, bytes) in pieces(ptr as usize, len, page_size(), piece) {
        // SAFETY: `start..start + bytes` is whole pages inside the caller's range, which the
        // caller says no one reads; madvise only changes which pages back it. Its result is
        // ignored: a refused piece is freed with the block as before.
        unsafe { libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_DONTNEED) };
    }
}

/// The whole pages of `len` bytes at address `start` (pages of `page` bytes, a power of
/// two), in order, cut at the multiples of `piece` (rounded up to a power of two of at least
/// a page): runs of at most `piece` bytes, the inner ones aligned to it.
pub fn pieces(
    start: usize,
    len: usize,
    page: usize,
    piece: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let first = start.checked_add(page - 1).map(|a| a & !(page - 1));
    let end = start.saturating_add(len) & !(page - 1);
    let (mut at, end) = match first {
        Some(f) if f < end => (f, end),
        _ => (0, 0),
    };
    let piece = piece.max(page).next_power_of_two();
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let cut = (at | (piece - 1)).saturating_add(1).min(end);
        let run = (at, cut - at);
        at = cut;
        Some(run)
    })
}

/// The kernel's page size (4 KiB where it cannot say).
fn page_size() -> usize {
    // SAFETY: sysconf takes an integer and returns one; it reads no memory of ours.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    #[test]
    fn pieces_cover_the_whole_pages_inside_the_range_cut_at_multiples_of_the_piece() {
        let got: Vec<_> = pieces(PAGE * 10, PAGE * 7, PAGE, PAGE * 4).collect();
        assert_eq!(
            got,
            [
                (PAGE * 10, PAGE * 2),
                (PAGE * 12, PAGE * 4),
                (PAGE * 16, PAGE)
            ]
        );
    }

    #[test]
    fn a_piece_is_rounded_up_to_a_power_of_two_of_at_least_a_page() {
        let runs = |piece| pieces(PAGE * 10, PAGE * 7, PAGE, piece).collect::<Vec<_>>();
        assert_eq!(runs(PAGE * 3), runs(PAGE * 4));
        assert_eq!(
            runs(PAGE * 4),
            [
                (PAGE * 10, PAGE * 2),
                (PAGE * 12, PAGE * 4),
                (PAGE * 16, PAGE)
            ]
        );
        let got: Vec<_> = pieces(PAGE, PAGE * 2, PAGE, 1).collect();
        assert_eq!(got, [(PAGE, PAGE), (PAGE * 2, PAGE)]);
        assert_eq!(
            pieces(PAGE * 10 + 5, PAGE * 7, PAGE, 1 << 62).collect::<Vec<_>>(),
            [(PAGE * 11, PAGE * 6)],
            "one run for the whole block"
        );
    }

    /// The cuts of 32 MiB pieces fall on 2 MiB boundaries, so that no huge page is split.
    #[test]
    fn inner_cuts_fall_on_huge_page_boundaries() {
        let start = (5 << 30) + 3 * PAGE + 17;
        let runs: Vec<_> = pieces(start, 200 << 20, PAGE, PIECE).collect();
        assert!(runs.len() > 2);
        for &(at, len) in &runs[1..] {
            assert_eq!(at % (2 << 20), 0, "{at:#x}");
            assert!(len <= PIECE);
        }
        let covered: usize = runs.iter().map(|r| r.1).sum();
        let (first, last) = (runs[0].0, runs[runs.len() - 1]);
        assert_eq!(covered, last.0 + last.1 - first);
    }

    #[test]
    fn partial_pages_at_either_end_are_left_alone() {
        let got: Vec<_> = pieces(PAGE * 10 + 1, PAGE * 3, PAGE, PAGE * 8).collect();
        assert_eq!(got, [(PAGE * 11, PAGE * 2)]);
        let got: Vec<_> = pieces(PAGE * 10 + 16, PAGE * 3 - 32, PAGE, PAGE * 8).collect();
        assert_eq!(got, [(PAGE * 11, PAGE)]);
    }

    #[test]
    fn a_range_without_a_whole_page_has_no_pieces() {
        assert_eq!(pieces(PAGE * 10 + 1, PAGE, PAGE, PAGE).count(), 0);
        assert_eq!(pieces(PAGE * 10, PAGE - 1, PAGE, PAGE).count(), 0);
        assert_eq!(pieces(PAGE * 10, 0, PAGE, PAGE).count(), 0);
        assert_eq!(pieces(usize::MAX - 10, 100, PAGE, PAGE).count(), 0);
    }

    /// A real block: its whole pages read as zeros once handed back, the bytes outside them
    /// keep their values, and the block is then freed through the allocator.
    #[test]
    fn handed_back_pages_read_as_zeros_and_the_block_frees() {
        let len = GENTLE_FROM + PIECE / 2 + 123;
        let layout = Layout::from_size_align(len, 8).expect("layout");
        // SAFETY: a non-zero size; the block is checked for null before use.
        let ptr = unsafe { GentleAlloc.alloc(layout) };
        assert!(!ptr.is_null());
        // SAFETY: `ptr` is a live block of `len` bytes, reached only through this slice.
        let block = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        block.fill(0xA5);
        let at = block.as_mut_ptr();
        let whole: Vec<_> = pieces(at as usize, len, page_size(), PIECE).collect();
        let (first, last) = (whole[0].0, whole[whole.len() - 1]);
        let (head, tail) = (first - at as usize, last.0 + last.1 - at as usize);
        // SAFETY: the block is ours and its contents are checked only as zeros or untouched.
        unsafe { hand_back(at, len) };
        assert!(block[head..tail].iter().all(|&b| b == 0));
        assert!(block[..head].iter().all(|&b| b == 0xA5));
        assert!(block[tail..].iter().all(|&b| b == 0xA5));
        // SAFETY: `ptr` came from this allocator with `layout`, freed once.
        unsafe { GentleAlloc.dealloc(ptr, layout) };
    }

    /// A large over-aligned block reallocated (which the system allocator would copy and
    /// free itself) keeps its bytes and its alignment, growing and shrinking.
    #[test]
    fn a_large_over_aligned_block_reallocates_with_its_bytes() {
        let len = GENTLE_FROM + 4096 * 3 + 40;
        let byte = |i: usize| (i % 251) as u8;
        for new_len in [len + (8 << 20), GENTLE_FROM - 100] {
            let layout = Layout::from_size_align(len, 64).expect("layout");
            // SAFETY: a non-zero size; the block is checked for null before use.
            let ptr = unsafe { GentleAlloc.alloc(layout) };
            assert!(!ptr.is_null());
            // SAFETY: `ptr` is a live block of `len` bytes.
            let block = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            block.iter_mut().enumerate().for_each(|(i, b)| *b = byte(i));
            // SAFETY: `ptr` came from this allocator with `layout`; `new_len` is non-zero.
            let moved = unsafe { GentleAlloc.realloc(ptr, layout, new_len) };
            assert!(!moved.is_null());
            assert_eq!(moved as usize % 64, 0);
            let kept = len.min(new_len);
            // SAFETY: `moved` is a live block of `new_len` bytes, the first `kept` copied.
            let copy = unsafe { std::slice::from_raw_parts(moved, kept) };
            assert!(
                copy.iter().enumerate().all(|(i, &b)| b == byte(i)),
                "{new_len}"
            );
            let moved_layout = Layout::from_size_align(new_len, 64).expect("layout");
            // SAFETY: `moved` came from this allocator with `moved_layout`, freed once.
            unsafe { GentleAlloc.dealloc(moved, moved_layout) };
        }
    }
}
