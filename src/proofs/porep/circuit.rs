//! PoRep's partition circuit, written against [`Gadgets`] so that a witness-only synthesis
//! computes its hashes natively.
//!
//! It is storage-proofs-porep 19's `StackedCircuit`, gadget for gadget and in the same order:
//! the same variables, inputs and constraints (tests compare the two on real partitions). The
//! SHA-256 hashes (the labels and tree D's path, nearly all of a partition's constraints) go
//! through [`Gadgets::sha256_packed`], the Poseidon hashes (trees C and R, the columns)
//! through [`Gadgets::poseidon`]; every other gadget is the Filecoin crates' own. The vanilla
//! proofs' fields that storage-proofs-porep keeps private are read through their serde form,
//! the C1 output's.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::DefaultPieceHasher;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use storage_proofs_core::gadgets::{constraint, encode::encode, insertion::insert, uint64::UInt64};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked;

use crate::synth::{Gadgets, Synthesize};

/// A vanilla proof's path in a tree of `T`'s shape.
pub(super) type TreeProof<T> = MerkleProof<
    <T as MerkleTreeTrait>::Hasher,
    <T as MerkleTreeTrait>::Arity,
    <T as MerkleTreeTrait>::SubTreeArity,
    <T as MerkleTreeTrait>::TopTreeArity,
>;

/// A node of a tree of `T`'s shape.
pub(super) type TreeDomain<T> = <<T as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// A Merkle path, leaf to root: at each level the siblings and the node's position among
/// them (a level's arity is its siblings plus one).
type Path = Vec<(Vec<Fr>, usize)>;

/// One partition (or a contiguous run of its challenges) with every value assigned.
pub(crate) struct PoRepCircuit<Tree: MerkleTreeTrait> {
    replica_id: Fr,
    comm_d: Fr,
    comm_r: Fr,
    comm_r_last: Fr,
    comm_c: Fr,
    challenges: Vec<Challenge>,
    _tree: std::marker::PhantomData<Tree>,
}

/// A replica column (one label per layer) and its path in tree C.
struct Column {
    rows: Vec<Fr>,
    path: Path,
}

struct Challenge {
    node: u64,
    data_leaf: Fr,
    /// Tree D's path (binary, SHA-256).
    comm_d_path: Path,
    comm_r_last_path: Path,
    comm_c_path: Path,
    drg_parents: Vec<Column>,
    exp_parents: Vec<Column>,
}

/// A vanilla proof's path with every value present.
fn path_of(options: Vec<(Vec<Option<Fr>>, Option<usize>)>) -> Result<Path, String> {
    options
        .into_iter()
        .map(|(siblings, index)| {
            let siblings = siblings
                .into_iter()
                .collect::<Option<Vec<Fr>>>()
                .ok_or("a path without its values")?;
            match index {
                Some(i) if i <= siblings.len() && (siblings.len() + 1).is_power_of_two() => {
                    Ok((siblings, i))
                }
                _ => Err("a path level of no arity".to_string()),
            }
        })
        .collect()
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

impl Column {
    fn new<Tree: 'static + MerkleTreeTrait>(
        proof: &stacked::ColumnProof<TreeProof<Tree>>,
    ) -> Result<Self, String> {
        let f: ColumnProofFields<TreeProof<Tree>, TreeDomain<Tree>> = fields(proof, "column")?;
        if f.column.rows.len() != 2 && f.column.rows.len() != 11 {
            return Err(format!("a column of {} layers", f.column.rows.len()));
        }
        Ok(Column {
            rows: f.column.rows.into_iter().map(Into::into).collect(),
            path: path_of(f.inclusion_proof.as_options())?,
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
            _tree: std::marker::PhantomData,
        })
    }
}

impl Challenge {
    fn new<Tree: 'static + MerkleTreeTrait>(
        p: &stacked::Proof<Tree, DefaultPieceHasher>,
    ) -> Result<Self, String> {
        let labeling = p.labeling_proofs.first().ok_or("no labeling proof")?;
        let node = fields::<LabelingFields>(labeling, "labeling proof")?.node;
        let comm_d_path = path_of(p.comm_d_proofs.as_options())?;
        if comm_d_path.iter().any(|(siblings, _)| siblings.len() != 1) {
            return Err("tree D's path is not a binary path".into());
        }
        let columns = |proofs: &[stacked::ColumnProof<TreeProof<Tree>>]| {
            proofs
                .iter()
                .map(Column::new::<Tree>)
                .collect::<Result<Vec<_>, _>>()
        };
        let rcp = &p.replica_column_proofs;
        let drg_parents = columns(&rcp.drg_parents)?;
        let exp_parents = columns(&rcp.exp_parents)?;
        let c_x = Column::new::<Tree>(&rcp.c_x)?;
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
            comm_r_last_path: path_of(p.comm_r_last_proof.as_options())?,
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

impl Challenge {
    fn synthesize<CS>(self, cs: &mut CS, at: &Commitments<'_>) -> Result<(), SynthesisError>
    where
        CS: ConstraintSystem<Fr>,
        CS::Root: Gadgets,
    {
        let data_leaf = alloc(cs.namespace(|| "data_leaf"), self.data_leaf)?;
        inclusion(
            &mut cs.namespace(|| "comm_d_inclusion"),
            Hash::Sha256,
            &self.comm_d_path,
            at.comm_d,
            &data_leaf,
        )?;
        let drg = open_columns(cs, "drg", &self.drg_parents, at.comm_c)?;
        let exp = open_columns(cs, "exp", &self.exp_parents, at.comm_c)?;
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
        inclusion(
            &mut cs.namespace(|| "comm_r_last_data_inclusion"),
            Hash::Poseidon,
            &self.comm_r_last_path,
            at.comm_r_last,
            &encoded,
        )?;
        let column_hash = cs.get_root().poseidon(&labels)?;
        inclusion(
            &mut cs.namespace(|| "c_x_inclusion"),
            Hash::Poseidon,
            &self.comm_c_path,
            at.comm_c,
            &column_hash,
        )
    }
}

/// Allocates each parent's column, hashes it and checks the hash's inclusion in tree C.
fn open_columns<CS>(
    cs: &mut CS,
    kind: &str,
    columns: &[Column],
    comm_c: &AllocatedNum<Fr>,
) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    CS::Root: Gadgets,
{
    let mut out = Vec::with_capacity(columns.len());
    for (i, col) in columns.iter().enumerate() {
        let mut cs = cs.namespace(|| format!("{kind}_parent_{i}"));
        let rows = col
            .rows
            .iter()
            .map(|&r| alloc(cs.namespace(|| "row"), r))
            .collect::<Result<Vec<_>, _>>()?;
        let hash = cs.get_root().poseidon(&rows)?;
        inclusion(&mut cs, Hash::Poseidon, &col.path, comm_c, &hash)?;
        out.push(rows);
    }
    Ok(out)
}

/// A tree's node hash.
#[derive(Clone, Copy)]
enum Hash {
    /// Tree D: SHA-256 of the two children's bytes, packed.
    Sha256,
    /// Trees C and R: Poseidon of the children.
    Poseidon,
}

/// `leaf`'s inclusion under `root`, its path private, as storage-proofs' `PoRCircuit` checks
/// it: at each level the position's bits and the siblings are allocated, the node is put in
/// its place among them (`insert`) and they are hashed; then the path's bits are packed
/// into public inputs and the root compared.
fn inclusion<CS>(
    cs: &mut CS,
    hash: Hash,
    path: &Path,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    CS::Root: Gadgets,
{
    let mut cur = leaf.clone();
    let mut path_bits = Vec::new();
    for (level, (siblings, index)) in path.iter().enumerate() {
        let mut cs = cs.namespace(|| format!("level {level}"));
        let arity = siblings.len() + 1;
        let mut bits = Vec::with_capacity(arity.trailing_zeros() as usize);
        for b in 0..arity.trailing_zeros() {
            let bit = AllocatedBit::alloc(cs.namespace(|| "index"), Some((index >> b) & 1 == 1))?;
            bits.push(Boolean::from(bit));
        }
        path_bits.extend_from_slice(&bits);
        let siblings = siblings
            .iter()
            .map(|&v| alloc(cs.namespace(|| "sibling"), v))
            .collect::<Result<Vec<_>, _>>()?;
        let children = insert(&mut cs, &cur, &bits, &siblings)?;
        cur = match hash {
            Hash::Poseidon => cs.get_root().poseidon(&children)?,
            Hash::Sha256 => {
                let mut bytes = Vec::with_capacity(256 * children.len());
                for (j, node) in children.iter().enumerate() {
                    let le = node.to_bits_le(cs.namespace(|| format!("{j}_bits")))?;
                    bytes.extend(reverse_bit_numbering(le));
                }
                cs.get_root().sha256_packed(&bytes)?
            }
        };
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &path_bits)?;
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
