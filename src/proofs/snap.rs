//! SnapDeals: the empty-sector-update proof from its partition vanilla proofs.

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    DefaultPieceHasher, MerkleTreeTrait, PoRepConfig, SectorUpdateConfig, TreeRHasher,
};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams, SetupParams,
};

pub use super::inputs::SnapInput;
use super::shapes::with_shape;
use super::verdict::{proof_bytes, vanilla_verdict};
use crate::pipeline::partitions::prove_partitions;
use crate::pipeline::{JobControl, ProofOutput, ProveError, ProvingService};
use crate::srs::{ParamsId, ProofKind};

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;

fn porep_config(proof: RegisteredUpdateProof) -> PoRepConfig {
    proof.as_v1_config()
}

fn compound_params<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    config: &SectorUpdateConfig,
) -> Result<compound_proof::PublicParams<'static, EmptySectorUpdate<Tree>>, ProveError> {
    let setup = compound_proof::SetupParams {
        vanilla_params: SetupParams {
            sector_bytes: u64::from(config.sector_size),
        },
        partitions: Some(usize::from(config.update_partitions)),
        priority: false,
    };
    <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::setup(&setup)
        .map_err(|e| ProveError::InvalidInput(format!("update setup: {e}")))
}

/// The parameter set of a registered update proof.
pub fn params_id(proof: RegisteredUpdateProof) -> Result<ParamsId, ProveError> {
    with_shape!(u64::from(proof.sector_size()), params_id_shape, proof)
}

fn params_id_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
) -> Result<ParamsId, ProveError> {
    let size = u64::from(proof.sector_size());
    let pp = PublicParams::from_sector_size(size);
    let cache_id =
        <Compound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(&pp);
    Ok(ParamsId {
        kind: ProofKind::SnapDeals,
        sector_size: size,
        cache_id,
    })
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn generate_params(
    proof: RegisteredUpdateProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    with_shape!(u64::from(proof.sector_size()), generate_params_shape, proof)
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn generate_params_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    let pp = PublicParams::from_sector_size(u64::from(proof.sector_size()));
    let blank = <Compound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::blank_circuit(&pp);
    bellperson::groth16::generate_random_parameters(blank, &mut rand_core::OsRng)
        .map_err(|e| ProveError::Synthesis(format!("parameter generation: {e}")))
}

/// The recorded shape of the blank circuit of a registered update proof, for cuzk's own
/// setup.
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn blank_shape(proof: RegisteredUpdateProof) -> Result<crate::synth::R1cs, ProveError> {
    with_shape!(u64::from(proof.sector_size()), blank_shape_of, proof)
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn blank_shape_of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
) -> Result<crate::synth::R1cs, ProveError> {
    let pp = PublicParams::from_sector_size(u64::from(proof.sector_size()));
    let blank = <Compound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::blank_circuit(&pp);
    crate::synth::record_blank_shape(blank)
        .map_err(|e| ProveError::Synthesis(format!("recording the blank circuit: {e}")))
}

/// Proves a SnapDeals request (JSON of [`SnapInput`]).
pub(crate) fn prove(
    svc: &ProvingService,
    input: &[u8],
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let input = parse_input(input)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        prove_shape,
        svc,
        input,
        control
    )
}

/// A SnapDeals input, parsed, of a supported proof version.
fn parse_input(bytes: &[u8]) -> Result<SnapInput, ProveError> {
    let input: SnapInput = if super::binary::is_binary(bytes) {
        super::binary::snap(bytes)?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ProveError::InvalidInput(format!("SnapDeals input: {e}")))?
    };
    if input.registered_proof.major_version() != 1 {
        return Err(ProveError::InvalidInput(format!(
            "unsupported proof {:?}",
            input.registered_proof
        )));
    }
    Ok(input)
}

/// The input's partition vanilla proofs, decoded (as many as the proof type has
/// partitions), and its public inputs.
fn decode<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    input: &SnapInput,
) -> Result<(Vec<PartitionProof<Tree>>, PublicInputs), ProveError> {
    let invalid = |e: anyhow::Error| ProveError::InvalidInput(format!("SnapDeals input: {e}"));
    let config = SectorUpdateConfig::from_porep_config(&porep_config(input.registered_proof));
    let partitions = usize::from(config.update_partitions);
    let vanilla: Vec<PartitionProof<Tree>> = input
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            bincode::deserialize(b).map_err(|e| {
                ProveError::InvalidInput(format!(
                    "partition vanilla proof {i} does not decode: {e}"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    if vanilla.len() != partitions {
        return Err(ProveError::InvalidInput(format!(
            "{} partition vanilla proofs, {:?} needs {partitions}",
            vanilla.len(),
            input.registered_proof
        )));
    }
    let public_inputs = PublicInputs {
        k: partitions,
        comm_r_old: <TreeRHasher as Hasher>::Domain::try_from_bytes(&input.comm_r_old)
            .map_err(invalid)?,
        comm_d_new: <DefaultPieceHasher as Hasher>::Domain::try_from_bytes(&input.comm_d_new)
            .map_err(invalid)?,
        comm_r_new: <TreeRHasher as Hasher>::Domain::try_from_bytes(&input.comm_r_new)
            .map_err(invalid)?,
        h: config.h,
    };
    Ok((vanilla, public_inputs))
}

/// Checks a SnapDeals input the way [`prove`] starts: it parses, names a supported proof,
/// and its partition vanilla proofs and commitments decode. Nothing is proved.
pub fn check(bytes: &[u8]) -> Result<(), ProveError> {
    let input = parse_input(bytes)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        check_shape,
        &input
    )
}

fn check_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    input: &SnapInput,
) -> Result<(), ProveError> {
    decode::<Tree>(input).map(drop)
}

/// Whether the input's partition vanilla proofs verify against its commitments, as
/// storage-proofs-update's own verifier says (see `porep::check_vanilla`: after a proof
/// failed verification, bad input is told from a wrong device result this way).
pub(crate) fn check_vanilla(bytes: &[u8]) -> Result<(), ProveError> {
    let input = parse_input(bytes)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        check_vanilla_shape,
        &input
    )
}

fn check_vanilla_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    input: &SnapInput,
) -> Result<(), ProveError> {
    let config = SectorUpdateConfig::from_porep_config(&porep_config(input.registered_proof));
    let (vanilla, public_inputs) = decode::<Tree>(input)?;
    let pp = compound_params::<Tree>(&config)?;
    vanilla_verdict(
        EmptySectorUpdate::<Tree>::verify_all_partitions(
            &pp.vanilla_params,
            &public_inputs,
            &vanilla,
        ),
        "SnapDeals input",
        "its partition vanilla proofs do not verify against its commitments (another \
         sector's or update's, or corrupt)",
    )
}

fn prove_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    svc: &ProvingService,
    input: SnapInput,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let config = SectorUpdateConfig::from_porep_config(&porep_config(input.registered_proof));
    let partitions = usize::from(config.update_partitions);
    let (vanilla, public_inputs) = decode::<Tree>(&input)?;
    let pp = compound_params::<Tree>(&config)?;
    let id = params_id_shape::<Tree>(input.registered_proof)?;
    let make = |k: usize| {
        <Compound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::circuit(
            &public_inputs,
            // The compound proof's component-private inputs are `()` for this circuit.
            (),
            &vanilla[k],
            &pp.vanilla_params,
            Some(k),
        )
        .map_err(|e| ProveError::InvalidInput(format!("partition {k}: {e}")))
    };
    let proved = prove_partitions(svc, &id, partitions, make, control)?;
    let start = std::time::Instant::now();
    let multi = MultiProof::new(proved.proofs.clone(), &proved.srs.pvk);
    let ok = <Compound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::verify(&pp, &public_inputs, &multi, &())
    .map_err(|e| ProveError::VerificationFailed(e.to_string()))?;
    if !ok {
        return Err(ProveError::VerificationFailed(
            "the update verifier rejected the proof (vanilla proofs of another sector or update?)"
                .into(),
        ));
    }
    let mut timings = proved.timings;
    timings.verification = start.elapsed();
    Ok(ProofOutput {
        kind: ProofKind::SnapDeals,
        proof: proof_bytes(&proved.proofs),
        partitions,
        timings,
        backend: svc.proved_by(&proved.on),
    })
}
