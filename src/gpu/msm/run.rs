//! [`MsmRun`]: an MSM taken in steps, between which a caller taking turns on the device may
//! let another caller go.

use super::accumulate::Accumulation;
use super::{
    check_lengths, classify, redigit_if_sparse, sort_by_bucket, sum_ones, window_sums, Curve,
    Digits, Front, MsmParts, Source, Trace,
};
use crate::gpu::device::{DevBuf, DevView, Gpu};
use crate::gpu::GpuError;

/// An MSM over scalars already on the device, taken in steps between which the caller may let
/// the device go: the front end in [`MsmRun::new`], the sort by bucket, then the bucket sums
/// a piece at a time (about [`super::MsmTuning::accumulate_piece`] entries each, the device
/// idle after each piece but the last), then the window sums. Every step is given the bases:
/// a caller that let the device go may find them evicted and uploaded again elsewhere.
pub struct MsmRun {
    curve: Curve,
    stage: Stage,
    tr: Trace,
    /// What the MSM is, for the trace event.
    what: String,
}

enum Stage {
    /// The front end done: the counting sort by bucket is the next step.
    Sorting {
        digits: Box<Digits>,
        rest_idx: DevBuf,
        m: u64,
        ones: Option<Vec<u64>>,
    },
    Accumulating {
        c: u32,
        ones: Option<Vec<u64>>,
        acc: Box<Accumulation>,
    },
    Done(MsmParts),
    /// A step failed part way.
    Failed,
}

impl MsmRun {
    /// [`msm_device`]'s MSM, up to its first piece of bucket sums.
    pub fn new(
        gpu: &Gpu,
        curve: Curve,
        bases: &DevBuf,
        n: usize,
        scalars: DevBuf,
    ) -> Result<Self, GpuError> {
        if scalars.len() < n * 32 {
            return Err(GpuError::Input(format!(
                "{} scalar bytes on the device for {n} bases",
                scalars.len()
            )));
        }
        Self::start(gpu, curve, bases.view(), n, Source::Device(scalars))
    }

    /// `front`, `ones`, `redigits`; the sort is the first step.
    pub(super) fn start(
        gpu: &Gpu,
        curve: Curve,
        bases: DevView,
        n: usize,
        source: Source<'_>,
    ) -> Result<Self, GpuError> {
        check_lengths(curve, bases, n)?;
        let mut tr = Trace::new(gpu);
        let pieces = match &source {
            Source::Host { chunk, .. } => format!("upload chunk={chunk}"),
            Source::Device(_) | Source::View(_) => "scalars on the device".to_string(),
        };
        let front = classify(gpu, curve, n, source)?;
        tr.mark(gpu, "front")?;
        let Front {
            scalars,
            ones_idx,
            rest_idx,
            n_ones,
            m,
            digits,
        } = front;
        let ones = sum_ones(gpu, curve, bases, ones_idx, n_ones)?;
        tr.mark(gpu, "ones")?;
        if m == 0 {
            let parts = MsmParts {
                window_bits: digits.c,
                windows: Vec::new(),
                ones,
            };
            return Ok(MsmRun {
                curve,
                stage: Stage::Done(parts),
                tr,
                what: String::new(),
            });
        }
        let digits = redigit_if_sparse(gpu, curve, digits, &scalars, &rest_idx, m, &mut tr)?;
        // The scalars are not read again (freed in stream order, after msm_digits).
        drop(scalars);
        let c = digits.c;
        let what = format!("{curve:?} n={n} ones={n_ones} full={m} c={c} {pieces}");
        let stage = Stage::Sorting {
            digits: Box::new(digits),
            rest_idx,
            m,
            ones,
        };
        Ok(MsmRun {
            curve,
            stage,
            tr,
            what,
        })
    }

    /// `scan`, `scatter`, and the accumulation sized (its first piece is the next step).
    fn sort(
        &mut self,
        gpu: &Gpu,
        digits: Digits,
        rest_idx: DevBuf,
        m: u64,
    ) -> Result<Box<Accumulation>, GpuError> {
        let sorted = sort_by_bucket(gpu, digits, rest_idx, m, &mut self.tr)?;
        let acc = Accumulation::new(
            gpu,
            self.curve,
            sorted.list,
            sorted.offsets,
            sorted.buckets,
            sorted.total,
        )?;
        Ok(Box::new(acc))
    }

    /// The next step on `bases` (the same points as at the start); false once the sum is done
    /// and [`MsmRun::finish`] has it.
    pub fn step(&mut self, gpu: &Gpu, bases: &DevBuf) -> Result<bool, GpuError> {
        self.step_view(gpu, bases.view())
    }

    pub(super) fn step_view(&mut self, gpu: &Gpu, bases: DevView) -> Result<bool, GpuError> {
        match std::mem::replace(&mut self.stage, Stage::Failed) {
            Stage::Sorting {
                digits,
                rest_idx,
                m,
                ones,
            } => {
                let c = digits.c;
                let acc = self.sort(gpu, *digits, rest_idx, m)?;
                self.stage = Stage::Accumulating { c, ones, acc };
                Ok(true)
            }
            Stage::Accumulating { c, ones, mut acc } if acc.pending() => {
                acc.piece(gpu, bases)?;
                self.stage = Stage::Accumulating { c, ones, acc };
                Ok(true)
            }
            Stage::Accumulating { c, ones, acc } => {
                let buckets = acc.combine(gpu)?;
                self.tr.mark(gpu, "accumulate")?;
                let windows = window_sums(gpu, self.curve, &buckets, c, &mut self.tr)?;
                self.tr.emit(&self.what);
                self.stage = Stage::Done(MsmParts {
                    window_bits: c,
                    windows,
                    ones,
                });
                Ok(false)
            }
            done @ Stage::Done(_) => {
                self.stage = done;
                Ok(false)
            }
            Stage::Failed => Err(failed()),
        }
    }

    /// After a step: whether it sorted or launched a piece of bucket sums, waited for it, and
    /// left pieces to launch (the device is idle, and the next step reads the bases again).
    pub fn between_pieces(&self) -> bool {
        matches!(&self.stage, Stage::Accumulating { acc, .. } if acc.pending())
    }

    /// The sum's pieces, once [`MsmRun::step`] has returned false.
    pub fn finish(self) -> Result<MsmParts, GpuError> {
        match self.stage {
            Stage::Done(parts) => Ok(parts),
            Stage::Sorting { .. } | Stage::Accumulating { .. } => Err(GpuError::Input(
                "an MSM finished before its last step".into(),
            )),
            Stage::Failed => Err(failed()),
        }
    }
}

fn failed() -> GpuError {
    GpuError::Input("an MSM step failed part way: the MSM cannot go on".into())
}
