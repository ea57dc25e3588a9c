//! Host side of the R1CS row kernel (`cuda/r1cs.cu`): a constraint system's shape — its A, B
//! and C matrices in CSR form and their coefficient table — kept on the device, and the rows
//! of the three matrices evaluated there on an assignment, so that A, B and C are on the
//! device for the quotient's transforms without a trip through host memory.
//!
//! [`DeviceShape`] owns the device copy, as sppark's `msm_t` owns its points: created once by
//! [`DeviceShape::upload`] (which checks the shape first, see below), used for any number of
//! assignments by [`DeviceShape::evaluate`] / [`DeviceShape::evaluate_into`], freed when it is
//! dropped. For a 32 GiB PoRep partition it holds about 7.4 GB (724 M terms of 8 bytes, three
//! row-start arrays of 130 M entries, a table of ~1,500 coefficients).
//!
//! The kernel reads wherever the shape's indices point, so everything an index could get wrong
//! is checked on the host before anything runs: row starts that begin at 0, never decrease and
//! end at the number of terms; coefficient indices inside the table, whose entry 0 must be ONE
//! (the kernel adds the value for coefficient 0 without reading the table); and, at each
//! evaluation, input and aux vectors long enough for the largest indices the terms use.
//! Evaluation takes the device handle the shape was uploaded with and refuses any other: its
//! stream is the one that ordered the uploads, and another device could not read the memory.

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::CudaContext;
use ff::Field;
use rayon::prelude::*;

use super::bytes::{bytes, bytes_mut};
use super::device::{DevBuf, DevView, Gpu, Ring};
use super::kernels::{self as k, Arg};
use super::ntt::FR_BYTES;
use super::pinned::PinnedHost;
use super::GpuError;
use crate::synth::{Matrix, R1cs};

/// Bit 31 of [`ShapeTerm::var`]: set for an input (index in the low 31 bits into the input
/// vector), clear for an aux variable (index into the aux vector). `R1CS_INPUT_BIT` in
/// `cuda/r1cs.cu`.
pub const INPUT_BIT: u32 = 1 << 31;

/// Threads per block of `r1cs_rows`: its register cap (`R1CS_MIN_BLOCKS`) is set for blocks
/// of 256.
const BLOCK: u32 = 256;

/// One term of a row: `coeffs[coeff] · value(var)`: the recorded shape's own term type. The
/// kernel reads it as one 8-byte vector (`uint2`: x = var, y = coeff), hence `repr(C)` and
/// the order of its fields.
pub use crate::synth::Term as ShapeTerm;

// The byte view (`bytes::Plain`) and the kernel's 8-byte loads depend on this layout.
const _: () = assert!(std::mem::size_of::<ShapeTerm>() == 8);
const _: () = assert!(std::mem::align_of::<ShapeTerm>() == 4);
const _: () = assert!(INPUT_BIT == crate::synth::INPUT);

/// One matrix in CSR form, borrowed: row r's terms are `terms[starts[r] .. starts[r + 1]]`, so
/// `starts` has one entry more than the matrix has rows.
#[derive(Clone, Copy, Debug)]
pub struct Csr<'a> {
    /// Where each row's terms begin, then the number of terms.
    pub starts: &'a [u32],
    /// Every row's terms, row after row.
    pub terms: &'a [ShapeTerm],
}

/// What a checked shape needs from an assignment: its row count and the shortest input and
/// aux vectors its terms can be evaluated on (one past the largest index used, 0 if none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Needs {
    rows: usize,
    inputs: usize,
    aux: usize,
}

const NAMES: [&str; 3] = ["A", "B", "C"];

/// Most terms in one matrix: the kernel indexes terms with u32 and its warp path steps 32 past
/// a row's last term, which must not wrap. (A 32 GiB partition has ~240 M per matrix.)
const MAX_TERMS: usize = (u32::MAX - 64) as usize;

/// Checks the three matrices and the coefficient table (see the module's documentation) and
/// returns what the shape needs from an assignment.
fn check_shape(mats: [Csr<'_>; 3], coeffs: &[Scalar]) -> Result<Needs, GpuError> {
    let bad = |what: String| Err(GpuError::Input(format!("R1CS shape: {what}")));
    match coeffs.first() {
        None => return bad("empty coefficient table".into()),
        Some(c) if *c != Scalar::ONE => {
            return bad("coefficient 0 is not ONE (the kernel adds the value for it)".into())
        }
        Some(_) => {}
    }
    let Some(rows) = mats[0].starts.len().checked_sub(1) else {
        return bad("A has no row starts (n rows have n + 1)".into());
    };
    // The kernel takes the row count as a u32 and reads starts[row + 1].
    if u32::try_from(rows).is_err() {
        return bad(format!("{rows} rows do not fit a u32"));
    }
    let mut needs = Needs {
        rows,
        inputs: 0,
        aux: 0,
    };
    for (m, name) in mats.iter().zip(NAMES) {
        if m.starts.len() != rows + 1 {
            return bad(format!(
                "{name} has {} row starts, A has {}",
                m.starts.len(),
                rows + 1
            ));
        }
        if m.terms.len() > MAX_TERMS {
            return bad(format!(
                "{name} has {} terms, more than {MAX_TERMS}",
                m.terms.len()
            ));
        }
        if m.starts[0] != 0 {
            return bad(format!("{name}'s first row starts at {}", m.starts[0]));
        }
        if m.starts[rows] as usize != m.terms.len() {
            return bad(format!(
                "{name}'s row starts end at {}, it has {} terms",
                m.starts[rows],
                m.terms.len()
            ));
        }
        if let Some(r) = m.starts.par_windows(2).position_first(|w| w[0] > w[1]) {
            return bad(format!(
                "{name}'s row {r} starts at {} and ends at {}",
                m.starts[r],
                m.starts[r + 1]
            ));
        }
        // One pass for the three maxima; the offending term is looked for only on failure.
        let (inputs, aux, coeff) = m
            .terms
            .par_iter()
            .fold(
                || (0usize, 0usize, 0usize),
                |(i, a, c), t| {
                    let c = c.max(t.coeff as usize);
                    if t.var & INPUT_BIT != 0 {
                        (i.max((t.var & !INPUT_BIT) as usize + 1), a, c)
                    } else {
                        (i, a.max(t.var as usize + 1), c)
                    }
                },
            )
            .reduce(
                || (0, 0, 0),
                |x, y| (x.0.max(y.0), x.1.max(y.1), x.2.max(y.2)),
            );
        if !m.terms.is_empty() && coeff >= coeffs.len() {
            let k = m
                .terms
                .par_iter()
                .position_first(|t| t.coeff as usize >= coeffs.len())
                .unwrap_or(0);
            return bad(format!(
                "{name}'s term {k} uses coefficient {} of a table of {}",
                m.terms[k].coeff,
                coeffs.len()
            ));
        }
        needs.inputs = needs.inputs.max(inputs);
        needs.aux = needs.aux.max(aux);
    }
    Ok(needs)
}

impl Needs {
    /// Refuses an assignment of `inputs` inputs and `aux` aux values shorter than the shape uses.
    fn check_assignment(&self, inputs: usize, aux: usize) -> Result<(), GpuError> {
        if inputs < self.inputs || aux < self.aux {
            return Err(GpuError::Input(format!(
                "R1CS assignment of {inputs} inputs and {aux} aux values; the shape uses {} and {}",
                self.inputs, self.aux
            )));
        }
        Ok(())
    }
}

/// Refuses a device handle other than the one (`ctx`) a shape was made for: its stream ordered
/// the shape's copies, and another device could not read the memory.
fn same_device(ctx: &Arc<CudaContext>, gpu: &Gpu) -> Result<(), GpuError> {
    if Arc::ptr_eq(ctx, &gpu.context()) {
        Ok(())
    } else {
        Err(GpuError::Input(
            "R1CS shape used on another device handle than it was made for".into(),
        ))
    }
}

/// One matrix on the device.
struct DeviceMatrix {
    starts: DevBuf,
    terms: DevBuf,
    len: usize,
}

/// An R1CS shape on the device (see the module's documentation). Dropping it frees its device
/// memory (in the order of the device's stream, after the work already issued on it).
pub struct DeviceShape {
    needs: Needs,
    matrices: [DeviceMatrix; 3],
    coeffs: DevBuf,
    /// The context the buffers live in; evaluation refuses any other.
    ctx: Arc<CudaContext>,
}

impl DeviceShape {
    /// Checks the shape (typed [`GpuError::Input`] on any inconsistency, before any device
    /// memory is taken) and copies it to the device. `coeffs[0]` must be ONE. Returns when the
    /// copies are done (the host slices may then be dropped).
    pub fn upload(
        gpu: &Gpu,
        a: Csr<'_>,
        b: Csr<'_>,
        c: Csr<'_>,
        coeffs: &[Scalar],
    ) -> Result<Self, GpuError> {
        let needs = check_shape([a, b, c], coeffs)?;
        let matrix = |m: Csr<'_>| -> Result<DeviceMatrix, GpuError> {
            Ok(DeviceMatrix {
                starts: upload_bytes(gpu, bytes(m.starts))?,
                terms: upload_bytes(gpu, bytes(m.terms))?,
                len: m.terms.len(),
            })
        };
        let shape = DeviceShape {
            needs,
            matrices: [matrix(a)?, matrix(b)?, matrix(c)?],
            coeffs: upload_bytes(gpu, bytes(coeffs))?,
            ctx: gpu.context(),
        };
        // Uploads from pinned memory return before the copy is done; the caller may free the
        // slices once this returns.
        gpu.sync()?;
        Ok(shape)
    }

    /// Rows of each matrix.
    pub fn rows(&self) -> usize {
        self.needs.rows
    }

    /// Terms of A, B and C.
    pub fn terms(&self) -> [usize; 3] {
        [
            self.matrices[0].len,
            self.matrices[1].len,
            self.matrices[2].len,
        ]
    }

    /// The fewest inputs an assignment must have: one past the largest input index in the
    /// terms.
    pub fn min_inputs(&self) -> usize {
        self.needs.inputs
    }

    /// The fewest aux values an assignment must have: one past the largest aux index in the
    /// terms.
    pub fn min_aux(&self) -> usize {
        self.needs.aux
    }

    /// Device memory the shape holds, in bytes (a matrix without terms holds a buffer of one
    /// byte for them).
    pub fn device_bytes(&self) -> u64 {
        let m: usize = self
            .matrices
            .iter()
            .map(|m| m.starts.len() + m.terms.len())
            .sum();
        (m + self.coeffs.len()) as u64
    }

    fn check_device(&self, gpu: &Gpu) -> Result<(), GpuError> {
        same_device(&self.ctx, gpu)
    }

    fn check_assignment(&self, inputs: usize, aux: usize) -> Result<(), GpuError> {
        self.needs.check_assignment(inputs, aux)
    }

    /// A, B and C evaluated on the assignment `input`, `aux` (device vectors of Fr in
    /// Montgomery form, from their start; a buffer's length in whole elements must cover
    /// [`DeviceShape::min_inputs`] / [`DeviceShape::min_aux`]), written to the first
    /// [`DeviceShape::rows`] elements of `out`'s buffers (each at least that long; the rest is
    /// left as it was, so a caller that pads to an NTT domain zeroes the tail itself with
    /// [`Gpu::zero_range`]). The kernels are issued on the device's stream and not waited for:
    /// work issued after them sees the results.
    pub fn evaluate_into(
        &self,
        gpu: &Gpu,
        input: &DevBuf,
        aux: &DevBuf,
        out: [&mut DevBuf; 3],
    ) -> Result<(), GpuError> {
        self.check_device(gpu)?;
        self.check_assignment(input.len() / FR_BYTES, aux.len() / FR_BYTES)?;
        let rows = self.needs.rows;
        if let Some(short) = out.iter().find(|o| o.len() < rows * FR_BYTES) {
            return Err(GpuError::Input(format!(
                "R1CS output buffer of {} bytes for {rows} rows",
                short.len()
            )));
        }
        for (m, o) in self.matrices.iter().zip(out) {
            gpu.launch(
                &k::R1CS_ROWS,
                (rows as u64).div_ceil(BLOCK as u64),
                BLOCK,
                &[
                    (&m.starts).into(),
                    (&m.terms).into(),
                    (&self.coeffs).into(),
                    input.into(),
                    aux.into(),
                    (&*o).into(),
                    Arg::u32(rows)?,
                ],
            )?;
        }
        Ok(())
    }

    /// [`DeviceShape::evaluate_into`] new buffers of [`DeviceShape::rows`] elements each:
    /// (A, B, C) on the device.
    pub fn evaluate(
        &self,
        gpu: &Gpu,
        input: &DevBuf,
        aux: &DevBuf,
    ) -> Result<(DevBuf, DevBuf, DevBuf), GpuError> {
        self.check_device(gpu)?;
        self.check_assignment(input.len() / FR_BYTES, aux.len() / FR_BYTES)?;
        let bytes = self.needs.rows * FR_BYTES;
        let (mut a, mut b, mut c) = (gpu.alloc(bytes)?, gpu.alloc(bytes)?, gpu.alloc(bytes)?);
        self.evaluate_into(gpu, input, aux, [&mut a, &mut b, &mut c])?;
        Ok((a, b, c))
    }

    /// A, B and C on the host for a host assignment (uploaded for this call): for tests and
    /// checks. Waits for the device.
    pub fn evaluate_host(
        &self,
        gpu: &Gpu,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<[Vec<Scalar>; 3], GpuError> {
        self.check_assignment(input.len(), aux.len())?;
        let (input, aux) = (upload_scalars(gpu, input)?, upload_scalars(gpu, aux)?);
        let (a, b, c) = self.evaluate(gpu, &input, &aux)?;
        let rows = self.needs.rows;
        Ok([
            download_scalars(gpu, &a, rows)?,
            download_scalars(gpu, &b, rows)?,
            download_scalars(gpu, &c, rows)?,
        ])
    }
}

impl DeviceShape {
    /// Matrix `k` (0 = A, 1 = B, 2 = C) of [`DeviceShape::evaluate_into`] alone, into the
    /// first [`DeviceShape::rows`] elements of `out`.
    pub fn evaluate_matrix(
        &self,
        gpu: &Gpu,
        k: usize,
        input: &DevBuf,
        aux: &DevBuf,
        out: DevView,
    ) -> Result<(), GpuError> {
        self.check_device(gpu)?;
        self.check_assignment(input.len() / FR_BYTES, aux.len() / FR_BYTES)?;
        let m = self
            .matrices
            .get(k)
            .ok_or_else(|| GpuError::Input(format!("no matrix {k}")))?;
        let rows = self.needs.rows;
        launch_rows(
            gpu,
            m.starts.ptr(),
            m.terms.ptr(),
            &self.coeffs,
            input,
            aux,
            out,
            rows,
        )
    }
}

/// `r1cs_rows` over `rows` rows whose starts are at `starts` and whose terms, indexed as the
/// starts say, at `terms`, into the first `rows` elements of `out`.
#[allow(clippy::too_many_arguments)]
fn launch_rows(
    gpu: &Gpu,
    starts: u64,
    terms: u64,
    coeffs: &DevBuf,
    input: &DevBuf,
    aux: &DevBuf,
    out: DevView,
    rows: usize,
) -> Result<(), GpuError> {
    if out.len() < rows * FR_BYTES {
        return Err(GpuError::Input(format!(
            "R1CS output of {} bytes for {rows} rows",
            out.len()
        )));
    }
    gpu.launch(
        &k::R1CS_ROWS,
        (rows as u64).div_ceil(BLOCK as u64),
        BLOCK,
        &[
            Arg::Ptr(starts),
            Arg::Ptr(terms),
            coeffs.into(),
            input.into(),
            aux.into(),
            out.into(),
            Arg::u32(rows)?,
        ],
    )
}

/// A recorded shape that stays in host memory and is streamed to the device in pieces of rows
/// for each evaluation, for a device whose memory plan does not keep the shape: checked once
/// (as [`DeviceShape::upload`] checks), its row arrays page-locked in place where the driver
/// allows, its coefficient table (a few thousand elements) on the device.
pub struct StreamedShape {
    needs: Needs,
    coeffs: DevBuf,
    host: PinnedHost<R1cs>,
    ctx: Arc<CudaContext>,
}

impl StreamedShape {
    /// Checks `shape` and registers its rows; a registration the driver refuses leaves those
    /// rows pageable (slower, through the staging buffers) and is logged.
    pub fn new(gpu: &Gpu, shape: Arc<R1cs>) -> Result<Self, GpuError> {
        fn csr(m: &Matrix) -> Csr<'_> {
            Csr {
                starts: &m.starts,
                terms: &m.terms,
            }
        }
        let needs = check_shape(
            [csr(&shape.a), csr(&shape.b), csr(&shape.c)],
            shape.coeffs(),
        )?;
        let coeffs = upload_bytes(gpu, bytes(shape.coeffs()))?;
        let ctx = gpu.context();
        let (host, refused) = PinnedHost::new(&ctx, shape, |s: &R1cs| {
            [&s.a, &s.b, &s.c]
                .into_iter()
                .flat_map(|m| [bytes(&m.starts), bytes(&m.terms)])
                .collect()
        });
        for e in refused {
            tracing::warn!(error = %e, "a recorded shape's rows stay pageable: streamed through the staging buffers");
        }
        Ok(StreamedShape {
            needs,
            coeffs,
            host,
            ctx,
        })
    }

    /// The host shape it streams.
    pub fn shape(&self) -> &Arc<R1cs> {
        self.host.owner()
    }

    /// Matrix `k` (0 = A, 1 = B, 2 = C) evaluated on the assignment `input`, `aux` into the
    /// first [`StreamedShape::rows`] elements of `out`, its rows streamed through `ring`.
    pub fn evaluate_matrix(
        &self,
        gpu: &Gpu,
        k: usize,
        input: &DevBuf,
        aux: &DevBuf,
        out: DevView,
        ring: &mut Ring,
    ) -> Result<(), GpuError> {
        same_device(&self.ctx, gpu)?;
        self.needs
            .check_assignment(input.len() / FR_BYTES, aux.len() / FR_BYTES)?;
        let shape = self.shape();
        let m = [&shape.a, &shape.b, &shape.c]
            .get(k)
            .copied()
            .ok_or_else(|| GpuError::Input(format!("no matrix {k}")))?;
        let bounds = row_pieces(&m.starts, ring.slot_bytes())?;
        let piece = |p: usize| {
            let (r0, r1) = (bounds[p], bounds[p + 1]);
            (r0, r1, m.starts[r0] as usize, m.starts[r1] as usize)
        };
        gpu.stream(
            ring,
            bounds.len() - 1,
            |p| {
                let (r0, r1, t0, t1) = piece(p);
                vec![bytes(&m.terms[t0..t1]), bytes(&m.starts[r0..=r1])]
            },
            |p, view| {
                let (r0, r1, t0, t1) = piece(p);
                // The piece's terms start the slot and its starts follow them; the kernel indexes
                // terms by the starts' absolute values, so it is given the address where term 0
                // would be (an address it never reads below the piece).
                let terms = view.ptr().wrapping_sub(t0 as u64 * 8);
                let starts = view.ptr() + ((t1 - t0) * 8) as u64;
                let out = out.range(r0 * FR_BYTES..r1 * FR_BYTES)?;
                launch_rows(gpu, starts, terms, &self.coeffs, input, aux, out, r1 - r0)
            },
        )
    }

    /// Rows of each matrix.
    pub fn rows(&self) -> usize {
        self.needs.rows
    }

    /// The slot a ring that streams its rows needs: `most` bytes (a large shape's matrices
    /// go in pieces of about that), or less where every matrix fits in one, as the plan
    /// counts it (no more than the shape's own bytes in flight).
    pub fn ring_slot_bytes(&self, most: usize) -> usize {
        let shape = self.shape();
        [&shape.a, &shape.b, &shape.c]
            .iter()
            .map(|m| streamed_bytes(&m.starts))
            .max()
            .unwrap_or(0)
            .clamp(1, most.max(1))
    }

    /// How many of its row arrays are page-locked (of six).
    pub fn registered(&self) -> usize {
        self.host.registered()
    }
}

/// The bytes a matrix of row starts `starts` streams whole: its terms (8 bytes each) and its
/// starts (4 bytes each).
fn streamed_bytes(starts: &[u32]) -> usize {
    let terms = starts.last().map_or(0, |&t| t as usize);
    terms * 8 + starts.len() * 4
}

/// Row boundaries (0 first, `starts.len() − 1` last) of pieces whose terms (8 bytes each) and
/// row starts (4 bytes each, one more than rows) fit `slot_bytes`, each piece as long as fits.
fn row_pieces(starts: &[u32], slot_bytes: usize) -> Result<Vec<usize>, GpuError> {
    let rows = starts.len().saturating_sub(1);
    let bytes = |r0: usize, r1: usize| (starts[r1] - starts[r0]) as usize * 8 + (r1 - r0 + 1) * 4;
    let mut bounds = vec![0];
    let mut r0 = 0;
    while r0 < rows {
        if bytes(r0, r0 + 1) > slot_bytes {
            return Err(GpuError::Input(format!(
                "row {r0} of {} terms does not fit a streaming buffer of {slot_bytes} bytes",
                starts[r0 + 1] - starts[r0]
            )));
        }
        // The last row end r1 in (r0, rows] that fits: the bytes grow with r1.
        let (mut lo, mut hi) = (r0 + 1, rows);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if bytes(r0, mid) <= slot_bytes {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        bounds.push(lo);
        r0 = lo;
    }
    Ok(bounds)
}

/// A new device buffer holding `bytes`; for none, a buffer of one byte (a valid address that
/// nothing reads) without a copy.
fn upload_bytes(gpu: &Gpu, bytes: &[u8]) -> Result<DevBuf, GpuError> {
    if bytes.is_empty() {
        return gpu.alloc(0);
    }
    gpu.upload_new(bytes)
}

/// A new device vector holding `s` (a buffer of one byte when `s` is empty).
pub fn upload_scalars(gpu: &Gpu, s: &[Scalar]) -> Result<DevBuf, GpuError> {
    upload_bytes(gpu, bytes(s))
}

/// The first `n` elements of the device vector `buf`, on the host (waits for the device).
pub fn download_scalars(gpu: &Gpu, buf: &DevBuf, n: usize) -> Result<Vec<Scalar>, GpuError> {
    let mut v = vec![Scalar::ZERO; n];
    if n > 0 {
        gpu.download(buf, bytes_mut(&mut v))?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rows: [aux 3 · ONE, input 1 · c2], [] ; coefficients ONE, −1, 5.
    fn shape() -> (Vec<u32>, Vec<ShapeTerm>, Vec<Scalar>) {
        (
            vec![0, 2, 2],
            vec![ShapeTerm::aux(3, 0), ShapeTerm::input(1, 2)],
            vec![Scalar::ONE, -Scalar::ONE, Scalar::from(5u64)],
        )
    }

    fn check(
        a: (&[u32], &[ShapeTerm]),
        b: (&[u32], &[ShapeTerm]),
        coeffs: &[Scalar],
    ) -> Result<Needs, GpuError> {
        fn csr<'a>(m: (&'a [u32], &'a [ShapeTerm])) -> Csr<'a> {
            Csr {
                starts: m.0,
                terms: m.1,
            }
        }
        let (empty_starts, empty_terms) = (vec![0u32; a.0.len()], Vec::new());
        check_shape([csr(a), csr(b), csr((&empty_starts, &empty_terms))], coeffs)
    }

    fn is_input_error(r: Result<Needs, GpuError>, what: &str) {
        assert!(matches!(r, Err(GpuError::Input(_))), "{what}: {r:?}");
    }

    /// A consistent shape passes and says how long the assignment must be; a shape of no rows
    /// needs nothing.
    #[test]
    fn a_consistent_shape_reports_what_it_needs() {
        let (s, t, c) = shape();
        let b = [ShapeTerm::aux(0, 0), ShapeTerm::aux(1, 1)];
        let needs = check((&s, &t), (&s, &b), &c).unwrap();
        assert_eq!(
            needs,
            Needs {
                rows: 2,
                inputs: 2,
                aux: 4
            }
        );
        let only_aux = [ShapeTerm::aux(9, 1), ShapeTerm::aux(0, 0)];
        let needs = check((&s, &only_aux), (&s, &only_aux), &c).unwrap();
        assert_eq!((needs.inputs, needs.aux), (0, 10));
        let none = check((&[0], &[]), (&[0], &[]), &c).unwrap();
        assert_eq!(
            none,
            Needs {
                rows: 0,
                inputs: 0,
                aux: 0
            }
        );
    }

    /// A matrix's whole stream is its terms and starts, and a slot that size takes it in one
    /// piece.
    #[test]
    fn a_matrix_streamed_whole_takes_its_terms_and_starts() {
        // Rows of 2, 0 and 3 terms: 5 terms and 4 starts.
        let starts = [0u32, 2, 2, 5];
        assert_eq!(streamed_bytes(&starts), 5 * 8 + 4 * 4);
        let b = row_pieces(&starts, streamed_bytes(&starts)).unwrap();
        assert_eq!(b, [0, 3], "one piece in a slot of its own size");
        assert_eq!(streamed_bytes(&[]), 0);
    }

    /// Row pieces cover every row once, in order, each within the slot, each as long as fits;
    /// a row too long for the slot is refused.
    #[test]
    fn row_pieces_cut_the_rows_to_the_slot() {
        // Rows of 0, 3, 1, 5, 2 terms.
        let starts = [0u32, 0, 3, 4, 9, 11];
        let bytes =
            |r0: usize, r1: usize| (starts[r1] - starts[r0]) as usize * 8 + (r1 - r0 + 1) * 4;
        for slot in [52, 60, 64, 100, 1000] {
            let b = row_pieces(&starts, slot).unwrap();
            assert_eq!((b[0], *b.last().unwrap()), (0, 5), "{slot}: {b:?}");
            for w in b.windows(2) {
                assert!(w[0] < w[1] && bytes(w[0], w[1]) <= slot, "{slot}: {b:?}");
                if w[1] < 5 {
                    assert!(bytes(w[0], w[1] + 1) > slot, "{slot}: {b:?} not greedy");
                }
            }
        }
        assert_eq!(row_pieces(&starts, 1000).unwrap(), vec![0, 5]);
        assert!(matches!(row_pieces(&starts, 40), Err(GpuError::Input(_))));
        assert_eq!(row_pieces(&[0], 64).unwrap(), vec![0]);
    }

    /// Everything the kernel would read out of bounds on is refused with a typed error.
    #[test]
    fn inconsistent_shapes_are_refused() {
        let (s, t, c) = shape();
        is_input_error(check((&s, &t), (&s, &t), &[]), "empty table");
        is_input_error(check((&s, &t), (&s, &t), &c[1..]), "entry 0 not ONE");
        is_input_error(check((&[], &[]), (&[], &[]), &c), "no row starts");
        is_input_error(check((&s, &t), (&s[..2], &t[..2]), &c), "row counts differ");
        is_input_error(check((&[1, 2, 2], &t), (&s, &t), &c), "first start not 0");
        is_input_error(
            check((&[0, 2, 1], &t), (&s, &t), &c),
            "ends before the terms",
        );
        is_input_error(check((&[0, 3, 2], &t), (&s, &t), &c), "a decreasing start");
        is_input_error(
            check((&s, &t[..1]), (&s, &t), &c),
            "fewer terms than the starts say",
        );
        let bad_coeff = [ShapeTerm::aux(0, 0), ShapeTerm::aux(1, 3)];
        is_input_error(
            check((&s, &t), (&s, &bad_coeff), &c),
            "coefficient out of range",
        );
    }
}
