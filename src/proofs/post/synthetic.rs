//! Synthetic WinningPoSt and WindowPoSt partitions of the real shape for any sector size, for
//! benchmarks only: the vanilla proofs of a partition with every sector, challenge and Merkle
//! path (its length and arity per level) of the sector size's registered PoSt proof, filled
//! with random values. Their circuits are storage-proofs-post's `FallbackPoStCircuit` and
//! synthesize like a real partition's (same constraints, variables and densities; different
//! values) but are not satisfied: no proof made from one verifies. The public inputs are the
//! ones a verifier computes for the partition's random randomness, sectors and replica
//! commitments: only the witness is made up. Built only with the `scaffolding` feature, which
//! cuzkd is built without, so no client request can reach it.
//!
//! A partition's circuit is one independent sub-circuit per sector slot (`sector_{i}`), so a
//! partition of fewer slots (`sectors`) is a prefix of the whole one: the tests compare it
//! with bellperson's synthesis where the whole one would not fit a test machine.

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::MerkleTreeTrait;
use rand::rngs::StdRng;
use rand::SeedableRng;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::base_path_length;
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCircuit, PublicSector};
use typenum::Unsigned;

use super::runs::runs;
use super::{setup, setup_params, Compound, PublicInputs};
use crate::pipeline::partitions::{evaluations, prove_split_partitions, PartitionCircuit};
use crate::pipeline::{JobControl, ProveError, ProvingService, StageTimings};
use crate::proofs::porep::synthetic::tree_proof;
use crate::proofs::porep::PartitionVisitor;
use crate::proofs::proof_types::post_proof;
use crate::proofs::shapes::with_shape;
use crate::srs::{ParamsId, ProofKind};
use crate::synth::{Recorded, Recording, Synthesized};

/// The shape of a sector size's PoSt partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Sector slots per partition: WindowPoSt's sectors per partition; WinningPoSt's
    /// challenges (storage-proofs-post proves each of its challenges as a slot of one
    /// challenge over the one challenged sector).
    pub sectors: usize,
    /// Challenges per slot.
    pub challenges: usize,
    /// Nodes (32-byte leaves) per sector.
    pub nodes: usize,
    /// The arity of each level of a challenge's Merkle path (tree R), leaf first.
    pub arities: Vec<usize>,
}

/// The partition shape of `sector_size`'s WinningPoSt or WindowPoSt (`kind`).
pub fn shape(kind: ProofKind, sector_size: u64) -> Result<Shape, ProveError> {
    with_shape!(sector_size, shape_of, kind, sector_size)
}

fn shape_of<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    sector_size: u64,
) -> Result<Shape, ProveError> {
    let vp = post_setup_params(kind, sector_size)?;
    let nodes = nodes(sector_size)?;
    Ok(Shape {
        sectors: vp.sector_count,
        challenges: vp.challenge_count,
        nodes,
        arities: arities::<Tree>(nodes),
    })
}

/// The vanilla setup parameters of `sector_size`'s registered WinningPoSt or WindowPoSt.
fn post_setup_params(
    kind: ProofKind,
    sector_size: u64,
) -> Result<fallback::SetupParams, ProveError> {
    if !matches!(kind, ProofKind::WinningPoSt | ProofKind::WindowPoSt) {
        return Err(ProveError::InvalidInput(format!("{kind} is not a PoSt")));
    }
    setup_params(&post_proof(kind, sector_size)?.as_v1_config())
}

fn nodes(sector_size: u64) -> Result<usize, ProveError> {
    usize::try_from(sector_size / 32)
        .map_err(|_| ProveError::InvalidInput("sector too large".into()))
}

/// The arities of a path in a tree of `Tree`'s shape over `nodes` leaves: base levels, then
/// a sub-tree and a top-tree level where the shape has them (as `tree_proof` builds it).
fn arities<Tree: MerkleTreeTrait>(nodes: usize) -> Vec<usize> {
    let levels = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut arities = vec![Tree::Arity::to_usize(); levels];
    let (sub, top) = (
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    arities.extend([sub, top].into_iter().filter(|&a| a > 0));
    arities
}

/// The parameter set id a synthetic partition is proved with: a name no real set has.
pub fn params_id(kind: ProofKind, sector_size: u64) -> ParamsId {
    ParamsId {
        kind,
        sector_size,
        cache_id: format!("synthetic-{kind}-{sector_size}"),
    }
}

/// Synthesizes a synthetic partition of `sector_size`'s `kind` (random values from `seed`)
/// with its first `sectors` slots (`None`: all of them, the real partition), whole, on this
/// thread. The same `seed` gives the same partition, and its first slots whatever `sectors`.
pub fn synthesize(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
) -> Result<Synthesized, ProveError> {
    evaluations(record(
        kind,
        sector_size,
        sectors,
        seed,
        Recording::Evaluations,
    )?)
}

/// [`synthesize`] keeping `what`: the evaluations, the shape or the witness alone.
pub fn record(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
    what: Recording,
) -> Result<Recorded, ProveError> {
    visit(kind, sector_size, sectors, seed, Record(what))?
}

/// Proves a synthetic partition (values from `seed`, its first `sectors` slots as
/// [`synthesize`] takes them) through `svc`'s stages — admission, synthesis (in runs of its
/// sectors on the part threads, as a real partition), the device queue — with the parameters
/// [`params_id`], which the caller made resident for the same slot count
/// ([`ProvingService::preload_built`]). The proof is dropped: it cannot verify.
pub fn prove_partition(
    svc: &ProvingService,
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
    control: &JobControl,
) -> Result<StageTimings, ProveError> {
    prove_prebuilt(svc, &prebuild(kind, sector_size, sectors, seed)?, control)
}

/// Which synthetic partition: as [`synthesize`] takes it.
#[derive(Clone, Copy)]
struct Of {
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
}

/// A synthetic partition's circuit made ahead of its proof, as a client's vanilla proofs
/// arrive made: a proof of it ([`prove_prebuilt`]) times what a job does with them, not the
/// making of random Merkle paths and their roots, which no real job does.
pub struct Prebuilt {
    of: Of,
    circuit: Box<dyn std::any::Any + Send + Sync>,
}

/// [`Prebuilt`] of the synthetic partition [`prove_partition`] would prove.
pub fn prebuild(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
) -> Result<Prebuilt, ProveError> {
    let of = Of {
        kind,
        sector_size,
        sectors,
        seed,
    };
    with_shape!(sector_size, prebuild_shape, of)
}

fn prebuild_shape<Tree: 'static + MerkleTreeTrait>(of: Of) -> Result<Prebuilt, ProveError> {
    let (circuit, _) = circuit_of::<Tree>(of)?;
    Ok(Prebuilt {
        of,
        circuit: Box::new(circuit),
    })
}

/// [`prove_partition`] of a circuit made ahead, from a copy of it (it may be proved again).
pub fn prove_prebuilt(
    svc: &ProvingService,
    p: &Prebuilt,
    control: &JobControl,
) -> Result<StageTimings, ProveError> {
    let id = params_id(p.of.kind, p.of.sector_size);
    with_shape!(p.of.sector_size, prove_prebuilt_shape, svc, &id, p, control)
}

fn prove_prebuilt_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    id: &ParamsId,
    p: &Prebuilt,
    control: &JobControl,
) -> Result<StageTimings, ProveError> {
    let circuit = p
        .circuit
        .downcast_ref::<FallbackPoStCircuit<Tree>>()
        .ok_or_else(|| {
            ProveError::InvalidInput("a circuit made for another sector shape".into())
        })?;
    // The stages may synthesize it more than once (a retry): each time from a copy, cut into
    // runs of its slots.
    let make = |_, most| Ok(runs(circuit.clone(), most));
    Ok(prove_split_partitions(svc, id, 1, make, control)?.timings)
}

/// [`record`] of the partition cut into at most `parts` runs of its sectors (of its
/// challenges where it has one sector), synthesized at once on the current rayon pool and
/// stitched, as the stages synthesize a PoSt partition.
pub fn record_in_parts(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
    parts: usize,
    what: Recording,
) -> Result<Recorded, ProveError> {
    let of = Of {
        kind,
        sector_size,
        sectors,
        seed,
    };
    with_shape!(sector_size, record_parts_shape, of, parts, what)
}

fn record_parts_shape<Tree: 'static + MerkleTreeTrait>(
    of: Of,
    parts: usize,
    what: Recording,
) -> Result<Recorded, ProveError> {
    let (circuit, _) = circuit_of::<Tree>(of)?;
    match runs(circuit, parts) {
        PartitionCircuit::Whole(c) => crate::synth::record(vec![c], "", what),
        PartitionCircuit::Split { parts, marker } => crate::synth::record(parts, marker, what),
    }
    .map_err(|e| ProveError::Synthesis(format!("synthetic PoSt partition: {e}")))
}

/// Records a circuit with cuzk's constraint systems.
struct Record(Recording);

impl PartitionVisitor for Record {
    type Output = Result<Recorded, ProveError>;
    fn visit<C: bellperson::Circuit<blstrs::Scalar> + Clone + Send>(
        self,
        circuit: C,
        _public_inputs: Vec<blstrs::Scalar>,
    ) -> Self::Output {
        crate::synth::record(vec![circuit], "", self.0)
            .map_err(|e| ProveError::Synthesis(format!("synthetic PoSt partition: {e}")))
    }
}

/// Builds the circuit of a synthetic partition (as [`synthesize`] takes its arguments) and
/// hands it to `visitor` with its public inputs as storage-proofs-post's
/// `generate_public_inputs` computes them (tests compare synthesis with bellperson's).
pub fn visit<V: PartitionVisitor>(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
    visitor: V,
) -> Result<V::Output, ProveError> {
    with_shape!(
        sector_size,
        visit_shape[V],
        kind,
        sector_size,
        sectors,
        seed,
        visitor
    )
}

fn visit_shape<Tree: 'static + MerkleTreeTrait, V: PartitionVisitor>(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
    visitor: V,
) -> Result<V::Output, ProveError> {
    let (circuit, inputs) = circuit_of::<Tree>(Of {
        kind,
        sector_size,
        sectors,
        seed,
    })?;
    Ok(visitor.visit(circuit, inputs))
}

/// The circuit of a synthetic partition and its public inputs as storage-proofs-post's
/// `generate_public_inputs` computes them.
fn circuit_of<Tree: 'static + MerkleTreeTrait>(
    of: Of,
) -> Result<(FallbackPoStCircuit<Tree>, Vec<blstrs::Scalar>), ProveError> {
    let p = partition::<Tree>(of.kind, of.sector_size, of.sectors, of.seed)?;
    let failed = |e: anyhow::Error| ProveError::Synthesis(format!("synthetic PoSt: {e}"));
    type C<Tree> = Compound<Tree>;
    let circuit =
        <C<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::circuit(
            &p.public_inputs,
            Default::default(),
            &p.vanilla,
            &p.pp.vanilla_params,
            Some(0),
        )
        .map_err(failed)?;
    let inputs = <C<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::generate_public_inputs(
        &p.public_inputs,
        &p.pp.vanilla_params,
        Some(0),
    )
    .map_err(failed)?;
    Ok((circuit, inputs))
}

/// The constraints of the partition with its first `sectors` slots (`None`: all), input
/// constraints included, as [`synthesize`] would record them. A prefix is counted on the
/// blank circuit by bellperson's counting constraint system (nothing evaluated or kept: about
/// a second per million constraints on one core). The whole partition is its first slot's
/// count plus the next slot's once per further slot: the circuit is one independent
/// sub-circuit of one shape per slot, and nothing else but ONE's input constraint
/// (tests/post_synthetic.rs checks it on prefixes and against filecoin-proofs' figures);
/// counting a whole WindowPoSt partition's 125 M constraints would take minutes.
pub fn count_constraints(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
) -> Result<usize, ProveError> {
    if let Some(n) = sectors {
        return with_shape!(sector_size, count_prefix, kind, sector_size, n);
    }
    let slots = post_setup_params(kind, sector_size)?.sector_count;
    let one = count_constraints(kind, sector_size, Some(1))?;
    if slots == 1 {
        return Ok(one);
    }
    let two = count_constraints(kind, sector_size, Some(2))?;
    Ok(one + (slots - 1) * (two - one))
}

fn count_prefix<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    sector_size: u64,
    sectors: usize,
) -> Result<usize, ProveError> {
    use bellperson::util_cs::bench_cs::BenchCS;
    use bellperson::Circuit;
    let pp = public_params::<Tree>(kind, sector_size, Some(sectors))?;
    let blank = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp.vanilla_params);
    let mut cs = BenchCS::<blstrs::Scalar>::new();
    blank
        .synthesize(&mut cs)
        .map_err(|e| ProveError::Synthesis(format!("counting the blank PoSt circuit: {e}")))?;
    // Our systems add one `x · 0 = 0` constraint per input, as bellperson's prover does.
    Ok(cs.num_constraints() + cs.num_inputs())
}

/// The public parameters of `kind` at `sector_size`, with `sectors` slots per partition
/// where given (at least one, at most the real count).
fn public_params<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
) -> Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>, ProveError> {
    let mut vp = post_setup_params(kind, sector_size)?;
    match sectors {
        Some(n) if n == 0 || n > vp.sector_count => {
            return Err(ProveError::InvalidInput(format!(
                "{n} sector slots: a {kind} partition has 1 to {}",
                vp.sector_count
            )))
        }
        Some(n) => vp.sector_count = n,
        None => {}
    }
    setup::<Tree>(vp, None)
}

/// A synthetic partition: its public parameters (with its slot count), public inputs and
/// vanilla proof.
struct Partition<Tree: 'static + MerkleTreeTrait> {
    pp: compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>,
    public_inputs: PublicInputs<Tree>,
    vanilla: fallback::Proof<Tree::Proof>,
}

fn partition<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    sector_size: u64,
    sectors: Option<usize>,
    seed: u64,
) -> Result<Partition<Tree>, ProveError> {
    let pp = public_params::<Tree>(kind, sector_size, sectors)?;
    let vp = &pp.vanilla_params;
    let nodes = nodes(sector_size)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let randomness = Domain::random(&mut rng);
    let prover_id = Domain::random(&mut rng);
    let mut public_sectors = Vec::with_capacity(vp.sector_count);
    let mut proofs = Vec::with_capacity(vp.sector_count);
    for i in 0..vp.sector_count {
        // Slot i's values from a generator of its own: a partition of fewer slots is a
        // prefix of the whole one.
        let mut rng =
            StdRng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let id = i as u64;
        // The leaves the verifier challenges, so that the public inputs are the real ones.
        let leaves: Vec<usize> = (0..vp.challenge_count)
            .map(|n| {
                let index = fallback::get_challenge_index(vp.api_version, i, vp.challenge_count, n);
                fallback::generate_leaf_challenge(vp, randomness, id, index) as usize
            })
            .collect();
        proofs.push(sector_proof::<Tree>(&mut rng, nodes, &leaves));
        public_sectors.push(PublicSector {
            id: id.into(),
            comm_r: Domain::random(&mut rng),
        });
    }
    let public_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: public_sectors,
        k: Some(0),
    };
    let vanilla = fallback::Proof { sectors: proofs };
    Ok(Partition {
        pp,
        public_inputs,
        vanilla,
    })
}

/// One sector's vanilla proof: a path of the real shape to each of `leaves` in a tree R over
/// `nodes` leaves, and random comm_c and comm_r_last (their hash is not the sector's comm_r).
pub(super) fn sector_proof<Tree: 'static + MerkleTreeTrait>(
    rng: &mut StdRng,
    nodes: usize,
    leaves: &[usize],
) -> fallback::SectorProof<Tree::Proof> {
    let comm_c: <Tree::Hasher as Hasher>::Domain = Domain::random(rng);
    let comm_r_last = Domain::random(rng);
    let inclusion_proofs = leaves
        .iter()
        .map(|&leaf| tree_proof::<Tree>(rng, nodes, leaf % nodes, comm_r_last))
        .collect();
    fallback::SectorProof {
        inclusion_proofs,
        comm_c,
        comm_r_last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_the_registered_proofs() {
        let win = shape(ProofKind::WinningPoSt, 32 << 30).unwrap();
        assert_eq!((win.sectors, win.challenges, win.nodes), (66, 1, 1 << 30));
        // 2^30 leaves: nine octal base levels under an 8-ary sub-tree root.
        assert_eq!(win.arities, vec![8; 10]);
        let window = shape(ProofKind::WindowPoSt, 32 << 30).unwrap();
        assert_eq!((window.sectors, window.challenges), (2349, 10));
        let big = shape(ProofKind::WindowPoSt, 64 << 30).unwrap();
        assert_eq!(
            (big.sectors, big.challenges, big.nodes),
            (2300, 10, 1 << 31),
            "filecoin-proofs' WINDOW_POST_SECTOR_COUNT at 64 GiB"
        );
        // 2^31 leaves: nine octal base levels, an 8-ary sub-tree and a binary top tree.
        let mut arities = vec![8; 10];
        arities.push(2);
        assert_eq!(big.arities, arities);
        assert!(shape(ProofKind::PoRep, 32 << 30).is_err());
        assert!(shape(ProofKind::WindowPoSt, 3 << 30).is_err());
    }

    #[test]
    fn slot_counts_out_of_range_are_refused() {
        for n in [0, 2350] {
            let e = count_constraints(ProofKind::WindowPoSt, 32 << 30, Some(n));
            assert!(matches!(e, Err(ProveError::InvalidInput(_))), "{n}: {e:?}");
        }
        let e = count_constraints(ProofKind::PoRep, 32 << 30, Some(1));
        assert!(matches!(e, Err(ProveError::InvalidInput(_))), "{e:?}");
    }
}
