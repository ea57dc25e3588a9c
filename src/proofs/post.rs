//! WinningPoSt and WindowPoSt: from the sectors' vanilla proofs to a verified SNARK.

use filecoin_hashers::Hasher;
use filecoin_proofs::{
    as_safe_commitment, parameters::window_post_setup_params,
    parameters::winning_post_setup_params, partition_vanilla_proofs,
    single_partition_vanilla_proofs, FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig,
    PoStType,
};
use filecoin_proofs_api::RegisteredPoStProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, ChallengeRequirements, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound,
    PublicSector,
};

use super::binary;
pub use super::inputs::{WindowPostInput, WinningPostInput};
use super::porep::prover_id;
use super::shapes::with_shape;
use super::verdict::{proof_bytes, vanilla_verdict};
use crate::pipeline::partitions::{prove_split_partitions, Proved};
use crate::pipeline::{JobControl, ProofOutput, ProveError, ProvingService};
use crate::srs::{ParamsId, ProofKind};

fn parse<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, ProveError> {
    serde_json::from_slice(bytes).map_err(|e| ProveError::InvalidInput(format!("{what}: {e}")))
}

fn decode_vanilla<Tree: 'static + MerkleTreeTrait>(
    proofs: &[Vec<u8>],
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, ProveError> {
    if proofs.is_empty() {
        return Err(ProveError::InvalidInput("no vanilla proofs".into()));
    }
    proofs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            bincode::deserialize(b).map_err(|e| {
                ProveError::InvalidInput(format!("vanilla proof {i} does not decode: {e}"))
            })
        })
        .collect()
}

/// A WinningPoSt input, parsed, of a WinningPoSt proof type.
fn winning_input(bytes: &[u8]) -> Result<WinningPostInput, ProveError> {
    let input: WinningPostInput = if binary::is_binary(bytes) {
        binary::winning(bytes)?
    } else {
        parse("WinningPoSt input", bytes)?
    };
    if input.registered_proof.typ() != PoStType::Winning {
        return Err(ProveError::InvalidInput(format!(
            "{:?} is not a WinningPoSt proof",
            input.registered_proof
        )));
    }
    Ok(input)
}

/// The WinningPoSt input's vanilla proofs, decoded, as many as the proof type challenges.
fn winning_vanilla<Tree: 'static + MerkleTreeTrait>(
    input: &WinningPostInput,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, ProveError> {
    let config = input.registered_proof.as_v1_config();
    let vanilla = decode_vanilla::<Tree>(&input.vanilla_proofs)?;
    if vanilla.len() != config.sector_count {
        return Err(ProveError::InvalidInput(format!(
            "{} vanilla proofs, WinningPoSt needs {}",
            vanilla.len(),
            config.sector_count
        )));
    }
    Ok(vanilla)
}

/// A WindowPoSt input, parsed, of a WindowPoSt proof type.
fn window_input(bytes: &[u8]) -> Result<WindowPostInput, ProveError> {
    let input: WindowPostInput = if binary::is_binary(bytes) {
        binary::window(bytes)?
    } else {
        parse("WindowPoSt input", bytes)?
    };
    if input.registered_proof.typ() != PoStType::Window {
        return Err(ProveError::InvalidInput(format!(
            "{:?} is not a WindowPoSt proof",
            input.registered_proof
        )));
    }
    Ok(input)
}

/// The WindowPoSt input's vanilla proofs, decoded and sorted by sector id: for one
/// partition at most as many as a partition holds; for a whole deadline one per sector
/// (a sector twice is refused: the verifier keys sectors by id).
fn window_vanilla<Tree: 'static + MerkleTreeTrait>(
    input: &WindowPostInput,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, ProveError> {
    let config = input.registered_proof.as_v1_config();
    let mut vanilla = decode_vanilla::<Tree>(&input.vanilla_proofs)?;
    vanilla.sort_by_key(|p| p.sector_id);
    match input.partition_index {
        Some(_) if vanilla.len() > config.sector_count => Err(ProveError::InvalidInput(format!(
            "{} vanilla proofs, a WindowPoSt partition holds at most {}",
            vanilla.len(),
            config.sector_count
        ))),
        None => match vanilla
            .windows(2)
            .find(|w| w[0].sector_id == w[1].sector_id)
        {
            Some(w) => Err(ProveError::InvalidInput(format!(
                "two vanilla proofs of sector {}: a deadline proves each sector once",
                w[0].sector_id
            ))),
            None => Ok(vanilla),
        },
        Some(_) => Ok(vanilla),
    }
}

/// The sectors a PoSt input's vanilla proofs are of, each with its replica commitment, in
/// sector order and each once: the public replica information a verifier takes from the
/// chain. For benchmarks that verify filecoin-proofs' own proof of the same input with its
/// `verify_winning_post` / `verify_window_post`.
pub fn public_replicas(
    proof: RegisteredPoStProof,
    vanilla: &[Vec<u8>],
) -> Result<Vec<(u64, [u8; 32])>, ProveError> {
    with_shape!(
        u64::from(proof.sector_size()),
        public_replicas_shape,
        vanilla
    )
}

fn public_replicas_shape<Tree: 'static + MerkleTreeTrait>(
    vanilla: &[Vec<u8>],
) -> Result<Vec<(u64, [u8; 32])>, ProveError> {
    use filecoin_hashers::Domain;
    let mut out: Vec<(u64, [u8; 32])> = decode_vanilla::<Tree>(vanilla)?
        .iter()
        .map(|p| {
            let comm_r: [u8; 32] = p.comm_r.into_bytes().try_into().map_err(|_| {
                ProveError::InvalidInput("a replica commitment is not 32 bytes".into())
            })?;
            Ok((u64::from(p.sector_id), comm_r))
        })
        .collect::<Result<_, ProveError>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// The partitions a whole deadline of `sectors` sectors has, `sector_count` sectors each
/// (filecoin-proofs' `get_partitions_for_window_post`, which says `None` for one).
pub fn deadline_partitions(sectors: usize, sector_count: usize) -> usize {
    sectors.div_ceil(sector_count.max(1)).max(1)
}

/// Checks a WinningPoSt input the way [`prove_winning`] starts: it parses, names a supported
/// WinningPoSt proof, and its vanilla proofs decode, as many as needed. Nothing is proved.
pub fn check_winning(bytes: &[u8]) -> Result<(), ProveError> {
    let input = winning_input(bytes)?;
    let size = u64::from(input.registered_proof.sector_size());
    with_shape!(size, check_winning_shape, &input)
}

fn check_winning_shape<Tree: 'static + MerkleTreeTrait>(
    input: &WinningPostInput,
) -> Result<(), ProveError> {
    winning_vanilla::<Tree>(input).map(drop)
}

/// Checks a WindowPoSt input the way [`prove_window`] starts: it parses, names a supported
/// WindowPoSt proof, and its vanilla proofs decode: for one partition no more than a
/// partition holds, for a whole deadline each sector once.
pub fn check_window(bytes: &[u8]) -> Result<(), ProveError> {
    let input = window_input(bytes)?;
    let size = u64::from(input.registered_proof.sector_size());
    with_shape!(size, check_window_shape, &input)
}

fn check_window_shape<Tree: 'static + MerkleTreeTrait>(
    input: &WindowPostInput,
) -> Result<(), ProveError> {
    window_vanilla::<Tree>(input).map(drop)
}

/// Whether a WinningPoSt input's vanilla proofs verify, as storage-proofs-post's own
/// verifier says over the partitions the prover makes of them (the sanity check
/// storage-proofs' `prove_with_vanilla` runs before proving); see `porep::check_vanilla`.
pub(crate) fn check_vanilla_winning(bytes: &[u8]) -> Result<(), ProveError> {
    let input = winning_input(bytes)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        check_vanilla_winning_shape,
        &input
    )
}

fn check_vanilla_winning_shape<Tree: 'static + MerkleTreeTrait>(
    input: &WinningPostInput,
) -> Result<(), ProveError> {
    let vanilla = winning_vanilla::<Tree>(input)?;
    let config = input.registered_proof.as_v1_config();
    check_partitions::<Tree>(
        &config,
        &vanilla,
        &input.randomness,
        input.miner_id,
        None,
        None,
    )
}

/// [`check_vanilla_winning`] for a WindowPoSt partition or a whole deadline.
pub(crate) fn check_vanilla_window(bytes: &[u8]) -> Result<(), ProveError> {
    let input = window_input(bytes)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        check_vanilla_window_shape,
        &input
    )
}

fn check_vanilla_window_shape<Tree: 'static + MerkleTreeTrait>(
    input: &WindowPostInput,
) -> Result<(), ProveError> {
    let config = input.registered_proof.as_v1_config();
    let vanilla = window_vanilla::<Tree>(input)?;
    // As the prove paths: one partition with its index in the public inputs, or the
    // deadline's partitions.
    let partitions = match input.partition_index {
        Some(_) => None,
        None => Some(deadline_partitions(vanilla.len(), config.sector_count)).filter(|&p| p > 1),
    };
    check_partitions::<Tree>(
        &config,
        &vanilla,
        &input.randomness,
        input.miner_id,
        input.partition_index,
        partitions,
    )
}

/// The vanilla proofs cut into the prover's partitions and checked by
/// `FallbackPoSt::verify_all_partitions`: partition `k` alone, as
/// `single_partition_vanilla_proofs` makes it, or all of them, as `partition_vanilla_proofs`
/// makes them (it verifies them itself).
fn check_partitions<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    vanilla: &[FallbackPoStSectorProof<Tree>],
    randomness: &[u8; 32],
    miner_id: u64,
    k: Option<usize>,
    partitions: Option<usize>,
) -> Result<(), ProveError> {
    let invalid =
        |e: anyhow::Error| ProveError::InvalidInput(format!("PoSt input: vanilla proofs: {e}"));
    let pp = setup::<Tree>(setup_params(config)?, partitions)?;
    let pub_inputs = public_inputs::<Tree>(randomness, miner_id, sectors_of(vanilla), k)?;
    let vp = &pp.vanilla_params;
    if k.is_none() {
        let count = pp.partitions.unwrap_or(1);
        return partition_vanilla_proofs(config, vp, &pub_inputs, count, vanilla)
            .map(drop)
            .map_err(invalid);
    }
    let single =
        single_partition_vanilla_proofs(config, vp, &pub_inputs, vanilla).map_err(invalid)?;
    vanilla_verdict(
        FallbackPoSt::<Tree>::verify_all_partitions(vp, &pub_inputs, &[single]),
        "PoSt input",
        "its vanilla proofs do not verify against its randomness and sectors (made for other \
         randomness, or corrupt)",
    )
}

type Compound<Tree> = FallbackPoStCompound<Tree>;
type PublicInputs<Tree> =
    fallback::PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain>;

fn setup<Tree: 'static + MerkleTreeTrait>(
    vanilla_params: fallback::SetupParams,
    partitions: Option<usize>,
) -> Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>, ProveError> {
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority: false,
    };
    <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::setup(
        &setup,
    )
    .map_err(|e| ProveError::InvalidInput(format!("PoSt setup: {e}")))
}

fn setup_params(config: &PoStConfig) -> Result<fallback::SetupParams, ProveError> {
    match config.typ {
        PoStType::Winning => {
            winning_post_setup_params(config).map_err(|e| ProveError::InvalidInput(e.to_string()))
        }
        PoStType::Window => Ok(window_post_setup_params(config)),
    }
}

fn kind_of(proof: RegisteredPoStProof) -> ProofKind {
    match proof.typ() {
        PoStType::Winning => ProofKind::WinningPoSt,
        PoStType::Window => ProofKind::WindowPoSt,
    }
}

/// The parameter set of a registered PoSt proof.
pub fn params_id(proof: RegisteredPoStProof) -> Result<ParamsId, ProveError> {
    with_shape!(u64::from(proof.sector_size()), params_id_shape, proof)
}

fn params_id_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<ParamsId, ProveError> {
    let pp = setup::<Tree>(setup_params(&proof.as_v1_config())?, None)?;
    let cache_id =
        <Compound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::cache_identifier(
            &pp.vanilla_params,
        );
    Ok(ParamsId {
        kind: kind_of(proof),
        sector_size: u64::from(proof.sector_size()),
        cache_id,
    })
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn generate_params(
    proof: RegisteredPoStProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    with_shape!(u64::from(proof.sector_size()), generate_params_shape, proof)
}

/// The blank circuit (no assignment) of a registered PoSt proof, as parameter generators take
/// it.
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn blank_circuit<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<FallbackPoStCircuit<Tree>, ProveError> {
    let pp = setup::<Tree>(setup_params(&proof.as_v1_config())?, None)?;
    Ok(<Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp.vanilla_params))
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn generate_params_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    let blank = blank_circuit::<Tree>(proof)?;
    bellperson::groth16::generate_random_parameters(blank, &mut rand_core::OsRng)
        .map_err(|e| ProveError::Synthesis(format!("parameter generation: {e}")))
}

/// The recorded shape of the blank circuit of a registered PoSt proof, for cuzk's own setup.
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn blank_shape(proof: RegisteredPoStProof) -> Result<crate::synth::R1cs, ProveError> {
    with_shape!(u64::from(proof.sector_size()), blank_shape_of, proof)
}

#[cfg(feature = "scaffolding")] // only params_gen generates parameters
fn blank_shape_of<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<crate::synth::R1cs, ProveError> {
    let blank = blank_circuit::<Tree>(proof)?;
    crate::synth::record_blank_shape(blank)
        .map_err(|e| ProveError::Synthesis(format!("recording the blank circuit: {e}")))
}

/// Parameters from bellperson's generator with given secrets, `[α, β, γ, δ, τ]` in the order
/// its `generate_parameters` takes them (to compare cuzk's setup with).
#[cfg(all(test, feature = "scaffolding"))]
pub(crate) fn generate_params_with(
    proof: RegisteredPoStProof,
    secrets: [blstrs::Scalar; 5],
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    with_shape!(
        u64::from(proof.sector_size()),
        generate_params_with_shape,
        proof,
        secrets
    )
}

#[cfg(all(test, feature = "scaffolding"))]
fn generate_params_with_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
    [alpha, beta, gamma, delta, tau]: [blstrs::Scalar; 5],
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    use group::Group;
    let blank = blank_circuit::<Tree>(proof)?;
    bellperson::groth16::generate_parameters(
        blank,
        blstrs::G1Projective::generator(),
        blstrs::G2Projective::generator(),
        alpha,
        beta,
        gamma,
        delta,
        tau,
    )
    .map_err(|e| ProveError::Synthesis(format!("parameter generation: {e}")))
}

fn public_inputs<Tree: 'static + MerkleTreeTrait>(
    randomness: &[u8; 32],
    miner_id: u64,
    sectors: Vec<PublicSector<<Tree::Hasher as Hasher>::Domain>>,
    k: Option<usize>,
) -> Result<PublicInputs<Tree>, ProveError> {
    let invalid = |e: anyhow::Error| ProveError::InvalidInput(e.to_string());
    Ok(fallback::PublicInputs {
        randomness: as_safe_commitment(randomness, "randomness").map_err(invalid)?,
        prover_id: as_safe_commitment(&prover_id(miner_id), "prover_id").map_err(invalid)?,
        sectors,
        k,
    })
}

fn sectors_of<Tree: 'static + MerkleTreeTrait>(
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> Vec<PublicSector<<Tree::Hasher as Hasher>::Domain>> {
    vanilla
        .iter()
        .map(|p| PublicSector {
            id: p.sector_id,
            comm_r: p.comm_r,
        })
        .collect()
}

/// Checks the proofs with storage-proofs' own compound verifier.
fn verify_compound<Tree: 'static + MerkleTreeTrait>(
    proved: &Proved,
    pp: &compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>,
    pub_inputs: &PublicInputs<Tree>,
    minimum_challenge_count: usize,
) -> Result<std::time::Duration, ProveError> {
    let start = std::time::Instant::now();
    let multi = MultiProof::new(proved.proofs.clone(), &proved.srs.pvk);
    let ok = <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::verify(
        pp,
        pub_inputs,
        &multi,
        &ChallengeRequirements { minimum_challenge_count },
    )
    .map_err(|e| ProveError::VerificationFailed(e.to_string()))?;
    if !ok {
        return Err(ProveError::VerificationFailed(
            "the PoSt verifier rejected the proof (vanilla proofs of other sectors or randomness?)"
                .into(),
        ));
    }
    Ok(start.elapsed())
}

fn output(
    kind: ProofKind,
    svc: &ProvingService,
    proved: Proved,
    verification: std::time::Duration,
) -> ProofOutput {
    let backend = svc.proved_by(&proved.on);
    let mut timings = proved.timings;
    timings.verification = verification;
    ProofOutput {
        kind,
        proof: proof_bytes(&proved.proofs),
        partitions: proved.proofs.len(),
        timings,
        backend,
    }
}

/// Cuts the vanilla proofs into `pp`'s partitions (`partition_vanilla_proofs`, as
/// filecoin-proofs does) and proves them all through the stages.
fn prove_all_partitions<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    proof: RegisteredPoStProof,
    config: &PoStConfig,
    pp: &compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>,
    pub_inputs: &PublicInputs<Tree>,
    vanilla: &[FallbackPoStSectorProof<Tree>],
    control: &JobControl,
) -> Result<Proved, ProveError> {
    let partitioned = partition_vanilla_proofs(
        config,
        &pp.vanilla_params,
        pub_inputs,
        pp.partitions.unwrap_or(1),
        vanilla,
    )
    .map_err(|e| ProveError::InvalidInput(format!("vanilla proofs: {e}")))?;
    let id = params_id_shape::<Tree>(proof)?;
    let make = |k: usize| {
        <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::circuit(
            pub_inputs,
            Default::default(),
            &partitioned[k],
            &pp.vanilla_params,
            Some(k),
        )
        .map_err(|e| ProveError::InvalidInput(format!("partition {k}: {e}")))
    };
    let runs = |k, most| make(k).map(|c| runs::runs(c, most));
    prove_split_partitions(svc, &id, partitioned.len(), runs, control)
}

/// Proves a WinningPoSt request (JSON of [`WinningPostInput`]).
pub(crate) fn prove_winning(
    svc: &ProvingService,
    input: &[u8],
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let input = winning_input(input)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        prove_winning_shape,
        svc,
        input,
        control
    )
}

fn prove_winning_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    input: WinningPostInput,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let config = input.registered_proof.as_v1_config();
    let vanilla = winning_vanilla::<Tree>(&input)?;
    let vanilla_params = setup_params(&config)?;
    let param_sector_count = vanilla_params.sector_count;
    let pp = setup::<Tree>(vanilla_params, None)?;
    let pub_inputs = public_inputs::<Tree>(
        &input.randomness,
        input.miner_id,
        sectors_of(&vanilla),
        None,
    )?;
    let proved = prove_all_partitions::<Tree>(
        svc,
        input.registered_proof,
        &config,
        &pp,
        &pub_inputs,
        &vanilla,
        control,
    )?;
    // The verifier repeats the sector list once per challenged sector slot
    // (verify_winning_post); so do we.
    let sectors = sectors_of(&vanilla);
    let repeated = (0..param_sector_count)
        .flat_map(|_| sectors.iter().cloned())
        .collect();
    let verify_inputs = public_inputs::<Tree>(&input.randomness, input.miner_id, repeated, None)?;
    let v = verify_compound::<Tree>(
        &proved,
        &pp,
        &verify_inputs,
        config.challenge_count * config.sector_count,
    )?;
    Ok(output(ProofKind::WinningPoSt, svc, proved, v))
}

/// Proves a WindowPoSt partition, or a whole deadline (JSON of [`WindowPostInput`]).
pub(crate) fn prove_window(
    svc: &ProvingService,
    input: &[u8],
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let input = window_input(input)?;
    with_shape!(
        u64::from(input.registered_proof.sector_size()),
        prove_window_shape,
        svc,
        input,
        control
    )
}

fn prove_window_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    input: WindowPostInput,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let Some(partition_index) = input.partition_index else {
        return prove_deadline_shape::<Tree>(svc, input, control);
    };
    let config = input.registered_proof.as_v1_config();
    let vanilla = window_vanilla::<Tree>(&input)?;
    let pp = setup::<Tree>(setup_params(&config)?, None)?;
    let pub_inputs = public_inputs::<Tree>(
        &input.randomness,
        input.miner_id,
        sectors_of(&vanilla),
        Some(partition_index),
    )?;
    let partition =
        single_partition_vanilla_proofs(&config, &pp.vanilla_params, &pub_inputs, &vanilla)
            .map_err(|e| ProveError::InvalidInput(format!("vanilla proofs: {e}")))?;
    let id = params_id_shape::<Tree>(input.registered_proof)?;
    // As filecoin-proofs' generate_single_window_post_with_vanilla: the partition's sectors
    // are the whole public sector list, so the circuit takes chunk 0 of it.
    let make = |_k: usize, most: usize| {
        <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::circuit(
            &pub_inputs,
            Default::default(),
            &partition,
            &pp.vanilla_params,
            Some(0),
        )
        .map(|c| runs::runs(c, most))
        .map_err(|e| ProveError::InvalidInput(format!("partition: {e}")))
    };
    let proved = prove_split_partitions(svc, &id, 1, make, control)?;
    let v = verify_compound::<Tree>(&proved, &pp, &pub_inputs, config.challenge_count)?;
    Ok(output(ProofKind::WindowPoSt, svc, proved, v))
}

/// A whole deadline, as filecoin-proofs' `generate_window_post_with_vanilla`: the sectors
/// (sorted by id) cut into partitions of `sector_count` (the last one padded by
/// `partition_vanilla_proofs`), every partition proved through the shared stages at once,
/// and the proof verified as `verify_window_post` does, as one.
fn prove_deadline_shape<Tree: 'static + MerkleTreeTrait>(
    svc: &ProvingService,
    input: WindowPostInput,
    control: &JobControl,
) -> Result<ProofOutput, ProveError> {
    let config = input.registered_proof.as_v1_config();
    let vanilla = window_vanilla::<Tree>(&input)?;
    let partitions = deadline_partitions(vanilla.len(), config.sector_count);
    let pp = setup::<Tree>(
        setup_params(&config)?,
        (partitions > 1).then_some(partitions),
    )?;
    let pub_inputs = public_inputs::<Tree>(
        &input.randomness,
        input.miner_id,
        sectors_of(&vanilla),
        None,
    )?;
    let proved = prove_all_partitions::<Tree>(
        svc,
        input.registered_proof,
        &config,
        &pp,
        &pub_inputs,
        &vanilla,
        control,
    )?;
    let v = verify_compound::<Tree>(
        &proved,
        &pp,
        &pub_inputs,
        config.challenge_count * config.sector_count,
    )?;
    Ok(output(ProofKind::WindowPoSt, svc, proved, v))
}

mod runs;
#[cfg(feature = "scaffolding")] // benchmarks only; cuzkd is built without it
pub mod synthetic;

/// Vanilla proofs of `sectors` sectors for `proof` (filecoin-proofs-api's
/// `generate_single_vanilla_proof` bytes: bincode of `FallbackPoStSectorProof`) with every
/// challenge and Merkle path of the real shape and random values: they decode like real
/// ones and fail verification. For tests of inputs of real size (a 32 GiB WindowPoSt
/// partition's 2,349 are about 58 MB).
#[cfg(feature = "scaffolding")]
pub fn synthetic_vanilla(
    proof: RegisteredPoStProof,
    sectors: usize,
    seed: u64,
) -> Result<Vec<Vec<u8>>, ProveError> {
    let size = u64::from(proof.sector_size());
    with_shape!(size, synthetic_vanilla_shape, proof, sectors, seed)
}

#[cfg(feature = "scaffolding")]
fn synthetic_vanilla_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
    sectors: usize,
    seed: u64,
) -> Result<Vec<Vec<u8>>, ProveError> {
    use filecoin_hashers::Domain;
    use rand::{Rng, SeedableRng};
    let challenges = proof.as_v1_config().challenge_count;
    let nodes = usize::try_from(u64::from(proof.sector_size()) / 32)
        .map_err(|_| ProveError::InvalidInput("sector too large".into()))?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..sectors)
        .map(|i| {
            let leaves: Vec<usize> = (0..challenges).map(|_| rng.gen_range(0..nodes)).collect();
            let sector = FallbackPoStSectorProof::<Tree> {
                sector_id: (i as u64).into(),
                comm_r: Domain::random(&mut rng),
                vanilla_proof: fallback::Proof {
                    sectors: vec![synthetic::sector_proof::<Tree>(&mut rng, nodes, &leaves)],
                },
            };
            bincode::serialize(&sector)
                .map_err(|e| ProveError::InvalidInput(format!("synthetic vanilla proof: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_has_a_partition_per_sector_count_started() {
        assert_eq!(deadline_partitions(1, 2), 1);
        assert_eq!(deadline_partitions(2, 2), 1);
        assert_eq!(deadline_partitions(3, 2), 2);
        assert_eq!(deadline_partitions(4, 2), 2);
        assert_eq!(deadline_partitions(2349, 2349), 1);
        assert_eq!(deadline_partitions(2350, 2349), 2);
        assert_eq!(
            deadline_partitions(0, 2),
            1,
            "no sectors: refused earlier, never 0"
        );
    }

    #[test]
    fn partition_index_is_optional_and_round_trips() {
        let one = r#"{"registered_proof":"StackedDrgWindow2KiBV1_2","randomness":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","miner_id":1000,"partition_index":3,"vanilla_proofs":[]}"#;
        let input: WindowPostInput = serde_json::from_str(one).unwrap();
        assert_eq!(input.partition_index, Some(3));
        assert_eq!(serde_json::to_string(&input).unwrap(), one);
        let whole = one.replace(r#""partition_index":3,"#, "");
        let input: WindowPostInput = serde_json::from_str(&whole).unwrap();
        assert_eq!(input.partition_index, None);
        assert_eq!(serde_json::to_string(&input).unwrap(), whole);
        let null = one.replace("3", "null");
        let input: WindowPostInput = serde_json::from_str(&null).unwrap();
        assert_eq!(input.partition_index, None);
    }
}
