//! PoRep's partition circuit, written against [`Gadgets`] so that a witness-only synthesis
//! computes its SHA-256 natively.
//!
//! It is storage-proofs-porep 19's `StackedCircuit`, gadget for gadget and in the same order:
//! the same variables, inputs and constraints (tests compare the two on real partitions). Only
//! the SHA-256 hashes — the labels and tree D's path, nearly all of a partition's
//! constraints — go through [`Gadgets::sha256_packed`]; every other gadget is the Filecoin
//! crates' own.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonFunction;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::DefaultPieceHasher;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::{
    constraint, encode::encode, insertion::insert, uint64::UInt64, variables::Root,
};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked;
use typenum::{U11, U2};

use crate::synth::{Gadgets, Synthesize};

type TreeAuthPath<T> = AuthPath<
    <T as MerkleTreeTrait>::Hasher,
    <T as MerkleTreeTrait>::Arity,
    <T as MerkleTreeTrait>::SubTreeArity,
    <T as MerkleTreeTrait>::TopTreeArity,
>;

type TreeProof<T> = MerkleProof<
    <T as MerkleTreeTrait>::Hasher,
    <T as MerkleTreeTrait>::Arity,
    <T as MerkleTreeTrait>::SubTreeArity,
    <T as MerkleTreeTrait>::TopTreeArity,
>;

type TreeDomain<T> = <<T as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// One partition (or a contiguous run of its challenges) with every value assigned.
pub(crate) struct PoRepCircuit<Tree: MerkleTreeTrait> {
    replica_id: Fr,
    comm_d: Fr,
    comm_r: Fr,
    comm_r_last: Fr,
    comm_c: Fr,
    challenges: Vec<Challenge<Tree>>,
}

/// A replica column (one label per layer) and its path in tree C.
struct Column<Tree: MerkleTreeTrait> {
    rows: Vec<Fr>,
    path: TreeAuthPath<Tree>,
}

struct Challenge<Tree: MerkleTreeTrait> {
    node: u64,
    data_leaf: Fr,
    /// Tree D's path: each level's sibling, and whether the node is the right child.
    comm_d_path: Vec<(Fr, bool)>,
    comm_r_last_path: TreeAuthPath<Tree>,
    comm_c_path: TreeAuthPath<Tree>,
    drg_parents: Vec<Column<Tree>>,
    exp_parents: Vec<Column<Tree>>,
}

/// The fields of a vanilla column proof that storage-proofs-porep keeps to itself, read
/// through its serde form (the C1 output's).
#[derive(Deserialize)]
#[serde(bound = "P: DeserializeOwned, D: DeserializeOwned")]
struct ColumnProofFields<P, D> {
    column: ColumnFields<D>,
    inclusion_proof: P,
}

#[derive(Deserialize)]
#[serde(bound = "D: DeserializeOwned")]
struct ColumnFields<D> {
    rows: Vec<D>,
}

#[derive(Deserialize)]
struct LabelingFields {
    node: u64,
}

/// Reads `value`'s serde form as `T`.
fn fields<T: DeserializeOwned>(value: &impl serde::Serialize, what: &str) -> Result<T, String> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("{what}: {e}"))
}

impl<Tree: 'static + MerkleTreeTrait> Column<Tree> {
    fn new(proof: &stacked::ColumnProof<TreeProof<Tree>>) -> Result<Self, String> {
        let f: ColumnProofFields<TreeProof<Tree>, TreeDomain<Tree>> = fields(proof, "column")?;
        if f.column.rows.len() != 2 && f.column.rows.len() != 11 {
            return Err(format!("a column of {} layers", f.column.rows.len()));
        }
        Ok(Column {
            rows: f.column.rows.into_iter().map(Into::into).collect(),
            path: f.inclusion_proof.as_options().into(),
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> PoRepCircuit<Tree> {
    /// The circuit of `vanilla` (one partition's challenges, or a run of them), as
    /// `StackedCompound::circuit` builds it.
    pub(crate) fn new(
        public_inputs: &stacked::PublicInputs<
            TreeDomain<Tree>,
            <DefaultPieceHasher as Hasher>::Domain,
        >,
        vanilla: &[stacked::Proof<Tree, DefaultPieceHasher>],
    ) -> Result<Self, String> {
        let first = vanilla.first().ok_or("no vanilla proofs")?;
        let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
        if vanilla
            .iter()
            .any(|p| p.comm_r_last() != comm_r_last || p.comm_c() != comm_c)
        {
            return Err("inconsistent comm_r_last or comm_c".into());
        }
        let tau = public_inputs.tau.as_ref().ok_or("no comm_d and comm_r")?;
        Ok(PoRepCircuit {
            replica_id: public_inputs.replica_id.into(),
            comm_d: tau.comm_d.into(),
            comm_r: tau.comm_r.into(),
            comm_r_last: comm_r_last.into(),
            comm_c: comm_c.into(),
            challenges: vanilla
                .iter()
                .map(Challenge::new)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> Challenge<Tree> {
    fn new(p: &stacked::Proof<Tree, DefaultPieceHasher>) -> Result<Self, String> {
        let labeling = p.labeling_proofs.first().ok_or("no labeling proof")?;
        let node = fields::<LabelingFields>(labeling, "labeling proof")?.node;
        let comm_d_path = p
            .comm_d_proofs
            .as_options()
            .into_iter()
            .map(|(siblings, index)| match (siblings.as_slice(), index) {
                ([Some(s)], Some(i @ (0 | 1))) => Ok((*s, i == 1)),
                _ => Err("tree D's path is not a binary path".to_string()),
            })
            .collect::<Result<_, _>>()?;
        let columns = |proofs: &[stacked::ColumnProof<TreeProof<Tree>>]| {
            proofs
                .iter()
                .map(Column::new)
                .collect::<Result<Vec<_>, _>>()
        };
        let rcp = &p.replica_column_proofs;
        let drg_parents = columns(&rcp.drg_parents)?;
        let exp_parents = columns(&rcp.exp_parents)?;
        let c_x = Column::<Tree>::new(&rcp.c_x)?;
        let layers = c_x.rows.len();
        if drg_parents.is_empty()
            || exp_parents.is_empty()
            || drg_parents
                .iter()
                .chain(&exp_parents)
                .any(|c| c.rows.len() != layers)
        {
            return Err("parent columns of unequal layers".into());
        }
        Ok(Challenge {
            node,
            data_leaf: p.comm_d_proofs.leaf().into(),
            comm_d_path,
            comm_r_last_path: p.comm_r_last_proof.as_options().into(),
            comm_c_path: c_x.path,
            drg_parents,
            exp_parents,
        })
    }
}

fn alloc<CS: ConstraintSystem<Fr>>(mut cs: CS, v: Fr) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(|| "num"), || Ok(v))
}

impl<Tree: 'static + MerkleTreeTrait> Synthesize for PoRepCircuit<Tree> {
    fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let replica_id = alloc(cs.namespace(|| "replica_id"), self.replica_id)?;
        replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
        let replica_id_bits =
            reverse_bit_numbering(replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?);
        let comm_d = alloc(cs.namespace(|| "comm_d"), self.comm_d)?;
        comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
        let comm_r = alloc(cs.namespace(|| "comm_r"), self.comm_r)?;
        comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
        let comm_r_last = alloc(cs.namespace(|| "comm_r_last"), self.comm_r_last)?;
        let comm_c = alloc(cs.namespace(|| "comm_c"), self.comm_c)?;
        let hash = <Tree::Hasher as Hasher>::Function::hash2_circuit(
            cs.namespace(|| "H_comm_c_comm_r_last"),
            &comm_c,
            &comm_r_last,
        )?;
        constraint::equal(cs, || "comm_r = H(comm_c || comm_r_last)", &comm_r, &hash);
        let commitments = Commitments {
            comm_d: &comm_d,
            comm_c: &comm_c,
            comm_r_last: &comm_r_last,
            replica_id_bits: &replica_id_bits,
        };
        for (i, challenge) in self.challenges.into_iter().enumerate() {
            // The split into parts looks for these namespaces (`PoRepJob::circuit_parts`).
            let mut cs = cs.namespace(|| format!("challenge_{i}"));
            challenge.synthesize(&mut cs, &commitments)?;
        }
        Ok(())
    }
}

/// What every challenge checks against.
struct Commitments<'a> {
    comm_d: &'a AllocatedNum<Fr>,
    comm_c: &'a AllocatedNum<Fr>,
    comm_r_last: &'a AllocatedNum<Fr>,
    replica_id_bits: &'a [Boolean],
}

impl<Tree: 'static + MerkleTreeTrait> Challenge<Tree> {
    fn synthesize<CS>(self, cs: &mut CS, at: &Commitments<'_>) -> Result<(), SynthesisError>
    where
        CS: ConstraintSystem<Fr>,
        CS::Root: Gadgets,
    {
        let data_leaf = alloc(cs.namespace(|| "data_leaf"), self.data_leaf)?;
        tree_d_inclusion(
            &mut cs.namespace(|| "comm_d_inclusion"),
            &self.comm_d_path,
            at.comm_d,
            &data_leaf,
        )?;
        let drg = open_columns::<Tree, _>(cs, "drg", self.drg_parents, at.comm_c)?;
        let exp = open_columns::<Tree, _>(cs, "exp", self.exp_parents, at.comm_c)?;
        let node = UInt64::alloc(cs.namespace(|| "challenge"), Some(self.node))?;
        node.pack_into_input(cs.namespace(|| "challenge input"))?;
        let layers = drg.first().map_or(0, Vec::len);
        let mut labels = Vec::with_capacity(layers);
        for layer in 1..=layers {
            let mut cs = cs.namespace(|| format!("labeling_{layer}"));
            let mut parents = Vec::new();
            // Layer 1 has only base parents; the expander parents read the layer before.
            let of = |col: &Vec<AllocatedNum<Fr>>, l: usize| col[l - 1].clone();
            let values: Vec<AllocatedNum<Fr>> = drg
                .iter()
                .map(|c| of(c, layer))
                .chain(exp.iter().filter(|_| layer > 1).map(|c| of(c, layer - 1)))
                .collect();
            for (i, v) in values.iter().enumerate() {
                let bits = v.to_bits_le(cs.namespace(|| format!("parent_{i}_bits")))?;
                parents.push(reverse_bit_numbering(bits));
            }
            let label = label(&mut cs, at.replica_id_bits, &parents, layer as u32, &node)?;
            labels.push(label);
        }
        let key = labels.last().ok_or(SynthesisError::Unsatisfiable)?;
        let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
        inclusion::<Tree, _>(
            cs.namespace(|| "comm_r_last_data_inclusion"),
            self.comm_r_last_path,
            at.comm_r_last,
            &encoded,
        )?;
        let column_hash = hash_column(cs.namespace(|| "c_x_column_hash"), &labels)?;
        inclusion::<Tree, _>(
            cs.namespace(|| "c_x_inclusion"),
            self.comm_c_path,
            at.comm_c,
            &column_hash,
        )
    }
}

/// Allocates each parent's column, hashes it and checks the hash's inclusion in tree C.
fn open_columns<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    kind: &str,
    columns: Vec<Column<Tree>>,
    comm_c: &AllocatedNum<Fr>,
) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
    let mut out = Vec::with_capacity(columns.len());
    for (i, col) in columns.into_iter().enumerate() {
        let rows = {
            let mut cs = cs.namespace(|| format!("{kind}_parent_{i}_num"));
            col.rows
                .iter()
                .map(|&r| alloc(cs.namespace(|| "row"), r))
                .collect::<Result<Vec<_>, _>>()?
        };
        let hash = hash_column(cs.namespace(|| format!("{kind}_parent_{i}_hash")), &rows)?;
        inclusion::<Tree, _>(
            cs.namespace(|| format!("{kind}_parent_{i}_inclusion")),
            col.path,
            comm_c,
            &hash,
        )?;
        out.push(rows);
    }
    Ok(out)
}

/// A column's Poseidon hash (its width is its number of layers: 2 or 11).
fn hash_column<CS: ConstraintSystem<Fr>>(
    cs: CS,
    rows: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match rows.len() {
        2 => PoseidonFunction::hash_multi_leaf_circuit::<U2, _>(cs, rows, 0),
        11 => PoseidonFunction::hash_multi_leaf_circuit::<U11, _>(cs, rows, 0),
        _ => Err(SynthesisError::Unsatisfiable),
    }
}

/// `leaf`'s inclusion under `root` in a tree of `Tree`'s shape, its path private.
fn inclusion<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: CS,
    path: TreeAuthPath<Tree>,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    let leaf = Root::from_allocated::<CS>(leaf.clone());
    let root = Root::from_allocated::<CS>(root.clone());
    PoRCircuit::<Tree>::synthesize(cs, leaf, path, root, true)
}

/// `leaf`'s inclusion under `root` in tree D (binary, SHA-256), as storage-proofs' `PoRCircuit`
/// checks it, each level's hash through [`Gadgets::sha256_packed`].
fn tree_d_inclusion<CS>(
    cs: &mut CS,
    path: &[(Fr, bool)],
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    CS::Root: Gadgets,
{
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    {
        let mut cs = cs.namespace(|| "base");
        for (i, &(sibling, right)) in path.iter().enumerate() {
            let mut cs = cs.namespace(|| format!("merkle tree hash {i}"));
            let bit = Boolean::from(AllocatedBit::alloc(cs.namespace(|| "index"), Some(right))?);
            index_bits.push(bit.clone());
            let sibling = alloc(cs.namespace(|| "path element"), sibling)?;
            let pair = insert(&mut cs, &cur, &[bit], &[sibling])?;
            let mut bits = Vec::with_capacity(512);
            for (j, node) in pair.iter().enumerate() {
                bits.extend(reverse_bit_numbering(
                    node.to_bits_le(cs.namespace(|| format!("{j}_bits")))?,
                ));
            }
            cur = cs.get_root().sha256_packed(&bits)?;
        }
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    constraint::equal(cs, || "root", &cur, root);
    Ok(())
}

/// A node's label in `layer`: SHA-256 of the replica id, the layer and node indices and the
/// 37 parents the label hashes (the base parents' and expander parents' labels, repeated
/// as storage-proofs-porep's `create_label_circuit` repeats them).
fn label<CS>(
    cs: &mut CS,
    replica_id_bits: &[Boolean],
    parents: &[Vec<Boolean>],
    layer: u32,
    node: &UInt64,
) -> Result<AllocatedNum<Fr>, SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    CS::Root: Gadgets,
{
    const TOTAL_PARENTS: usize = 37;
    if parents.is_empty() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let repeated = parents.iter().cycle().take(TOTAL_PARENTS);
    let mut bits = Vec::with_capacity((2 + TOTAL_PARENTS) * 256);
    bits.extend_from_slice(replica_id_bits);
    pad(&mut bits, 256);
    bits.extend(UInt32::constant(layer).into_bits_be());
    bits.extend(node.to_bits_be());
    pad(&mut bits, 512);
    for parent in repeated {
        bits.extend_from_slice(parent);
        let whole = bits.len().div_ceil(256) * 256;
        pad(&mut bits, whole);
    }
    cs.get_root().sha256_packed(&bits)
}

/// Constant zero bits up to `len`.
fn pad(bits: &mut Vec<Boolean>, len: usize) {
    bits.resize(len.max(bits.len()), Boolean::constant(false));
}
