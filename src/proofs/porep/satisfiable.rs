//! Satisfiable PoRep C1 outputs for any sector size, without sealing: for testing the real
//! path (a proof that verifies) at sizes that cannot be sealed on a test machine.
//!
//! A partition circuit checks only the challenged nodes: their labels (SHA-256 of the replica
//! id, the node and its parents' labels), their columns' and parents' columns' paths to
//! comm_c, the replica leaf's path to comm_r_last, the data leaf's path to comm_d and the
//! encoding. So a C1 output needs only those nodes to be consistent. Here the data is all
//! zeros (a committed-capacity sector: comm_d is the real CC comm_d, independent of the
//! challenges, so the replica id and then the challenges follow from it), the parents that are
//! not challenged get random columns, the challenged nodes' labels are computed layer by layer
//! from their parents', and comm_c and comm_r_last are the roots of sparse trees of the real
//! arities (every leaf not opened is zero). storage-proofs-porep's vanilla verifier accepts
//! the result (tests/porep_satisfiable.rs).
//!
//! Interactive PoRep only: Synthetic and NI-PoRep draw their challenges from comm_r, which
//! here depends on the challenges. Built with the `scaffolding` feature only.

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use merkletree::hash::Algorithm;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{base_path_length, MerkleProof};
use storage_proofs_porep::stacked::{
    self, generate_replica_id, Challenges, Column, ColumnProof, EncodingProof, LabelingProof,
    ReplicaColumnProof, TOTAL_PARENTS,
};
use typenum::Unsigned;

use super::circuit::{TreeDomain, TreeProof};
use super::{compound_params, prover_id};
use crate::pipeline::ProveError;
use crate::proofs::proof_types::seal_proof;
use crate::proofs::shapes::with_shape;

/// A satisfiable C1 output and the miner and sector it was made for.
pub struct SatisfiableC1 {
    /// The C1 output: its registered proof (interactive PoRep), comm_r (= H(comm_c,
    /// comm_r_last)), comm_d (the committed-capacity sector's), ticket and seed.
    pub c1: SealCommitPhase1Output,
    /// The same as filecoin-proofs-api's JSON (what `cuzk prove porep --c1` takes).
    pub c1_json: Vec<u8>,
    /// The miner actor id it was made for.
    pub miner_id: u64,
    /// The sector number it was made for.
    pub sector_number: u64,
}

/// A satisfiable C1 output for a `sector_size` sector of `miner_id`, number `sector_number`;
/// the ticket, seed and random labels come from `rng_seed` (the same seed, the same output).
pub fn c1_output(
    sector_size: u64,
    miner_id: u64,
    sector_number: u64,
    rng_seed: u64,
) -> Result<SatisfiableC1, ProveError> {
    with_shape!(
        sector_size,
        c1_output_shape,
        sector_size,
        miner_id,
        sector_number,
        rng_seed
    )
}

fn c1_output_shape<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    miner_id: u64,
    sector_number: u64,
    rng_seed: u64,
) -> Result<SatisfiableC1, ProveError> {
    let registered_proof = seal_proof(sector_size)?;
    let config = registered_proof.as_v1_config();
    let pp = compound_params::<Tree>(&config)?;
    let v = &pp.vanilla_params;
    if !matches!(v.challenges, Challenges::Interactive(_)) {
        return Err(ProveError::InvalidInput(format!(
            "{registered_proof:?}: satisfiable C1 outputs are made for interactive PoRep only"
        )));
    }
    let mut rng = StdRng::seed_from_u64(rng_seed);
    let (ticket, seed) = (field_bytes(&mut rng), field_bytes(&mut rng));
    let nodes = v.graph.size();
    let tree_d = SparseTree::<DefaultPieceHasher>::new(binary_levels(nodes), BTreeMap::new());
    let comm_d = tree_d.root();
    let comm_d_bytes = domain_bytes(&comm_d);
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id(miner_id),
        sector_number,
        &ticket,
        comm_d_bytes,
        &config.porep_id,
    );
    // comm_r is not known yet: interactive challenges depend on the replica id and seed only.
    let public_inputs = stacked::PublicInputs {
        replica_id,
        tau: Some(stacked::Tau {
            comm_d,
            comm_r: Default::default(),
        }),
        k: None,
        seed: Some(seed),
    };
    let challenges: Vec<Vec<usize>> = (0..usize::from(config.partitions))
        .map(|k| public_inputs.challenges(&v.challenges, nodes, Some(k)))
        .collect();
    let sector = Sector::<Tree>::label(v, &replica_id, &challenges, &mut rng)?;
    let comm_r =
        <Tree::Hasher as Hasher>::Function::hash2(&sector.tree_c.root(), &sector.tree_r.root());
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> = challenges
        .iter()
        .map(|cs| cs.iter().map(|&c| sector.proof(c, &tree_d)).collect())
        .collect::<Result<_, _>>()?;
    let c1 = SealCommitPhase1Output {
        registered_proof,
        vanilla_proofs: vanilla_seal_proof(sector_size, vanilla)?,
        comm_r: domain_bytes(&comm_r),
        comm_d: comm_d_bytes,
        replica_id: replica_fr(replica_id).into(),
        seed,
        ticket,
    };
    let c1_json = serde_json::to_vec(&c1)
        .map_err(|e| ProveError::Synthesis(format!("C1 output to JSON: {e}")))?;
    Ok(SatisfiableC1 {
        c1,
        c1_json,
        miner_id,
        sector_number,
    })
}

/// 32 random bytes that are a valid field element, as chain randomness used as one is.
fn field_bytes(rng: &mut StdRng) -> [u8; 32] {
    let mut b: [u8; 32] = rng.gen();
    b[31] &= 0x3f;
    b
}

fn domain_bytes<D: Domain>(d: &D) -> [u8; 32] {
    let mut b = [0u8; 32];
    b.copy_from_slice(d.as_ref());
    b
}

fn replica_fr<D: Domain>(d: D) -> blstrs::Scalar {
    d.into()
}

/// filecoin-proofs-api's enum around the vanilla proofs of `sector_size`'s tree shape.
fn vanilla_seal_proof<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    proofs: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>>,
) -> Result<VanillaSealProof, ProveError> {
    use filecoin_proofs::{
        SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB, SectorShape8MiB,
    };
    use VanillaSealProof::*;
    let any: Box<dyn std::any::Any> = Box::new(proofs);
    // `Tree` is the shape `with_shape!` chose for `sector_size`, so the cast cannot fail.
    macro_rules! cast {
        ($shape:ty) => {
            *any.downcast::<Vec<Vec<stacked::Proof<$shape, DefaultPieceHasher>>>>()
                .map_err(|_| {
                    ProveError::InvalidInput(format!("no vanilla proof variant for {sector_size}"))
                })?
        };
    }
    Ok(match sector_size {
        2048 => StackedDrg2KiBV1(cast!(SectorShape2KiB)),
        s if s == 8 << 20 => StackedDrg8MiBV1(cast!(SectorShape8MiB)),
        s if s == 512 << 20 => StackedDrg512MiBV1(cast!(SectorShape512MiB)),
        s if s == 32 << 30 => StackedDrg32GiBV1(cast!(SectorShape32GiB)),
        _ => StackedDrg64GiBV1(cast!(SectorShape64GiB)),
    })
}

/// The labelled nodes of a sector (columns of the challenged nodes and their parents) and
/// the sparse trees over them.
struct Sector<Tree: 'static + MerkleTreeTrait> {
    replica_id: TreeDomain<Tree>,
    layers: usize,
    base_degree: usize,
    parents: BTreeMap<usize, Vec<u32>>,
    columns: BTreeMap<usize, Vec<TreeDomain<Tree>>>,
    tree_c: SparseTree<Tree::Hasher>,
    tree_r: SparseTree<Tree::Hasher>,
}

impl<Tree: 'static + MerkleTreeTrait> Sector<Tree> {
    /// Random columns for the parents that are not challenged, the challenged nodes'
    /// labels computed from them, and the trees C (column hashes) and R (the last layer's
    /// labels: the replica of all-zero data is its encoding key).
    fn label(
        v: &stacked::PublicParams<Tree>,
        replica_id: &TreeDomain<Tree>,
        challenges: &[Vec<usize>],
        rng: &mut StdRng,
    ) -> Result<Self, ProveError> {
        let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();
        let mut parents = BTreeMap::new();
        for &c in &challenged {
            let mut p = vec![0u32; v.graph.degree()];
            v.graph
                .parents(c, &mut p)
                .map_err(|e| ProveError::Synthesis(format!("parents of node {c}: {e}")))?;
            parents.insert(c, p);
        }
        let layers = v.num_layers;
        let mut columns = BTreeMap::new();
        for &p in parents.values().flatten() {
            let p = p as usize;
            if !challenged.contains(&p) && !columns.contains_key(&p) {
                columns.insert(p, (0..layers).map(|_| Domain::random(rng)).collect());
            }
        }
        let mut sector = Sector {
            replica_id: *replica_id,
            layers,
            base_degree: v.graph.base_graph().degree(),
            parents,
            columns,
            tree_c: SparseTree::new(Vec::new(), BTreeMap::new()),
            tree_r: SparseTree::new(Vec::new(), BTreeMap::new()),
        };
        sector.label_challenged(&challenged)?;
        let nodes = v.graph.size();
        let leaves_c = sector
            .columns
            .iter()
            .map(|(&n, col)| (n, column_hash::<Tree>(n, col)))
            .collect();
        let leaves_r = challenged
            .iter()
            .map(|&n| (n, sector.columns[&n][layers - 1]))
            .collect();
        sector.tree_c = SparseTree::new(tree_levels::<Tree>(nodes), leaves_c);
        sector.tree_r = SparseTree::new(tree_levels::<Tree>(nodes), leaves_r);
        Ok(sector)
    }

    /// Labels the challenged nodes, layer by layer and in ascending order within a layer: a
    /// node's base parents (same layer) come before it, its expansion parents are in the
    /// layer below, so every label a label needs is there when it is computed.
    fn label_challenged(&mut self, challenged: &BTreeSet<usize>) -> Result<(), ProveError> {
        for &c in challenged {
            self.columns.insert(c, Vec::with_capacity(self.layers));
        }
        for layer in 1..=self.layers {
            for &c in challenged {
                let parents = self.parent_labels(c, layer)?;
                let label = create_label(&self.replica_id, layer, c, &parents);
                if let Some(col) = self.columns.get_mut(&c) {
                    col.push(label);
                }
            }
        }
        Ok(())
    }

    /// The parents' labels a label at `layer` hashes, as storage-proofs' `Proof::from_parts`
    /// lays them out: base parents at `layer`, then (above layer 1) expansion parents at the
    /// layer below, repeated to [`TOTAL_PARENTS`].
    fn parent_labels(
        &self,
        node: usize,
        layer: usize,
    ) -> Result<Vec<TreeDomain<Tree>>, ProveError> {
        let parents = &self.parents[&node];
        let used = if layer == 1 {
            self.base_degree
        } else {
            parents.len()
        };
        let mut labels = Vec::with_capacity(used);
        for (i, &p) in parents.iter().take(used).enumerate() {
            let at = if i < self.base_degree {
                layer
            } else {
                layer - 1
            };
            let label = self
                .columns
                .get(&(p as usize))
                .and_then(|col| col.get(at - 1))
                .ok_or_else(|| {
                    ProveError::Synthesis(format!(
                        "node {node}, layer {layer}: parent {p} has no label at layer {at} yet"
                    ))
                })?;
            labels.push(*label);
        }
        Ok(labels.into_iter().cycle().take(TOTAL_PARENTS).collect())
    }

    fn column_proof(&self, node: usize) -> Result<ColumnProof<TreeProof<Tree>>, ProveError> {
        let rows = self
            .columns
            .get(&node)
            .cloned()
            .ok_or_else(|| ProveError::Synthesis(format!("node {node} has no column")))?;
        let path = MerkleProof::from_parts(
            self.tree_c.leaf(node),
            self.tree_c.root(),
            self.tree_c.path(node),
        );
        Ok(ColumnProof::new(node as u32, rows, path))
    }

    /// Challenge `c`'s vanilla proof (all data leaves zero: `tree_d` has no leaf set).
    fn proof(
        &self,
        c: usize,
        tree_d: &SparseTree<DefaultPieceHasher>,
    ) -> Result<stacked::Proof<Tree, DefaultPieceHasher>, ProveError> {
        let parents = &self.parents[&c];
        let columns = |ps: &[u32]| -> Result<Vec<_>, ProveError> {
            ps.iter().map(|&p| self.column_proof(p as usize)).collect()
        };
        let replica_column_proofs = ReplicaColumnProof {
            c_x: self.column_proof(c)?,
            drg_parents: columns(&parents[..self.base_degree])?,
            exp_parents: columns(&parents[self.base_degree..])?,
        };
        let labeling_proofs: Vec<LabelingProof<Tree::Hasher>> = (1..=self.layers)
            .map(|layer| {
                let parents = self.parent_labels(c, layer)?;
                Ok(LabelingProof::new(layer as u32, c as u64, parents))
            })
            .collect::<Result<_, ProveError>>()?;
        let key_parents = self.parent_labels(c, self.layers)?;
        let encoding_proof = EncodingProof::new(self.layers as u32, c as u64, key_parents);
        Ok(stacked::Proof {
            comm_d_proofs: MerkleProof::from_parts(tree_d.leaf(c), tree_d.root(), tree_d.path(c)),
            comm_r_last_proof: MerkleProof::from_parts(
                self.tree_r.leaf(c),
                self.tree_r.root(),
                self.tree_r.path(c),
            ),
            replica_column_proofs,
            labeling_proofs,
            encoding_proof,
        })
    }
}

/// A node's label at `layer` (storage-proofs-porep's `LabelingProof::create_label`): SHA-256
/// of the replica id, the layer (u32) and node (u64) big-endian, zero-padded to 64 bytes,
/// then the parents' labels; the top two bits cleared to make it a field element.
fn create_label<D: Domain>(replica_id: &D, layer: usize, node: usize, parents: &[D]) -> D {
    let mut head = [0u8; 64];
    head[..32].copy_from_slice(replica_id.as_ref());
    head[32..36].copy_from_slice(&(layer as u32).to_be_bytes());
    head[36..44].copy_from_slice(&(node as u64).to_be_bytes());
    let mut h = Sha256::new();
    h.update(head);
    for p in parents {
        h.update(p.as_ref());
    }
    let mut out: [u8; 32] = h.finalize().into();
    out[31] &= 0x3f;
    // Below 2^254 < r: always a field element.
    D::try_from_bytes(&out).unwrap_or_default()
}

fn column_hash<Tree: 'static + MerkleTreeTrait>(
    node: usize,
    rows: &[TreeDomain<Tree>],
) -> TreeDomain<Tree> {
    match Column::<Tree::Hasher>::new(node as u32, rows.to_vec()) {
        Ok(col) => col.hash().into(),
        Err(_) => Default::default(),
    }
}

/// The levels of a binary tree over `nodes` leaves (tree D): (arity, height in its path).
fn binary_levels(nodes: usize) -> Vec<(usize, usize)> {
    (0..nodes.trailing_zeros() as usize)
        .map(|h| (2, h))
        .collect()
}

/// The levels of a tree of `Tree`'s shape over `nodes` leaves: base levels of its arity, then
/// a sub-tree and a top-tree level where the shape has them (each the first level of its own
/// path segment, hashed at height 0 as storage-proofs' `InclusionPath::root` does).
fn tree_levels<Tree: 'static + MerkleTreeTrait>(nodes: usize) -> Vec<(usize, usize)> {
    let base = Tree::Arity::to_usize();
    let levels = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut out: Vec<(usize, usize)> = (0..levels).map(|h| (base, h)).collect();
    let (sub, top) = (
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    out.extend([sub, top].into_iter().filter(|&a| a > 0).map(|a| (a, 0)));
    out
}

/// A Merkle tree of which only some leaves are set; every other leaf is zero, so a subtree
/// with no leaf set has the same root as any other of its height.
struct SparseTree<H: Hasher> {
    /// (arity, height passed to the hash) per level, leaves first.
    levels: Vec<(usize, usize)>,
    /// The nodes that have a set leaf below them, per level (leaves first, the root last).
    known: Vec<BTreeMap<usize, H::Domain>>,
    /// The node of each level with no set leaf below it.
    empty: Vec<H::Domain>,
}

impl<H: Hasher> SparseTree<H> {
    fn new(levels: Vec<(usize, usize)>, leaves: BTreeMap<usize, H::Domain>) -> Self {
        let mut empty = vec![H::Domain::default()];
        let mut known = vec![leaves];
        for (i, &(arity, height)) in levels.iter().enumerate() {
            let below = &known[i];
            let children = |p: usize| -> Vec<H::Domain> {
                (0..arity)
                    .map(|j| below.get(&(p * arity + j)).copied().unwrap_or(empty[i]))
                    .collect()
            };
            let next: BTreeMap<usize, H::Domain> = below
                .keys()
                .map(|&n| n / arity)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|p| (p, H::Function::default().multi_node(&children(p), height)))
                .collect();
            let blank = H::Function::default().multi_node(&vec![empty[i]; arity], height);
            empty.push(blank);
            known.push(next);
        }
        SparseTree {
            levels,
            known,
            empty,
        }
    }

    fn node(&self, level: usize, index: usize) -> H::Domain {
        self.known[level]
            .get(&index)
            .copied()
            .unwrap_or(self.empty[level])
    }

    fn root(&self) -> H::Domain {
        self.node(self.levels.len(), 0)
    }

    fn leaf(&self, index: usize) -> H::Domain {
        self.node(0, index)
    }

    /// The path of leaf `index`: at each level the siblings and the node's place among them.
    fn path(&self, index: usize) -> Vec<(Vec<H::Domain>, usize)> {
        let mut at = index;
        self.levels
            .iter()
            .enumerate()
            .map(|(level, &(arity, _))| {
                let (parent, place) = (at / arity, at % arity);
                let siblings = (0..arity)
                    .filter(|&j| j != place)
                    .map(|j| self.node(level, parent * arity + j))
                    .collect();
                at = parent;
                (siblings, place)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_tree_with_no_leaf_is_the_zero_tree_and_paths_reach_its_root() {
        use filecoin_hashers::poseidon::PoseidonHasher;
        let t = SparseTree::<PoseidonHasher>::new(vec![(8, 0), (8, 1), (2, 0)], BTreeMap::new());
        let one = SparseTree::<PoseidonHasher>::new(
            vec![(8, 0), (8, 1), (2, 0)],
            BTreeMap::from([(77, Domain::random(&mut StdRng::seed_from_u64(1)))]),
        );
        assert_ne!(t.root(), one.root());
        // Recompute the root from leaf 77's path, the way a verifier does.
        let mut h = one.leaf(77);
        for ((siblings, place), (_, height)) in one.path(77).into_iter().zip(&one.levels) {
            let mut nodes = siblings;
            nodes.insert(place, h);
            h = <PoseidonHasher as Hasher>::Function::default().multi_node(&nodes, *height);
        }
        assert_eq!(h, one.root());
        assert_eq!(
            one.path(77).iter().map(|p| p.1).collect::<Vec<_>>(),
            [5, 1, 1]
        );
    }
}
