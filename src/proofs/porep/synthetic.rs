//! Synthetic PoRep partitions of the real shape for any sector size, for benchmarks only:
//! the vanilla proofs of a C1 output with every challenge, Merkle path (its length and arity
//! per level), column and parent count of the sector size's registered proof, filled with
//! random values. Its circuits synthesize like a real sector's (same constraints, variables
//! and densities; different values) but are not satisfied: no proof made from one verifies.
//! Built only with the `scaffolding` feature, which cuzkd is built without, so no client
//! request can reach it.

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait, PoRepConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{base_path_length, MerkleProof};
use storage_proofs_porep::stacked::{
    self, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS,
};
use typenum::Unsigned;

use super::circuit::{TreeDomain, TreeProof};
use super::{compound_params, prove_split_partitions, CircuitCode, PoRepJob};
use crate::pipeline::partitions::evaluations;
use crate::pipeline::{JobControl, ProveError, ProvingService, StageTimings};
use crate::proofs::proof_types::seal_proof;
use crate::proofs::shapes::with_shape;
use crate::srs::ParamsId;
use crate::srs::ProofKind;
use crate::synth::{Recorded, Recording, Synthesized};

/// The shape of a sector size's PoRep partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Partitions per sector.
    pub partitions: usize,
    /// Challenges per partition.
    pub challenges: usize,
    /// Nodes (32-byte leaves) per sector.
    pub nodes: usize,
    /// Layers.
    pub layers: usize,
}

/// The partition shape of `sector_size`'s PoRep.
pub fn shape(sector_size: u64) -> Result<Shape, ProveError> {
    with_shape!(sector_size, shape_of, sector_size)
}

fn shape_of<Tree: 'static + MerkleTreeTrait>(sector_size: u64) -> Result<Shape, ProveError> {
    let config = seal_proof(sector_size)?.as_v1_config();
    let pp = compound_params::<Tree>(&config)?;
    Ok(shape_from(&config, &pp.vanilla_params))
}

fn shape_from<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    v: &stacked::PublicParams<Tree>,
) -> Shape {
    Shape {
        partitions: usize::from(config.partitions),
        challenges: v.challenges.num_challenges_per_partition(),
        nodes: v.graph.size(),
        layers: v.num_layers,
    }
}

/// Synthesizes partition `k` of a synthetic sector of `sector_size` (random values from
/// `seed`) in up to `parts` parts on the current rayon pool (1: whole, on this thread).
/// The same `seed` gives the same partition.
pub fn synthesize(
    sector_size: u64,
    k: usize,
    parts: usize,
    seed: u64,
) -> Result<Synthesized, ProveError> {
    evaluations(record(sector_size, k, parts, seed, Recording::Evaluations)?)
}

/// [`synthesize`] keeping `what`: the evaluations, the shape or the witness alone.
pub fn record(
    sector_size: u64,
    k: usize,
    parts: usize,
    seed: u64,
    what: Recording,
) -> Result<Recorded, ProveError> {
    record_by(sector_size, k, parts, seed, what, CircuitCode::Ours)
}

/// [`record`] running `code`'s circuit.
pub fn record_by(
    sector_size: u64,
    k: usize,
    parts: usize,
    seed: u64,
    what: Recording,
    code: CircuitCode,
) -> Result<Recorded, ProveError> {
    with_shape!(
        sector_size,
        record_shape,
        sector_size,
        k,
        parts,
        seed,
        what,
        code
    )
}

fn record_shape<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    k: usize,
    parts: usize,
    seed: u64,
    what: Recording,
    code: CircuitCode,
) -> Result<Recorded, ProveError> {
    let job = job::<Tree>(sector_size, seed)?;
    if k >= job.partitions() {
        return Err(ProveError::InvalidInput(format!("no partition {k}")));
    }
    job.record(k, parts, what, code)
}

/// The parameter set id a synthetic sector is proved with: a name no real set has.
pub fn params_id(sector_size: u64) -> ParamsId {
    ParamsId {
        kind: ProofKind::PoRep,
        sector_size,
        cache_id: format!("synthetic-porep-{sector_size}"),
    }
}

/// Proves every partition of a synthetic sector (values from `seed`) through `svc`'s stages
/// — admission under the memory budget, synthesis in parts, the device queue — with the
/// parameters [`params_id`], which the caller made resident
/// ([`ProvingService::preload_built`]). The proofs are dropped: they cannot verify.
pub fn prove_sector(
    svc: &ProvingService,
    sector_size: u64,
    seed: u64,
    control: &JobControl,
) -> Result<StageTimings, ProveError> {
    with_shape!(
        sector_size,
        prove_sector_shape,
        svc,
        sector_size,
        seed,
        control
    )
}

fn prove_sector_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    sector_size: u64,
    seed: u64,
    control: &JobControl,
) -> Result<StageTimings, ProveError> {
    let job = job::<Tree>(sector_size, seed)?;
    let make = |k, most| job.circuit_parts(k, most);
    let id = params_id(sector_size);
    let proved = prove_split_partitions(svc, &id, job.partitions(), make, control)?;
    Ok(proved.timings)
}

/// A synthetic job: random vanilla proofs for every partition (partition `k`'s from its own
/// generator, so it is the same whichever partitions are built).
fn job<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    seed: u64,
) -> Result<PoRepJob<Tree>, ProveError> {
    let registered_proof = seal_proof(sector_size)?;
    let config: PoRepConfig = registered_proof.as_v1_config();
    let pp = compound_params::<Tree>(&config)?;
    let shape = shape_from(&config, &pp.vanilla_params);
    let mut rng = StdRng::seed_from_u64(seed);
    let degree = pp.vanilla_params.graph.base_graph().degree();
    let expansion = pp.vanilla_params.graph.expansion_degree();
    // Every challenge opens the same trees: comm_c and comm_r_last are one root each.
    let roots = (Domain::random(&mut rng), Domain::random(&mut rng));
    let vanilla = (0..shape.partitions as u64)
        .map(|k| {
            let mut rng = StdRng::seed_from_u64(seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            (0..shape.challenges)
                .map(|_| challenge_proof::<Tree>(&mut rng, shape, degree, expansion, roots))
                .collect()
        })
        .collect();
    let public_inputs = stacked::PublicInputs {
        replica_id: Domain::random(&mut rng),
        tau: Some(stacked::Tau {
            comm_d: Domain::random(&mut rng),
            comm_r: Domain::random(&mut rng),
        }),
        k: None,
        seed: Some(rng.gen()),
    };
    Ok(PoRepJob {
        registered_proof,
        config,
        public_inputs,
        pp,
        vanilla,
        comm_r: [1; 32],
        comm_d: [1; 32],
        seed: [1; 32],
        ticket: [1; 32],
    })
}

/// A C1 output (filecoin-proofs-api's `SealCommitPhase1Output` JSON) of `sector_size`'s
/// seal proof with this module's random vanilla proofs: every partition, challenge and
/// path of the real shape (about 37 MiB of JSON at 32 GiB), and the replica id of
/// `miner_id`'s sector `sector_number`, so that it parses and passes the checks made before
/// queueing like a real one, and fails verification. For tests of inputs of real size.
pub fn c1_json(
    sector_size: u64,
    seed: u64,
    miner_id: u64,
    sector_number: u64,
) -> Result<Vec<u8>, ProveError> {
    with_shape!(
        sector_size,
        c1_json_shape,
        sector_size,
        seed,
        miner_id,
        sector_number
    )
}

fn c1_json_shape<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    seed: u64,
    miner_id: u64,
    sector_number: u64,
) -> Result<Vec<u8>, ProveError> {
    /// filecoin-proofs-api's `VanillaSealProof` variant of a sector size, as serde writes
    /// an externally tagged enum: `{"<variant>": proofs}`.
    struct Tagged<'a, P>(&'static str, &'a P);
    impl<P: serde::Serialize> serde::Serialize for Tagged<'_, P> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry(self.0, self.1)?;
            map.end()
        }
    }
    #[derive(serde::Serialize)]
    struct C1<'a, P, D> {
        registered_proof: filecoin_proofs_api::RegisteredSealProof,
        vanilla_proofs: Tagged<'a, P>,
        comm_r: [u8; 32],
        comm_d: [u8; 32],
        replica_id: D,
        seed: [u8; 32],
        ticket: [u8; 32],
    }
    let variant = match sector_size {
        2048 => "StackedDrg2KiBV1",
        s if s == 8 << 20 => "StackedDrg8MiBV1",
        s if s == 512 << 20 => "StackedDrg512MiBV1",
        s if s == 32 << 30 => "StackedDrg32GiBV1",
        _ => "StackedDrg64GiBV1",
    };
    let mut job = job::<Tree>(sector_size, seed)?;
    job.public_inputs.replica_id = stacked::generate_replica_id::<Tree::Hasher, _>(
        &super::prover_id(miner_id),
        sector_number,
        &job.ticket,
        job.comm_d,
        &job.config.porep_id,
    );
    let c1 = C1 {
        registered_proof: job.registered_proof,
        vanilla_proofs: Tagged(variant, &job.vanilla),
        comm_r: job.comm_r,
        comm_d: job.comm_d,
        replica_id: job.public_inputs.replica_id,
        seed: job.seed,
        ticket: job.ticket,
    };
    serde_json::to_vec(&c1).map_err(|e| ProveError::InvalidInput(format!("synthetic C1: {e}")))
}

/// One challenge's vanilla proof: random values, the real shape.
fn challenge_proof<Tree: 'static + MerkleTreeTrait>(
    rng: &mut StdRng,
    shape: Shape,
    degree: usize,
    expansion: usize,
    (comm_c, comm_r_last): (TreeDomain<Tree>, TreeDomain<Tree>),
) -> stacked::Proof<Tree, DefaultPieceHasher> {
    let node = rng.gen_range(1..shape.nodes);
    let column = |rng: &mut StdRng, at: usize| {
        let rows = (0..shape.layers).map(|_| Domain::random(rng)).collect();
        // Columns are indexed by u32 in storage-proofs; sectors have at most 2^31 nodes.
        ColumnProof::new(
            at as u32,
            rows,
            tree_proof::<Tree>(rng, shape.nodes, at, comm_c),
        )
    };
    let parents = |rng: &mut StdRng, n: usize| -> Vec<_> {
        (0..n)
            .map(|_| {
                let at = rng.gen_range(0..shape.nodes);
                column(rng, at)
            })
            .collect()
    };
    let replica_column_proofs = ReplicaColumnProof {
        c_x: column(rng, node),
        drg_parents: parents(rng, degree),
        exp_parents: parents(rng, expansion),
    };
    let labels =
        |rng: &mut StdRng| -> Vec<_> { (0..TOTAL_PARENTS).map(|_| Domain::random(rng)).collect() };
    let labeling_proofs = (1..=shape.layers)
        .map(|layer| LabelingProof::new(layer as u32, node as u64, labels(rng)))
        .collect();
    let encoding_proof = EncodingProof::new(shape.layers as u32, node as u64, labels(rng));
    stacked::Proof {
        comm_d_proofs: binary_proof(rng, shape.nodes, node),
        comm_r_last_proof: tree_proof::<Tree>(rng, shape.nodes, node, comm_r_last),
        replica_column_proofs,
        labeling_proofs,
        encoding_proof,
    }
}

/// A path to leaf `node` of a binary tree over `nodes` leaves (tree D).
fn binary_proof<H: Hasher, A: filecoin_hashers::PoseidonArity>(
    rng: &mut StdRng,
    nodes: usize,
    node: usize,
) -> MerkleProof<H, A> {
    let levels = nodes.trailing_zeros() as usize;
    let path = (0..levels)
        .map(|l| (vec![Domain::random(rng)], (node >> l) & 1))
        .collect();
    MerkleProof::from_parts(Domain::random(rng), Domain::random(rng), path)
}

/// A path to leaf `node` of a tree of `Tree`'s shape over `nodes` leaves: base levels of
/// its arity, then a sub-tree and a top-tree level where the shape has them.
pub(crate) fn tree_proof<Tree: 'static + MerkleTreeTrait>(
    rng: &mut StdRng,
    nodes: usize,
    node: usize,
    root: TreeDomain<Tree>,
) -> TreeProof<Tree> {
    let base = Tree::Arity::to_usize();
    let sub = Tree::SubTreeArity::to_usize();
    let top = Tree::TopTreeArity::to_usize();
    let levels = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut arities = vec![base; levels];
    arities.extend([sub, top].into_iter().filter(|&a| a > 0));
    let mut rest = node;
    let path = arities
        .into_iter()
        .map(|arity| {
            let index = rest % arity;
            rest /= arity;
            let siblings = (1..arity).map(|_| Domain::random(rng)).collect();
            (siblings, index)
        })
        .collect();
    MerkleProof::from_parts(Domain::random(rng), root, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_the_registered_proofs() {
        let s = shape(32 << 30).unwrap();
        assert_eq!((s.partitions, s.nodes, s.layers), (10, 1 << 30, 11));
        assert!(s.challenges >= 17, "{s:?}");
        assert!(shape(3 << 30).is_err());
    }
}
