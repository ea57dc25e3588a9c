//! Writing a fresh Groth16 setup ([`super::fresh`]) under filecoin-proofs' file names: the
//! query scalars times the generators (on the CPU, or on the GPU for the 32 GiB sizes), in
//! bellperson's `.params` and `.vk` layout, streamed to disk while the next points are made.
//! NOT the ceremony's parameters (a note file beside them says so, as does every command and
//! document that uses them).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::{Duration, Instant};

use bellperson::groth16::VerifyingKey;
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::PrimeField;
use group::{Curve, Group};
use rayon::prelude::*;

use super::fresh::{queries, Queries, Secrets};
use super::{io_err, GenError, Progress};
use crate::gpu::setup::{
    window_table, FixedBaseGpu, Normalize, DIGITS, G1_BYTES, G2_BYTES, WINDOWS,
};
use crate::gpu::GpuOptions;
use crate::pipeline::ProveError;
use crate::proofs::porep::synthetic;
use crate::proofs::{registry, ProofKind};
use crate::srs::ParamsId;
use crate::synth::{R1cs, Recorded, Recording};

/// Where the fixed-base multiplications run.
pub enum Device {
    /// On all cores (rayon).
    Cpu,
    /// On the CUDA device these options name.
    Gpu(GpuOptions),
}

/// Makes query points: each scalar times the G1 or G2 generator, uncompressed.
pub trait FixedBase {
    /// `s · g1` for each scalar into `out` (96 bytes each).
    fn g1(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError>;
    /// `s · g2` for each scalar into `out` (192 bytes each).
    fn g2(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError>;
    /// Points made per call, between progress reports.
    fn chunk(&self) -> usize {
        WRITE_CHUNK
    }
}

/// The CPU's fixed-base multiplications, over the same window tables as the GPU's.
pub struct CpuFixedBase {
    g1: Vec<G1Affine>,
    g2: Vec<G2Affine>,
}

impl CpuFixedBase {
    /// The tables of the two generators.
    pub fn new() -> Self {
        CpuFixedBase {
            g1: window_table(G1Projective::generator()),
            g2: window_table(G2Projective::generator()),
        }
    }
}

impl Default for CpuFixedBase {
    fn default() -> Self {
        Self::new()
    }
}

/// Σ_w table[w][digit w of s] (little-endian 16-bit digits): no doublings.
fn table_mul<G, A>(table: &[A], s: &Scalar) -> G
where
    G: Group + for<'a> std::ops::AddAssign<&'a A>,
{
    let repr = s.to_repr();
    let mut acc = G::identity();
    for (w, d) in repr.as_ref().chunks_exact(2).enumerate().take(WINDOWS) {
        let d = usize::from(u16::from_le_bytes([d[0], d[1]]));
        if d != 0 {
            acc += &table[w * DIGITS + d - 1];
        }
    }
    acc
}

/// Points per parallel task on the CPU (one batch normalization each).
const CPU_TASK: usize = 1 << 12;
/// Points per call on the CPU: a progress report every second or so on two cores.
const CPU_CHUNK: usize = 1 << 16;

macro_rules! cpu_points {
    ($table:expr, $scalars:expr, $out:expr, $proj:ty, $affine:ty, $bytes:expr) => {{
        if $out.len() != $scalars.len() * $bytes {
            return Err(GenError::Setup(format!(
                "{} bytes for {} points",
                $out.len(),
                $scalars.len()
            )));
        }
        $out.par_chunks_mut(CPU_TASK * $bytes)
            .zip($scalars.par_chunks(CPU_TASK))
            .for_each(|(out, s)| {
                let proj: Vec<$proj> = s
                    .iter()
                    .map(|s| table_mul::<$proj, $affine>($table, s))
                    .collect();
                let mut aff = vec![<$affine>::default(); proj.len()];
                <$proj as Normalize>::normalize_all(&proj, &mut aff);
                for (a, o) in aff.iter().zip(out.chunks_mut($bytes)) {
                    o.copy_from_slice(a.to_uncompressed().as_ref());
                }
            });
        Ok(())
    }};
}

impl FixedBase for CpuFixedBase {
    fn g1(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError> {
        cpu_points!(&self.g1, scalars, out, G1Projective, G1Affine, G1_BYTES)
    }
    fn g2(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError> {
        cpu_points!(&self.g2, scalars, out, G2Projective, G2Affine, G2_BYTES)
    }
    fn chunk(&self) -> usize {
        CPU_CHUNK
    }
}

impl FixedBase for FixedBaseGpu {
    fn g1(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError> {
        FixedBaseGpu::g1(self, scalars, out).map_err(|e| GenError::Setup(format!("GPU: {e}")))
    }
    fn g2(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GenError> {
        FixedBaseGpu::g2(self, scalars, out).map_err(|e| GenError::Setup(format!("GPU: {e}")))
    }
}

/// What [`generate_fresh`] did, with the time of each step.
#[derive(Debug, Clone)]
pub struct FreshReport {
    /// The parameter set written.
    pub id: ParamsId,
    /// The `.params` file.
    pub params: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Constraints (input constraints included), inputs and aux variables of the circuit.
    pub shape: (usize, usize, usize),
    /// Recording the circuit's shape.
    pub record: Duration,
    /// The query scalars.
    pub scalars: Duration,
    /// The points and the files.
    pub points: Duration,
}

/// The text of the note written beside fresh parameters.
pub const NOT_THE_CEREMONY: &str = "These parameters come from cuzk's own Groth16 setup with \
fresh random secrets (cuzk params setup), NOT from Filecoin's trusted-setup ceremony: whoever \
ran the setup could forge proofs with them. Use them for tests and measurements only; never \
let a chain-facing prover or verifier read them.\n";

/// Writes fresh parameters for `kind` at `sector_size` into `dir` (which must not hold that
/// set already: ceremony files are never overwritten): the circuit's shape recorded (PoRep's
/// from a synthetic partition of the real shape, the others' from their blank circuits), the
/// query scalars for the secrets `seed` gives, the points made on `device`. `progress` hears
/// each step, and how many of the points are made.
pub fn generate_fresh(
    dir: &Path,
    kind: ProofKind,
    sector_size: u64,
    seed: [u8; 32],
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<FreshReport, GenError> {
    let id = registry::params_id(kind, sector_size)?;
    let params = id.params_file(dir);
    for path in [&params, &id.vk_file(dir)] {
        if path.exists() {
            return Err(GenError::Setup(format!(
                "{} exists: fresh parameters never replace a parameter file",
                path.display()
            )));
        }
    }
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    progress.note(&format!(
        "recording the circuit of a {sector_size}-byte {kind} partition …"
    ));
    let start = Instant::now();
    let shape = match kind {
        ProofKind::PoRep => record_porep_shape(sector_size)?,
        _ => registry::blank_shape(kind, sector_size)?,
    };
    let record = start.elapsed();
    let shape_sizes = (shape.num_constraints(), shape.num_inputs, shape.num_aux);
    progress.note(&format!(
        "recorded {} constraints, {} inputs, {} aux in {:.1} s; computing the query scalars …",
        shape_sizes.0,
        shape_sizes.1,
        shape_sizes.2,
        record.as_secs_f64()
    ));
    let start = Instant::now();
    let secrets = Secrets::from_seed(seed);
    let q = queries(&shape, &secrets).map_err(|e| GenError::Setup(e.to_string()))?;
    drop(shape);
    let scalars = start.elapsed();
    progress.note(&format!(
        "scalars in {:.1} s (domain {}; h {}, l {}, a {}, b {}); making the points …",
        scalars.as_secs_f64(),
        q.domain,
        q.h.len(),
        q.l.len(),
        q.a.len(),
        q.b.len()
    ));
    let start = Instant::now();
    let maker: Box<dyn FixedBase> = match device {
        Device::Cpu => Box::new(CpuFixedBase::new()),
        Device::Gpu(options) => Box::new(
            FixedBaseGpu::new(
                options,
                G1Projective::generator(),
                G2Projective::generator(),
            )
            .map_err(|e| GenError::Setup(format!("GPU: {e}")))?,
        ),
    };
    write_set(
        dir,
        &id,
        sector_size,
        &secrets,
        &q,
        maker.as_ref(),
        progress,
    )?;
    let points = start.elapsed();
    let bytes = fs::metadata(&params).map_or(0, |m| m.len());
    Ok(FreshReport {
        id,
        params,
        bytes,
        shape: shape_sizes,
        record,
        scalars,
        points,
    })
}

/// The shape of a PoRep partition at `sector_size`, recorded (in parts, on the current
/// rayon pool) from a synthetic partition: every partition has the same constraints.
pub fn record_porep_shape(sector_size: u64) -> Result<R1cs, GenError> {
    let parts = rayon::current_num_threads().max(1);
    match synthetic::record(sector_size, 0, parts, 1, Recording::Shape)? {
        Recorded::Shape(shape, _) => Ok(shape),
        _ => Err(ProveError::Synthesis("not a shape".into()).into()),
    }
}

/// The progress units of a set's points: a G1 point one, a G2 point three (its additions
/// cost about three times a G1 one's).
fn point_units(q: &Queries) -> u64 {
    let g1 = q.h.len() + q.l.len() + q.a.len() + q.b.len();
    (g1 + 3 * q.b.len()) as u64
}

/// Writes the note, `.meta`, `.vk` and `.params` of a set, telling `progress` how many of the
/// points ([`point_units`]) are made.
fn write_set(
    dir: &Path,
    id: &ParamsId,
    sector_size: u64,
    secrets: &Secrets,
    q: &Queries,
    maker: &dyn FixedBase,
    progress: &mut dyn Progress,
) -> Result<(), GenError> {
    let note = id.params_file(dir).with_extension("NOT-THE-CEREMONY.txt");
    fs::write(&note, NOT_THE_CEREMONY).map_err(io_err(&note))?;
    let meta = id.meta_file(dir);
    fs::write(&meta, format!("{{\"sector_size\":{sector_size}}}")).map_err(io_err(&meta))?;
    let mut vk = Vec::new();
    verifying_key(secrets, &q.ic)
        .write(&mut vk)
        .map_err(|e| GenError::Setup(format!("verifying key: {e}")))?;
    spool(&id.vk_file(dir), |out| send(out, vk.clone()))?;
    let mut work = Work {
        done: 0,
        total: point_units(q),
        chunk: maker.chunk().max(1),
        progress,
    };
    spool(&id.params_file(dir), |out| {
        send(out, vk)?;
        work.query(out, &q.h, G1_BYTES, |s, o| maker.g1(s, o))?;
        work.query(out, &q.l, G1_BYTES, |s, o| maker.g1(s, o))?;
        work.query(out, &q.a, G1_BYTES, |s, o| maker.g1(s, o))?;
        work.query(out, &q.b, G1_BYTES, |s, o| maker.g1(s, o))?;
        work.query(out, &q.b, G2_BYTES, |s, o| maker.g2(s, o))
    })
}

/// The verifying key of `secrets` (the generators as bases, as any bases would do).
fn verifying_key(s: &Secrets, ic: &[Scalar]) -> VerifyingKey<Bls12> {
    let (g1, g2) = (G1Projective::generator(), G2Projective::generator());
    let ic: Vec<G1Projective> = ic.iter().map(|s| g1 * s).collect();
    let mut ic_affine = vec![G1Affine::default(); ic.len()];
    G1Projective::batch_normalize(&ic, &mut ic_affine);
    VerifyingKey {
        alpha_g1: (g1 * s.alpha).to_affine(),
        beta_g1: (g1 * s.beta).to_affine(),
        beta_g2: (g2 * s.beta).to_affine(),
        gamma_g2: (g2 * s.gamma).to_affine(),
        delta_g1: (g1 * s.delta).to_affine(),
        delta_g2: (g2 * s.delta).to_affine(),
        ic: ic_affine,
    }
}

/// Points made per buffer handed to the writer.
const WRITE_CHUNK: usize = 1 << 24;

type Out = SyncSender<Vec<u8>>;

fn send(out: &Out, buf: Vec<u8>) -> Result<(), GenError> {
    out.send(buf)
        .map_err(|_| GenError::Setup("the file writer stopped".into()))
}

/// The points made so far, told to a progress report.
struct Work<'a> {
    done: u64,
    total: u64,
    /// Points per call of the maker.
    chunk: usize,
    progress: &'a mut dyn Progress,
}

impl Work<'_> {
    /// One query: its length (big-endian u32) and its points, made a chunk at a time.
    fn query(
        &mut self,
        out: &Out,
        scalars: &[Scalar],
        size: usize,
        make: impl Fn(&[Scalar], &mut [u8]) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let len = u32::try_from(scalars.len()).map_err(|_| {
            GenError::Setup(format!(
                "{} points do not fit the file's u32 count",
                scalars.len()
            ))
        })?;
        send(out, len.to_be_bytes().to_vec())?;
        let weight = if size == G2_BYTES { 3 } else { 1 };
        for chunk in scalars.chunks(self.chunk.min(WRITE_CHUNK)) {
            let mut buf = vec![0u8; chunk.len() * size];
            make(chunk, &mut buf)?;
            send(out, buf)?;
            self.done += weight * chunk.len() as u64;
            self.progress.advance(self.done, self.total);
        }
        Ok(())
    }
}

/// Writes what `fill` sends into `path` on a writer thread (so the next points are made while
/// the last are written), through a temporary file synced and renamed into place.
fn spool(path: &Path, fill: impl FnOnce(&Out) -> Result<(), GenError>) -> Result<(), GenError> {
    let tmp = path.with_extension("tmp-cuzk");
    let file = File::create(&tmp).map_err(io_err(&tmp))?;
    let (tx, rx) = sync_channel::<Vec<u8>>(1);
    let (filled, written) = std::thread::scope(|s| {
        let writer = s.spawn(move || -> std::io::Result<()> {
            let mut w = BufWriter::with_capacity(8 << 20, file);
            for buf in rx {
                w.write_all(&buf)?;
            }
            w.flush()?;
            w.get_ref().sync_all()
        });
        let filled = fill(&tx);
        drop(tx);
        (filled, writer.join())
    });
    // A writer's error explains a fill that stopped because the writer did.
    match written {
        Ok(Ok(())) => filled?,
        Ok(Err(e)) => return Err(io_err(&tmp)(e)),
        Err(_) => return Err(GenError::Setup("the file writer panicked".into())),
    }
    fs::rename(&tmp, path).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::groth16::{generate_parameters, Parameters};
    use bellperson::{Circuit, ConstraintSystem, SynthesisError};

    /// Keeps what a progress report is told about the points.
    struct Recorder<'a>(&'a mut Vec<(u64, u64)>);

    impl Progress for Recorder<'_> {
        fn note(&mut self, _: &str) {}
        fn advance(&mut self, done: u64, total: u64) {
            self.0.push((done, total));
        }
    }

    /// A small circuit with what the queries filter and order: an input in B, an aux
    /// variable in no A combination, one in no B combination, a coefficient other than one,
    /// and a constraint count that is not a power of two.
    struct Toy;

    impl Circuit<Scalar> for Toy {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let x2 = cs.alloc(|| "x2", || Ok(Scalar::from(9u64)))?;
            let out = cs.alloc_input(|| "out", || Ok(Scalar::from(39u64)))?;
            let k = cs.alloc_input(|| "k", || Ok(Scalar::from(2u64)))?;
            cs.enforce(|| "x2", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
            // 4 x2 + x = out, with x2 only in A here and k in B.
            cs.enforce(
                || "out",
                |lc| lc + (Scalar::from(4u64), x2) + x,
                |lc| lc + CS::one(),
                |lc| lc + out,
            );
            cs.enforce(|| "k", |lc| lc + CS::one(), |lc| lc + k, |lc| lc + k);
            let y = cs.alloc(|| "y", || Ok(Scalar::from(6u64)))?;
            cs.enforce(|| "y", |lc| lc + x, |lc| lc + k, |lc| lc + y);
            Ok(())
        }
    }

    /// Our setup writes byte for byte what bellperson's generator makes from the same
    /// secrets and bases.
    #[test]
    fn the_files_are_bellpersons_for_the_same_secrets() {
        let (shape, _) = crate::synth::record_shape(Toy).unwrap();
        let secrets = Secrets::from_seed([7; 32]);
        let q = queries(&shape, &secrets).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let id = ParamsId {
            kind: ProofKind::PoRep,
            sector_size: 2048,
            cache_id: "toy".into(),
        };
        let mut seen = Vec::new();
        let mut progress = Recorder(&mut seen);
        write_set(
            dir.path(),
            &id,
            2048,
            &secrets,
            &q,
            &CpuFixedBase::new(),
            &mut progress,
        )
        .unwrap();
        // Every point was counted, once, in order.
        let total = point_units(&q);
        assert_eq!(seen.last(), Some(&(total, total)));
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 == total));
        let theirs: Parameters<Bls12> = generate_parameters(
            Toy,
            G1Projective::generator(),
            G2Projective::generator(),
            secrets.alpha,
            secrets.beta,
            secrets.gamma,
            secrets.delta,
            secrets.tau,
        )
        .unwrap();
        let mut want = Vec::new();
        theirs.write(&mut want).unwrap();
        let ours = fs::read(id.params_file(dir.path())).unwrap();
        assert_eq!(ours.len(), want.len());
        assert!(ours == want, "the .params bytes differ from bellperson's");
        let mut vk = Vec::new();
        theirs.vk.write(&mut vk).unwrap();
        assert_eq!(fs::read(id.vk_file(dir.path())).unwrap(), vk);
        assert!(
            fs::read_to_string(dir.path().join("v28-toy.NOT-THE-CEREMONY.txt"))
                .unwrap()
                .contains("NOT from Filecoin's trusted-setup ceremony")
        );
    }

    /// A real circuit's set, as cuzk's setup writes it from the blank circuit's recorded
    /// shape, is byte for byte what bellperson's generator makes from the same secrets
    /// (WindowPoSt at 2 KiB: bellperson takes seconds on it).
    #[test]
    fn a_real_circuits_set_is_bellpersons_for_the_same_secrets() {
        let seed = [9; 32];
        let dir = tempfile::tempdir().unwrap();
        let ours = generate_fresh(
            dir.path(),
            ProofKind::WindowPoSt,
            2048,
            seed,
            &Device::Cpu,
            &mut |_: &str| {},
        )
        .unwrap();
        let proof = registry::post_proof(ProofKind::WindowPoSt, 2048).unwrap();
        let s = Secrets::from_seed(seed);
        let secrets = [s.alpha, s.beta, s.gamma, s.delta, s.tau];
        let theirs = crate::proofs::post::generate_params_with(proof, secrets).unwrap();
        let mut want = Vec::new();
        theirs.write(&mut want).unwrap();
        let got = fs::read(&ours.params).unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the .params bytes differ from bellperson's");
        let mut vk = Vec::new();
        theirs.vk.write(&mut vk).unwrap();
        assert_eq!(fs::read(ours.id.vk_file(dir.path())).unwrap(), vk);
    }

    /// An existing parameter file (a ceremony's, say) is never replaced.
    #[test]
    fn a_setup_never_replaces_a_parameter_file() {
        let dir = tempfile::tempdir().unwrap();
        let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
        fs::write(id.vk_file(dir.path()), b"ceremony").unwrap();
        let r = generate_fresh(
            dir.path(),
            ProofKind::PoRep,
            2048,
            [7; 32],
            &Device::Cpu,
            &mut |_: &str| {},
        );
        assert!(matches!(r, Err(GenError::Setup(m)) if m.contains("never replace")));
        assert_eq!(fs::read(id.vk_file(dir.path())).unwrap(), b"ceremony");
        assert!(!id.params_file(dir.path()).exists());
    }
}
