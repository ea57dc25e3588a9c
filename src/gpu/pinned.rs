//! Page-locked host memory. Blocks for the prover's [`PinnedPool`](crate::prover::PinnedPool),
//! allocated portable, so that every device's context reads them by DMA (a partition pinned
//! for the pool may be proved on any GPU); and memory owned elsewhere registered in place
//! ([`PinnedHost`]): the parameters' points and the recorded shapes that a device of a small
//! memory plan streams.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext};

use super::GpuError;
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

/// Host memory someone else owns — a parameter set's points, a recorded shape's rows — made
/// page-locked in place (`cuMemHostRegister`, portable to every context) for as long as this
/// lives, so that a device streams it by DMA at the bus's full rate instead of through the
/// staging copies. Registrations are counted per address for the whole process: a second
/// device registering the same memory shares the first registration, and the memory is
/// unregistered when the last one goes. The owner of the memory must outlive it
/// ([`PinnedHost`] ties the two together).
pub(crate) struct Registration {
    ptr: usize,
}

/// The addresses registered by this process, and how many [`Registration`]s share each.
static REGISTERED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// Smallest range worth registering: smaller ones go through the staging buffers, and the
/// heap may share their pages with other allocations.
pub(crate) const MIN_REGISTERED: usize = 1 << 20;

impl Registration {
    /// Registers `bytes` (at least [`MIN_REGISTERED`] long) in `ctx`, or shares its existing
    /// registration.
    pub(crate) fn new(ctx: &CudaContext, bytes: &[u8]) -> Result<Self, GpuError> {
        if bytes.len() < MIN_REGISTERED {
            return Err(GpuError::Input(format!(
                "{} bytes are too few to register",
                bytes.len()
            )));
        }
        let ptr = bytes.as_ptr() as usize;
        let mut map = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = map.get_mut(&ptr) {
            *count += 1;
            return Ok(Registration { ptr });
        }
        ctx.bind_to_thread()
            .map_err(|e| GpuError::driver("cuCtxSetCurrent", e))?;
        // SAFETY: `bytes` is a live host allocation of the caller's, which (by this type's
        // contract) outlives the registration; the driver only locks its pages and maps them
        // for the devices, it writes nothing.
        unsafe {
            sys::cuMemHostRegister_v2(
                bytes.as_ptr() as *mut c_void,
                bytes.len(),
                sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()
        .map_err(|e| GpuError::driver("cuMemHostRegister", e))?;
        map.insert(ptr, 1);
        Ok(Registration { ptr })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        let last = match map.get_mut(&self.ptr) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            _ => true,
        };
        if last {
            map.remove(&self.ptr);
            // SAFETY: the address was registered by `Registration::new` and is unregistered
            // once, by its last holder, while its owner (which outlives every registration)
            // still holds it. Unregistration needs no context; a failure leaves the pages
            // locked until the process ends, which is all that can be done from drop.
            let _ = unsafe { sys::cuMemHostUnregister(self.ptr as *mut c_void) };
        }
    }
}

/// Host memory registered in place, with the owner it belongs to: the registrations are
/// dropped before the owner (field order), so the memory is never freed while registered.
pub(crate) struct PinnedHost<T: ?Sized> {
    registrations: Vec<Registration>,
    owner: Arc<T>,
}

impl<T: ?Sized> PinnedHost<T> {
    /// Registers the ranges `ranges` picks from `owner` that are at least [`MIN_REGISTERED`]
    /// long; a range the driver refuses is left pageable (it goes through the staging buffers)
    /// and named in the returned warnings.
    pub(crate) fn new(
        ctx: &CudaContext,
        owner: Arc<T>,
        ranges: impl Fn(&T) -> Vec<&[u8]>,
    ) -> (Self, Vec<GpuError>) {
        let mut registrations = Vec::new();
        let mut refused = Vec::new();
        for bytes in ranges(&owner) {
            if bytes.len() < MIN_REGISTERED {
                continue;
            }
            match Registration::new(ctx, bytes) {
                Ok(r) => registrations.push(r),
                Err(e) => refused.push(e),
            }
        }
        (
            PinnedHost {
                registrations,
                owner,
            },
            refused,
        )
    }

    /// The owner.
    pub(crate) fn owner(&self) -> &Arc<T> {
        &self.owner
    }

    /// How many ranges are registered.
    pub(crate) fn registered(&self) -> usize {
        self.registrations.len()
    }
}
