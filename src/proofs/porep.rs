//! PoRep C2: from a sector's SealCommitPhase1Output to verified partition proofs.

use base64::Engine as _;
use filecoin_proofs::{
    get_seal_inputs, parameters::setup_params, DefaultPieceHasher, MerkleTreeTrait, PoRepConfig,
};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use serde::{Deserialize, Serialize};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    self, generate_replica_id, StackedCircuit, StackedCompound, StackedDrg,
};

use super::shapes::with_shape;
use super::verdict::{proof_bytes, vanilla_verdict, verify};
use crate::pipeline::partitions::{evaluations, prove_split_partitions, PartitionCircuit};
use crate::pipeline::{JobControl, ProofOutput, ProveError, ProvingService};
use crate::srs::{ParamsId, ProofKind};
use crate::synth::{Recorded, Recording};

/// A PoRep C2 request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoRepRequest {
    /// The C1 output: filecoin-proofs-api's `SealCommitPhase1Output` JSON, or lotus-bench's
    /// wrapper `{"SectorNum", "Phase1Out": base64(JSON), "SectorSize"}`.
    pub c1: Vec<u8>,
    /// The miner's actor id (`f01234` → 1234); the prover id is derived from it.
    pub miner_id: u64,
    /// The sector number. Required unless the C1 is a lotus-bench wrapper that carries one.
    pub sector_number: Option<u64>,
}

/// lotus-bench's and Curio's wrapper around the C1 output.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct LotusC1Wrapper {
    sector_num: u64,
    phase1_out: String,
    sector_size: u64,
}

/// A parsed C1 output and the sector number a wrapper carried, if any.
pub struct ParsedC1 {
    /// filecoin-proofs-api's C1 output.
    pub output: SealCommitPhase1Output,
    /// The sector number from a lotus-bench wrapper.
    pub sector_number: Option<u64>,
}

/// Parses a C1 output: filecoin-proofs-api's `SealCommitPhase1Output` JSON, or lotus-bench's
/// `{SectorNum, Phase1Out: base64(JSON), SectorSize}` wrapper.
pub fn parse_c1(bytes: &[u8]) -> Result<ParsedC1, ProveError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        ProveError::InvalidInput(format!("C1 output: {what}: {e}"))
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| bad("not valid JSON", &e))?;
    let parsed = if value.get("Phase1Out").is_some() {
        let w: LotusC1Wrapper =
            serde_json::from_value(value).map_err(|e| bad("bad lotus-bench wrapper", &e))?;
        let inner = base64::engine::general_purpose::STANDARD
            .decode(w.phase1_out.trim())
            .map_err(|e| bad("Phase1Out is not base64", &e))?;
        let output: SealCommitPhase1Output = serde_json::from_slice(&inner)
            .map_err(|e| bad("Phase1Out is not a SealCommitPhase1Output", &e))?;
        let declared = u64::from(output.registered_proof.sector_size());
        if w.sector_size != declared {
            return Err(ProveError::InvalidInput(format!(
                "C1 output: the wrapper says SectorSize {} but the proof type {:?} is for {}",
                w.sector_size, output.registered_proof, declared
            )));
        }
        ParsedC1 {
            output,
            sector_number: Some(w.sector_num),
        }
    } else {
        let output =
            serde_json::from_value(value).map_err(|e| bad("not a SealCommitPhase1Output", &e))?;
        ParsedC1 {
            output,
            sector_number: None,
        }
    };
    check_vanilla_size(parsed)
}

/// The vanilla proofs carry their sector size in their variant; it must be the registered
/// proof's. (Several sizes share a tree shape, so decoding alone would not notice.)
fn check_vanilla_size(parsed: ParsedC1) -> Result<ParsedC1, ProveError> {
    use filecoin_proofs_api::seal::VanillaSealProof::*;
    let vanilla = match &parsed.output.vanilla_proofs {
        StackedDrg2KiBV1(_) => 2u64 << 10,
        StackedDrg8MiBV1(_) => 8 << 20,
        StackedDrg512MiBV1(_) => 512 << 20,
        StackedDrg32GiBV1(_) => 32 << 30,
        StackedDrg64GiBV1(_) => 64 << 30,
    };
    let declared = u64::from(parsed.output.registered_proof.sector_size());
    if vanilla != declared {
        return Err(ProveError::InvalidInput(format!(
            "C1 output: vanilla proofs are for {vanilla}-byte sectors, the proof type {:?} for {declared}",
            parsed.output.registered_proof
        )));
    }
    Ok(parsed)
}

/// Filecoin's prover id for a miner actor id: the unsigned LEB128 bytes of the id,
/// zero-padded to 32 bytes (the payload of the `f0…` ID address).
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            break;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
    out
}

mod circuit;
#[cfg(feature = "scaffolding")] // tests and the 32 GiB device run only; cuzkd is built without it
pub mod satisfiable;
#[cfg(feature = "scaffolding")] // benchmarks only; cuzkd is built without it
pub mod synthetic;

use circuit::PoRepCircuit;

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;

fn compound_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
) -> Result<
    compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>,
    ProveError,
> {
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(config)
            .map_err(|e| ProveError::InvalidInput(e.to_string()))?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(&setup)
        .map_err(|e| ProveError::InvalidInput(format!("PoRep setup: {e}")))
}

/// The parameter set of a registered seal proof.
pub fn params_id(proof: RegisteredSealProof) -> Result<ParamsId, ProveError> {
    let size = u64::from(proof.sector_size());
    with_shape!(size, params_id_shape, proof)
}

fn params_id_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
) -> Result<ParamsId, ProveError> {
    let pp = compound_params::<Tree>(&proof.as_v1_config())?;
    let cache_id = <Compound<Tree> as CacheableParameters<
        StackedCircuit<Tree, DefaultPieceHasher>,
        _,
    >>::cache_identifier(&pp.vanilla_params);
    Ok(ParamsId {
        kind: ProofKind::PoRep,
        sector_size: u64::from(proof.sector_size()),
        cache_id,
    })
}

/// The blank circuit of a registered seal proof, for parameter generation.
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn generate_params(
    proof: RegisteredSealProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    let size = u64::from(proof.sector_size());
    with_shape!(size, generate_params_shape, proof)
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn generate_params_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    let pp = compound_params::<Tree>(&proof.as_v1_config())?;
    let blank = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(
        &pp.vanilla_params,
    );
    bellperson::groth16::generate_random_parameters(blank, &mut rand_core::OsRng)
        .map_err(|e| ProveError::Synthesis(format!("parameter generation: {e}")))
}

/// Proves a PoRep C2 request.
pub(crate) fn prove(
    svc: &ProvingService,
    req: &PoRepRequest,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let (c1, sector_number) = parse_request(req)?;
    let size = u64::from(c1.registered_proof.sector_size());
    with_shape!(
        size,
        prove_shape,
        svc,
        c1,
        req.miner_id,
        sector_number,
        control
    )
}

/// The request's C1 output, parsed, and its sector number (the request's, or the wrapper's).
fn parse_request(req: &PoRepRequest) -> Result<(SealCommitPhase1Output, u64), ProveError> {
    let parsed = parse_c1(&req.c1)?;
    let sector_number = req.sector_number.or(parsed.sector_number).ok_or_else(|| {
        ProveError::InvalidInput(
            "the sector number is required (the C1 output carries none)".into(),
        )
    })?;
    let c1 = parsed.output;
    if c1.registered_proof.major_version() != 1 {
        return Err(ProveError::InvalidInput(format!(
            "unsupported proof version {:?}",
            c1.registered_proof
        )));
    }
    Ok((c1, sector_number))
}

/// Checks a PoRep request the way [`prove`] starts: the C1 output parses, names a supported
/// sector size and proof version, and its vanilla proofs decode into that size's partitions
/// with valid commitments. Nothing is synthesized or proved.
/// The C1 output must also be the one of the request's miner and sector: its replica id is
/// the one they and its ticket give (a hash: cheap next to proving).
pub fn check(req: &PoRepRequest) -> Result<(), ProveError> {
    let (c1, sector_number) = parse_request(req)?;
    let size = u64::from(c1.registered_proof.sector_size());
    with_shape!(size, check_shape, c1, req.miner_id, sector_number)
}

fn check_shape<Tree: 'static + MerkleTreeTrait>(
    c1: SealCommitPhase1Output,
    miner_id: u64,
    sector_number: u64,
) -> Result<(), ProveError> {
    PoRepJob::<Tree>::new(c1)?.check_replica(miner_id, sector_number)
}

/// Whether the request's vanilla proofs verify against its public inputs, as
/// storage-proofs-porep's own verifier says: for a job whose proof failed verification, to
/// tell bad input (an `InvalidInput` error, nothing proved again) from a device that
/// returned a wrong result. About as costly as the C1 phase's own check of them: a few
/// hashes per challenge, no parameters.
pub(crate) fn check_vanilla(req: &PoRepRequest) -> Result<(), ProveError> {
    let (c1, sector_number) = parse_request(req)?;
    let size = u64::from(c1.registered_proof.sector_size());
    with_shape!(size, check_vanilla_shape, c1, req.miner_id, sector_number)
}

fn check_vanilla_shape<Tree: 'static + MerkleTreeTrait>(
    c1: SealCommitPhase1Output,
    miner_id: u64,
    sector_number: u64,
) -> Result<(), ProveError> {
    let job = PoRepJob::<Tree>::new(c1)?;
    job.check_replica(miner_id, sector_number)?;
    vanilla_verdict(
        StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
            &job.pp.vanilla_params,
            &job.public_inputs,
            &job.vanilla,
        ),
        "C1 output",
        "its vanilla proofs do not verify against its commitments, seed and replica id (a \
         corrupt C1 output, or parts of different ones)",
    )
}

/// Everything needed to build the partition circuits of one C1 output.
struct PoRepJob<Tree: 'static + MerkleTreeTrait> {
    registered_proof: RegisteredSealProof,
    config: PoRepConfig,
    public_inputs: stacked::PublicInputs<
        <Tree::Hasher as filecoin_hashers::Hasher>::Domain,
        <DefaultPieceHasher as filecoin_hashers::Hasher>::Domain,
    >,
    pp: compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>,
    vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>>,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    seed: [u8; 32],
    ticket: [u8; 32],
}

impl<Tree: 'static + MerkleTreeTrait> PoRepJob<Tree> {
    fn new(c1: SealCommitPhase1Output) -> Result<Self, ProveError> {
        let SealCommitPhase1Output {
            registered_proof,
            vanilla_proofs,
            comm_r,
            comm_d,
            replica_id,
            seed,
            ticket,
        } = c1;
        let config = registered_proof.as_v1_config();
        let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> =
            vanilla_proofs.try_into().map_err(|e: anyhow::Error| {
                ProveError::InvalidInput(format!(
                    "C1 output: vanilla proofs do not match {registered_proof:?}: {e}"
                ))
            })?;
        if comm_d == [0; 32] || comm_r == [0; 32] || seed == [0; 32] {
            return Err(ProveError::InvalidInput(
                "C1 output: all-zero comm_d, comm_r or seed".into(),
            ));
        }
        let invalid = |e: anyhow::Error| ProveError::InvalidInput(format!("C1 output: {e}"));
        let comm_r_safe =
            filecoin_proofs::as_safe_commitment(&comm_r, "comm_r").map_err(invalid)?;
        let comm_d_safe = <<DefaultPieceHasher as filecoin_hashers::Hasher>::Domain as filecoin_hashers::Domain>::try_from_bytes(&comm_d)
            .map_err(invalid)?;
        let replica_fr: blstrs::Scalar = replica_id.into();
        let public_inputs = stacked::PublicInputs {
            replica_id: replica_fr.into(),
            tau: Some(stacked::Tau {
                comm_d: comm_d_safe,
                comm_r: comm_r_safe,
            }),
            k: None,
            seed: Some(seed),
        };
        let pp = compound_params::<Tree>(&config)?;
        let partitions = usize::from(config.partitions);
        if vanilla.len() != partitions || vanilla.iter().any(|p| p.is_empty()) {
            return Err(ProveError::InvalidInput(format!(
                "C1 output has {} partitions of vanilla proofs, {registered_proof:?} needs {partitions}",
                vanilla.len()
            )));
        }
        Ok(Self {
            registered_proof,
            config,
            public_inputs,
            pp,
            vanilla,
            comm_r,
            comm_d,
            seed,
            ticket,
        })
    }

    /// Refuses a C1 output made for another miner, sector or ticket: the verifier recomputes
    /// the replica id from the miner id, sector number, ticket, comm_d and proof type
    /// (filecoin-proofs' `get_seal_inputs`), so a proof over any other id cannot verify.
    fn check_replica(&self, miner_id: u64, sector_number: u64) -> Result<(), ProveError> {
        let expected = generate_replica_id::<Tree::Hasher, _>(
            &prover_id(miner_id),
            sector_number,
            &self.ticket,
            self.comm_d,
            &self.config.porep_id,
        );
        if expected == self.public_inputs.replica_id {
            return Ok(());
        }
        Err(ProveError::InvalidInput(format!(
            "C1 output: not the one of miner {miner_id}, sector {sector_number}: its replica id \
             is not the one their ids and its ticket give (another miner, sector number or \
             ticket); its proof could not verify"
        )))
    }

    fn partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn circuit(&self, k: usize) -> Result<StackedCircuit<Tree, DefaultPieceHasher>, ProveError> {
        self.circuit_of(k, &self.vanilla[k])
    }

    /// Partition `k`'s circuit over the challenges `vanilla` (all of the partition's, or a
    /// contiguous run of them).
    fn circuit_of(
        &self,
        k: usize,
        vanilla: &Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
    ) -> Result<StackedCircuit<Tree, DefaultPieceHasher>, ProveError> {
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
            &self.public_inputs,
            // The compound proof's component-private inputs are `()` for this circuit.
            (),
            vanilla,
            &self.pp.vanilla_params,
            Some(k),
        )
        .map_err(|e| ProveError::Synthesis(format!("partition {k} circuit: {e}")))
    }

    /// Partition `k`'s circuit in at most `most` parts: storage-proofs-porep's own
    /// (`bellperson`) or ours, whose witness-only synthesis computes SHA-256 natively
    /// (`porep/circuit.rs`). The circuit is a prefix (the replica id's bits, the commitments,
    /// comm_r = H(comm_c ‖ comm_r_last)) followed by one independent sub-circuit per
    /// challenge, in namespaces `challenge_{i}`: a circuit over a contiguous run of the
    /// challenges is the same prefix followed by theirs. (The layout of storage-proofs-porep
    /// 19's `StackedCircuit`; a layout that records anything else at the top level after the
    /// first challenge makes the split an error.)
    fn circuit_parts(
        &self,
        k: usize,
        most: usize,
    ) -> Result<PartitionCircuit<PoRepCircuit<Tree>>, ProveError> {
        self.parts_of(k, most, |run| {
            PoRepCircuit::new(&self.public_inputs, &self.vanilla[k][run])
                .map_err(|e| ProveError::Synthesis(format!("partition {k} circuit: {e}")))
        })
    }

    /// [`Self::circuit_parts`] with storage-proofs-porep's circuit (the reference).
    fn bellperson_parts(
        &self,
        k: usize,
        most: usize,
    ) -> Result<PartitionCircuit<StackedCircuit<Tree, DefaultPieceHasher>>, ProveError> {
        self.parts_of(k, most, |run| {
            self.circuit_of(k, &self.vanilla[k][run].to_vec())
        })
    }

    fn parts_of<C>(
        &self,
        k: usize,
        most: usize,
        circuit: impl Fn(std::ops::Range<usize>) -> Result<C, ProveError>,
    ) -> Result<PartitionCircuit<C>, ProveError> {
        let challenges = self.vanilla[k].len();
        let n = most.min(challenges);
        if n <= 1 {
            return circuit(0..challenges).map(PartitionCircuit::Whole);
        }
        let parts = even_runs(challenges, n)
            .map(circuit)
            .collect::<Result<_, _>>()?;
        Ok(PartitionCircuit::Split {
            parts,
            marker: "challenge_",
        })
    }

    /// The public inputs of partition `k` as the prover sees them (from the C1 output).
    fn partition_inputs(&self, k: usize) -> Result<Vec<blstrs::Scalar>, ProveError> {
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::generate_public_inputs(
            &self.public_inputs,
            &self.pp.vanilla_params,
            Some(k),
        )
        .map_err(|e| ProveError::Synthesis(format!("partition {k} public inputs: {e}")))
    }
}

fn prove_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    c1: SealCommitPhase1Output,
    miner_id: u64,
    sector_number: u64,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let job = PoRepJob::<Tree>::new(c1)?;
    // Before any work (the input check may have been skipped: `debug.check_input`).
    job.check_replica(miner_id, sector_number)?;
    let prover_id = prover_id(miner_id);
    let id = params_id_shape::<Tree>(job.registered_proof)?;
    let partitions = job.partitions();
    let make = |k, most| job.circuit_parts(k, most);
    let proved = prove_split_partitions(svc, &id, partitions, make, control)?;
    // As filecoin-proofs' verify_seal does: the public inputs are recomputed from the prover
    // id, sector number and ticket, so a proof for another miner or sector cannot pass.
    let inputs = get_seal_inputs::<Tree>(
        &job.config,
        job.comm_r,
        job.comm_d,
        prover_id,
        sector_number.into(),
        job.ticket,
        job.seed,
    )
    .map_err(|e| ProveError::VerificationFailed(format!("public inputs: {e}")))?;
    let mut timings = proved.timings;
    timings.verification = verify(&proved.srs, &proved.proofs, &inputs)?;
    Ok(ProofOutput {
        kind: ProofKind::PoRep,
        proof: proof_bytes(&proved.proofs),
        partitions,
        timings,
        backend: svc.proved_by(&proved.on),
    })
}

/// `0..len` cut into `n` contiguous runs whose lengths differ by at most one (`1 ≤ n ≤ len`).
pub(crate) fn even_runs(len: usize, n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (size, extra) = (len / n, len % n);
    (0..n).map(move |i| {
        let start = i * size + i.min(extra);
        start..start + size + usize::from(i < extra)
    })
}

/// Synthesizes partition `k` of a C1 output in `parts` parts (at most one per challenge) on
/// the current rayon pool, as the stages do; `parts` = 1: whole, on this thread.
pub fn synthesize_partition(
    c1: &[u8],
    k: usize,
    parts: usize,
) -> Result<crate::synth::Synthesized, ProveError> {
    evaluations(record_partition(c1, k, parts, Recording::Evaluations)?)
}

/// Whose circuit a synthesis runs: the same variables and constraints either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CircuitCode {
    /// Ours (`porep/circuit.rs`): a witness-only synthesis computes SHA-256 natively.
    Ours,
    /// storage-proofs-porep's `StackedCircuit` on bellperson's gadgets (the reference).
    Bellperson,
}

impl<Tree: 'static + MerkleTreeTrait> PoRepJob<Tree> {
    /// Synthesizes partition `k` in up to `parts` parts on the current rayon pool, keeping
    /// `what`.
    pub(super) fn record(
        &self,
        k: usize,
        parts: usize,
        what: Recording,
        code: CircuitCode,
    ) -> Result<Recorded, ProveError> {
        fn run<C: crate::synth::Synthesize + Send>(
            k: usize,
            circuit: PartitionCircuit<C>,
            what: Recording,
        ) -> Result<Recorded, ProveError> {
            let (parts, marker) = match circuit {
                PartitionCircuit::Whole(c) => (vec![c], ""),
                PartitionCircuit::Split { parts, marker } => (parts, marker),
            };
            crate::synth::record(parts, marker, what)
                .map_err(|e| ProveError::Synthesis(format!("partition {k}: {e}")))
        }
        match code {
            CircuitCode::Ours => run(k, self.circuit_parts(k, parts)?, what),
            CircuitCode::Bellperson => run(k, self.bellperson_parts(k, parts)?, what),
        }
    }
}

/// [`synthesize_partition`] keeping `what`: the evaluations, the shape or the witness alone.
pub fn record_partition(
    c1: &[u8],
    k: usize,
    parts: usize,
    what: Recording,
) -> Result<Recorded, ProveError> {
    record_partition_by(c1, k, parts, what, CircuitCode::Ours)
}

/// [`record_partition`] running `code`'s circuit.
pub fn record_partition_by(
    c1: &[u8],
    k: usize,
    parts: usize,
    what: Recording,
    code: CircuitCode,
) -> Result<Recorded, ProveError> {
    let parsed = parse_c1(c1)?;
    let size = u64::from(parsed.output.registered_proof.sector_size());
    with_shape!(
        size,
        record_partition_shape,
        parsed.output,
        k,
        parts,
        what,
        code
    )
}

fn record_partition_shape<Tree: 'static + MerkleTreeTrait>(
    c1: SealCommitPhase1Output,
    k: usize,
    parts: usize,
    what: Recording,
    code: CircuitCode,
) -> Result<Recorded, ProveError> {
    let job = PoRepJob::<Tree>::new(c1)?;
    if k >= job.partitions() {
        return Err(ProveError::InvalidInput(format!("no partition {k}")));
    }
    job.record(k, parts, what, code)
}

/// Receives one partition circuit of a C1 output (see [`visit_partition`]).
pub trait PartitionVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the circuit of the partition and its public inputs as filecoin-proofs'
    /// `generate_public_inputs` computes them.
    fn visit<C: bellperson::Circuit<blstrs::Scalar> + Clone + Send>(
        self,
        circuit: C,
        public_inputs: Vec<blstrs::Scalar>,
    ) -> Self::Output;
}

/// Builds partition `k`'s circuit from a C1 output and hands it to `visitor` (tests and
/// benchmarks compare our synthesis and prover with bellperson's on real circuits).
pub fn visit_partition<V: PartitionVisitor>(
    c1: &[u8],
    k: usize,
    visitor: V,
) -> Result<V::Output, ProveError> {
    let parsed = parse_c1(c1)?;
    let size = u64::from(parsed.output.registered_proof.sector_size());
    with_shape!(size, visit_shape[V], parsed.output, k, visitor)
}

fn visit_shape<Tree: 'static + MerkleTreeTrait, V: PartitionVisitor>(
    c1: SealCommitPhase1Output,
    k: usize,
    visitor: V,
) -> Result<V::Output, ProveError> {
    let job = PoRepJob::<Tree>::new(c1)?;
    if k >= job.partitions() {
        return Err(ProveError::InvalidInput(format!("no partition {k}")));
    }
    Ok(visitor.visit(job.circuit(k)?, job.partition_inputs(k)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_id_is_leb128_of_the_actor_id() {
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
        assert!(prover_id(u64::MAX)[..10]
            .iter()
            .take(9)
            .all(|b| b & 0x80 != 0));
    }

    #[test]
    fn even_runs_tile_the_range() {
        for (len, n) in [(18, 16), (18, 18), (2, 2), (7, 3), (1, 1)] {
            let runs: Vec<_> = even_runs(len, n).collect();
            assert_eq!(runs.len(), n);
            assert_eq!(runs[0].start, 0);
            assert_eq!(runs[n - 1].end, len);
            assert!(runs.windows(2).all(|w| w[0].end == w[1].start));
            let sizes: Vec<_> = runs.iter().map(|r| r.len()).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn garbage_c1_is_a_typed_error() {
        for bad in [
            &b"not json"[..],
            b"{}",
            b"{\"Phase1Out\": 5}",
            b"{\"SectorNum\":1,\"Phase1Out\":\"!!\",\"SectorSize\":2048}",
        ] {
            assert!(
                matches!(parse_c1(bad), Err(ProveError::InvalidInput(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
