// tidy-fixture: as src/prover/planted.rs
// `unsafe` with and without its SAFETY comment.

fn bytes(v: &[u64]) -> &[u8] {
    // SAFETY: u64s have no padding; the view covers exactly the slice.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) }
}

fn undocumented(v: &[u64]) -> &[u8] {
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8) } // tidy-expect: safety
}

fn assigned(p: *const u8) -> u8 {
    // SAFETY: the caller passes a valid pointer; this comment covers the whole statement,
    // which spans several lines.
    let x = check(
        1,
        unsafe { *p },
    );
    let y = unsafe { *p }; // tidy-expect: safety
    // SAFETY: this comment is separated from its block by a blank line.

    let z = unsafe { *p }; // tidy-expect: safety
    // SAFETY: this comment belongs to the statement below it, not to the next block.
    let w = 1;
    unsafe { // tidy-expect: safety
        *p
    }
}

struct Shared(*mut u8);
// SAFETY: only one thread writes, behind a lock.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {} // tidy-expect: safety

/// Reads a byte.
///
/// # Safety
/// `p` must be valid for reads.
#[inline]
unsafe fn read(p: *const u8) -> u8 {
    // SAFETY: the caller's promise, passed on.
    unsafe { *p }
}

/// Reads a byte, without saying when that is allowed.
unsafe fn read_undocumented(p: *const u8) -> u8 { // tidy-expect: safety
    // SAFETY: the caller's promise (which nobody wrote down).
    unsafe { *p }
}

/// # Safety
/// Every method needs AVX-512.
trait Packed {
    /// Loads; the trait's Safety section holds the contract.
    unsafe fn load(p: *const u8) -> Self;
}

impl Packed for u8 {
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the trait's contract.
        unsafe { *p }
    }
}

struct Callbacks {
    f: unsafe fn(*const u8) -> u8, // a function pointer type declares nothing
}

fn words() -> &'static str {
    "unsafe { in a string }"
}

unsafe extern "C" { // tidy-expect: safety
    fn abs(x: i32) -> i32;
}

fn grouped(p: *const u8) -> u8 {
    // SAFETY (the three reads): `p` is valid, checked by the caller.
    let a = unsafe { *p };
    let b = unsafe { *p };
    let c = unsafe { *p };

    let d = unsafe { *p }; // tidy-expect: safety
    a + b + c + d
}
