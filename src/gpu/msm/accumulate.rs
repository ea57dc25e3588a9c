//! `accumulate`: the bucket sums, launched a piece of chunks at a time so that a caller taking
//! turns on the device may let another caller go between pieces ([`super::MsmRun`]).

use super::{Curve, Kernel};
use crate::gpu::device::{DevBuf, DevView, Gpu};
use crate::gpu::kernels::{self as k, Arg};
use crate::gpu::GpuError;

/// A G2 mixed addition costs about three G1 ones (an Fp2 product is three Fp products), so a
/// G2 piece holds a third of the entries for about the same device time.
const G2_COST: u64 = 3;

/// Threads per block of the batch-affine walk (`AFF_THREADS` in `cuda/msm_affine.cu`): the
/// chains that share one product tree.
const AFFINE_BLOCK: u64 = 128;
/// Block products per inversion (`AFF_INV_THREADS`).
const AFFINE_INVERT_BLOCK: u64 = 256;

/// How the chunks are summed.
enum Walk {
    /// One thread per chunk, mixed XYZZ additions (`msm_chunks_*`); a unit is a chunk.
    Xyzz,
    /// Every chunk's chain a step at a time, affine, the inverses shared per block
    /// (`cuda/msm_affine.cu`); a unit is a step. `prods` holds a field element per block of
    /// [`AFFINE_BLOCK`] chains.
    Affine { prods: DevBuf },
}

/// Bucket sums in progress (XYZZ, `nb` of them) from the bucket-sorted `list` of `total`
/// entries: chunks of exactly K entries per thread (msm_chunks_*, balanced whatever the bucket
/// sizes), launched in pieces of about [`crate::gpu::MsmTuning::accumulate_piece`] entries,
/// then the buckets that cross chunks (msm_combine_*). K ≥ CHUNK_MIN and about √(largest
/// bucket), so that combining a bucket takes at most about √max additions (a few buckets hold
/// a large share of the points when the top window is narrow or real witnesses repeat values).
pub(super) struct Accumulation {
    curve: Curve,
    list: DevBuf,
    offsets: DevBuf,
    nb: u64,
    total: u64,
    k: u64,
    chunks: u64,
    walk: Walk,
    /// Units (chunks or steps, [`Accumulation::units`]) per piece, and those launched.
    per_piece: u64,
    next: u64,
    buckets: DevBuf,
    head: DevBuf,
    tail: DevBuf,
}

impl Accumulation {
    /// Sizes the chunks from the largest bucket and allocates the sums; launches nothing yet.
    pub(super) fn new(
        gpu: &Gpu,
        curve: Curve,
        list: DevBuf,
        offsets: DevBuf,
        nb: u64,
        total: u64,
    ) -> Result<Self, GpuError> {
        let max = gpu.alloc_zeroed(4)?;
        gpu.launch(
            &k::MSM_MAX_BUCKET,
            nb.div_ceil(256),
            256,
            &[(&offsets).into(), Arg::u32(nb)?, (&max).into()],
        )?;
        let mut m = [0u8; 4];
        gpu.download(&max, &mut m)?;
        let max_size = u32::from_le_bytes(m) as f64;
        let tuning = &gpu.options().msm;
        let k = (max_size.sqrt().ceil() as u64).max(tuning.chunk_min.max(1));
        let chunks = total.div_ceil(k);
        let entries = match curve {
            Curve::G1 => tuning.accumulate_piece,
            Curve::G2 => tuning.accumulate_piece / G2_COST,
        };
        let affine = curve == Curve::G1
            && tuning
                .batch_affine_min_chains
                .is_some_and(|min| chunks >= min.max(1));
        let (walk, per_piece) = if affine {
            let blocks = chunks.div_ceil(AFFINE_BLOCK) as usize;
            let prods = gpu.alloc(blocks * curve.field_bytes())?;
            // A step moves every chain by one entry: `entries / chunks` steps hold about
            // `entries` additions.
            (Walk::Affine { prods }, (entries / chunks).max(1))
        } else {
            (Walk::Xyzz, (entries / k).max(1))
        };
        Ok(Accumulation {
            curve,
            nb,
            total,
            k,
            chunks,
            walk,
            per_piece,
            next: 0,
            buckets: gpu.alloc(nb as usize * curve.xyzz_bytes())?,
            head: gpu.alloc(chunks as usize * curve.xyzz_bytes())?,
            tail: gpu.alloc(chunks as usize * curve.xyzz_bytes())?,
            list,
            offsets,
        })
    }

    /// The units of work: chunks of the XYZZ walk, steps (K) of the batch-affine one.
    fn units(&self) -> u64 {
        match self.walk {
            Walk::Xyzz => self.chunks,
            Walk::Affine { .. } => self.k,
        }
    }

    /// Whether chunks (or steps) remain to be launched.
    pub(super) fn pending(&self) -> bool {
        self.next < self.units()
    }

    /// Launches the next piece of chunks. Where more remain, waits for it: a caller that lets
    /// the device go after it leaves no queued work for the next one to wait behind.
    pub(super) fn piece(&mut self, gpu: &Gpu, bases: DevView) -> Result<(), GpuError> {
        let first = self.next;
        let last = first.saturating_add(self.per_piece).min(self.units());
        if let Walk::Affine { prods } = &self.walk {
            for j in first..last {
                self.affine_step(gpu, bases, prods, j)?;
            }
        } else if last > first {
            gpu.launch(
                self.curve.kernel(Kernel::Chunks),
                (last - first).div_ceil(128),
                128,
                &[
                    bases.into(),
                    (&self.list).into(),
                    (&self.offsets).into(),
                    Arg::u32(self.nb)?,
                    Arg::u32(self.total)?,
                    Arg::u32(self.k)?,
                    Arg::u32(first)?,
                    Arg::u32(last)?,
                    (&self.buckets).into(),
                    (&self.head).into(),
                    (&self.tail).into(),
                ],
            )?;
        }
        self.next = last;
        if self.pending() {
            gpu.sync()?;
        }
        Ok(())
    }

    /// Step `j` of the batch-affine walk: step 0 starts every chain; a later step first inverts
    /// the block products the step before left.
    fn affine_step(
        &self,
        gpu: &Gpu,
        bases: DevView,
        prods: &DevBuf,
        j: u64,
    ) -> Result<(), GpuError> {
        let blocks = self.chunks.div_ceil(AFFINE_BLOCK);
        // Both kernels read (bases, list, offsets, …, chains, prods, buckets, head, tail); in
        // between, step 0 takes the bucket count for its search, a later step its index.
        let middle = if j == 0 {
            [Arg::u32(self.nb)?, Arg::u32(self.total)?, Arg::u32(self.k)?]
        } else {
            gpu.launch(
                &k::MSM_AFFINE_INVERT,
                blocks.div_ceil(AFFINE_INVERT_BLOCK),
                AFFINE_INVERT_BLOCK as u32,
                &[prods.into(), Arg::u32(blocks)?],
            )?;
            [Arg::u32(self.total)?, Arg::u32(self.k)?, Arg::u32(j)?]
        };
        let mut args = vec![bases.into(), (&self.list).into(), (&self.offsets).into()];
        args.extend(middle);
        args.extend([
            Arg::u32(self.chunks)?,
            prods.into(),
            (&self.buckets).into(),
            (&self.head).into(),
            (&self.tail).into(),
        ]);
        let kernel = match j {
            0 => &k::MSM_AFFINE_INIT_G1,
            _ => &k::MSM_AFFINE_STEP_G1,
        };
        gpu.launch(kernel, blocks, AFFINE_BLOCK as u32, &args)
    }

    /// The bucket sums once every piece is launched: the buckets that cross chunks combined.
    pub(super) fn combine(self, gpu: &Gpu) -> Result<DevBuf, GpuError> {
        if self.pending() {
            return Err(GpuError::Input(format!(
                "bucket sums combined after {} of {} chunks or steps",
                self.next,
                self.units()
            )));
        }
        gpu.launch(
            self.curve.kernel(Kernel::Combine),
            self.nb.div_ceil(128),
            128,
            &[
                (&self.offsets).into(),
                Arg::u32(self.nb)?,
                Arg::u32(self.k)?,
                (&self.head).into(),
                (&self.tail).into(),
                (&self.buckets).into(),
            ],
        )?;
        Ok(self.buckets)
    }
}
