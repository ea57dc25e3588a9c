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
//! The binaries install it as their global allocator; library code never assumes it.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are handed back in pieces before they are freed.
pub const GENTLE_FROM: usize = 64 << 20;

/// The bytes handed back at a time: what another thread that maps memory may wait for.
pub const PIECE: usize = 32 << 20;

/// The system allocator, but a block of [`GENTLE_FROM`] bytes or more has its pages handed
/// back in pieces of [`PIECE`] before it is freed.
pub struct GentleAlloc;

// SAFETY: every call is passed on to the system allocator unchanged; `dealloc` first only
// drops the pages of a block it is about to free, which no one may read any more (the
// caller gives it up), and never touches the allocator's own bookkeeping (only whole pages
// inside the block's own bytes are dropped).
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
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
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

/// Drops the whole pages of the `len` bytes at `ptr` from the process, [`PIECE`] bytes at a
/// time: they read as zeros afterwards (private anonymous memory) until written. A range
/// the kernel refuses (locked pages, say) is left as it is: this is only a head start on
/// freeing them.
///
/// # Safety
/// `ptr..ptr + len` must be memory this process owns and whose contents no one needs; the
/// bytes outside its whole pages are left alone.
pub unsafe fn hand_back(ptr: *mut u8, len: usize) {
    for (start, bytes) in pieces(ptr as usize, len, page_size(), PIECE) {
        // SAFETY: `start..start + bytes` is whole pages inside the caller's range, which the
        // caller says no one reads; madvise only changes which pages back it. Its result is
        // ignored: a refused piece is freed with the block as before.
        unsafe { libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_DONTNEED) };
    }
}

/// The whole pages of `len` bytes at address `start` (pages of `page` bytes, a power of
/// two), in runs of at most `piece` bytes (a multiple of `page`), in order.
pub fn pieces(
    start: usize,
    len: usize,
    page: usize,
    piece: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let first = start.checked_add(page - 1).map(|a| a & !(page - 1));
    let end = start.saturating_add(len) & !(page - 1);
    let (first, end) = match first {
        Some(f) if f < end => (f, end),
        _ => (0, 0),
    };
    let piece = piece.max(page);
    (first..end)
        .step_by(piece)
        .map(move |at| (at, piece.min(end - at)))
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
    fn pieces_cover_the_whole_pages_inside_the_range_in_order() {
        let got: Vec<_> = pieces(PAGE * 10, PAGE * 7, PAGE, PAGE * 3).collect();
        assert_eq!(
            got,
            [
                (PAGE * 10, PAGE * 3),
                (PAGE * 13, PAGE * 3),
                (PAGE * 16, PAGE)
            ]
        );
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

    #[test]
    fn a_piece_is_never_below_a_page() {
        let got: Vec<_> = pieces(PAGE, PAGE * 2, PAGE, 1).collect();
        assert_eq!(got, [(PAGE, PAGE), (PAGE * 2, PAGE)]);
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
        // SAFETY: `ptr` is a live block of `len` bytes, written and read only inside it.
        let block = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        block.fill(0xA5);
        let whole: Vec<_> = pieces(ptr as usize, len, page_size(), PIECE).collect();
        let (first, last) = (whole[0].0, whole[whole.len() - 1]);
        let (head, tail) = (first - ptr as usize, last.0 + last.1 - ptr as usize);
        // SAFETY: the block is ours and its contents are checked only as zeros or untouched.
        unsafe { hand_back(ptr, len) };
        assert!(block[head..tail].iter().all(|&b| b == 0));
        assert!(block[..head].iter().all(|&b| b == 0xA5));
        assert!(block[tail..].iter().all(|&b| b == 0xA5));
        // SAFETY: `ptr` came from this allocator with `layout`, freed once.
        unsafe { GentleAlloc.dealloc(ptr, layout) };
    }
}
