//! Page-locked host blocks for the prover's [`PinnedPool`](crate::prover::PinnedPool):
//! allocated portable, so that every device's context reads them by DMA (a partition pinned
//! for the pool may be proved on any GPU).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::prover::{HostAllocator, RawBlock};

/// A block from `cuMemHostAlloc`, freed on drop.
struct PinnedBlock {
    ctx: Arc<CudaContext>,
    ptr: *mut c_void,
    bytes: usize,
}

// SAFETY: the block is plain host memory owned by this value alone (no other handle to the
// allocation exists), so it may be moved to and used from any thread; the driver calls that
// free it bind the context first.
unsafe impl Send for PinnedBlock {}
// SAFETY: shared references only hand out the address; writes go through the pool's lease,
// which owns the block exclusively while it is lent.
unsafe impl Sync for PinnedBlock {}

impl RawBlock for PinnedBlock {
    fn ptr(&self) -> *mut u8 {
        self.ptr.cast()
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // A failure here means the context has failed; the memory goes with the process.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `malloc_host` in this context and is freed once, here;
            // no transfer reads it any more (the lease that lent it was dropped after the
            // device stage synchronized its copies).
            let _ = unsafe { result::free_host(self.ptr) };
        }
    }
}

/// Makes page-locked blocks in `ctx`, portable to every context, cached (the CPU writes
/// them once and the device reads them; write-combined memory would make any host read of
/// a partition, such as the CPU backend's, very slow).
pub(crate) fn allocator(ctx: Arc<CudaContext>) -> HostAllocator {
    Arc::new(move |bytes: usize| {
        ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        // SAFETY: the context is bound to this thread; the returned memory is owned by the
        // block, which frees it once. Its contents are uninitialised: the pool's leases
        // write it before anyone reads it.
        let ptr = unsafe { result::malloc_host(bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| format!("cuMemHostAlloc of {bytes} bytes: {e:?}"))?;
        if ptr.is_null() {
            return Err("cuMemHostAlloc returned null".into());
        }
        Ok(Box::new(PinnedBlock {
            ctx: ctx.clone(),
            ptr,
            bytes,
        }) as Box<dyn RawBlock>)
    })
}
