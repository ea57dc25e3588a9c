//! Sealing fresh test sectors with filecoin-proofs, and the inputs miners derive from them.
//!
//! The demo, the tests and the benchmarks need real inputs: a sector sealed from random data
//! (PC1, PC2, C1), the vanilla PoSt proofs of that sector, and a SnapDeals update of it. This
//! module produces them with filecoin-proofs-api exactly as a storage miner does, and checks
//! proofs with filecoin-proofs' own verifiers. It is meant for small (2 KiB) sectors.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use filecoin_proofs_api::seal::{self, SealPreCommitPhase2Output};
use filecoin_proofs_api::{
    post, update, ApiFeature, PieceInfo, PrivateReplicaInfo, PublicReplicaInfo,
    RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::RngCore;

use crate::proofs::porep::prover_id;
use crate::proofs::post::{WindowPostInput, WinningPostInput};
use crate::proofs::snap::SnapInput;
use crate::proofs::ProofKind;

/// A sector sealed in a directory of its own.
pub struct SealedSector {
    /// The seal proof type.
    pub registered_proof: RegisteredSealProof,
    /// The miner's actor id.
    pub miner_id: u64,
    /// The sector number.
    pub sector_number: u64,
    /// The PC1 ticket.
    pub ticket: [u8; 32],
    /// The interactive seed.
    pub seed: [u8; 32],
    /// The replica commitment.
    pub comm_r: [u8; 32],
    /// The data commitment.
    pub comm_d: [u8; 32],
    /// The C1 output as filecoin-proofs-api's JSON, as Lotus and Curio store it.
    pub c1_json: Vec<u8>,
    /// The sealed replica.
    pub replica_path: PathBuf,
    /// The sector's cache directory (trees, p_aux).
    pub cache_path: PathBuf,
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    // Keep the value below the field modulus, as chain randomness used as a field element is.
    b[31] &= 0x3f;
    b
}

/// Writes a piece of random data into a new staged file and returns its piece info.
fn stage_random_piece(proof: RegisteredSealProof, staged: &Path) -> Result<PieceInfo> {
    let sector_size = u64::from(proof.sector_size());
    let unpadded = UnpaddedBytesAmount::from(filecoin_proofs_api::PaddedBytesAmount(sector_size));
    let mut data = vec![0u8; u64::from(unpadded) as usize];
    rand::thread_rng().fill_bytes(&mut data);
    let target = File::create(staged).with_context(|| format!("create {}", staged.display()))?;
    let (info, _) = seal::add_piece(proof, &data[..], target, unpadded, &[])?;
    Ok(info)
}

/// Seals a sector of random data under `dir` (PC1, PC2, C1) and returns what C2 and PoSt need.
pub fn seal_sector(
    dir: &Path,
    registered_proof: RegisteredSealProof,
    miner_id: u64,
    sector_number: u64,
) -> Result<SealedSector> {
    std::fs::create_dir_all(dir)?;
    let staged = dir.join("staged");
    let replica_path = dir.join("sealed");
    let cache_path = dir.join("cache");
    std::fs::create_dir_all(&cache_path)?;
    File::create(&replica_path)?;
    let piece = stage_random_piece(registered_proof, &staged)?;
    let pieces = [piece];
    let prover = prover_id(miner_id);
    let sector_id = SectorId::from(sector_number);
    let ticket = random32();
    let seed = random32();
    let pc1 = seal::seal_pre_commit_phase1(
        registered_proof,
        &cache_path,
        &staged,
        &replica_path,
        prover,
        sector_id,
        ticket,
        &pieces,
    )?;
    let pc2: SealPreCommitPhase2Output =
        seal::seal_pre_commit_phase2(pc1, &cache_path, &replica_path)?;
    let synthetic = registered_proof.feature_enabled(ApiFeature::SyntheticPoRep);
    if synthetic {
        seal::generate_synth_proofs(
            &cache_path,
            &replica_path,
            prover,
            sector_id,
            ticket,
            pc2.clone(),
            &pieces,
        )?;
    }
    let c1 = seal::seal_commit_phase1(
        &cache_path,
        &replica_path,
        prover,
        sector_id,
        ticket,
        seed,
        pc2.clone(),
        &pieces,
    )?;
    if synthetic {
        seal::clear_synthetic_proofs(&cache_path)?;
    }
    Ok(SealedSector {
        registered_proof,
        miner_id,
        sector_number,
        ticket,
        seed,
        comm_r: pc2.comm_r,
        comm_d: pc2.comm_d,
        c1_json: serde_json::to_vec(&c1)?,
        replica_path,
        cache_path,
    })
}

impl SealedSector {
    fn prover_id(&self) -> [u8; 32] {
        prover_id(self.miner_id)
    }

    /// lotus-bench's `c1.json` wrapper around this sector's C1 output.
    pub fn lotus_c1_wrapper(&self) -> Vec<u8> {
        use base64::Engine as _;
        serde_json::json!({
            "SectorNum": self.sector_number,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&self.c1_json),
            "SectorSize": u64::from(self.registered_proof.sector_size()),
        })
        .to_string()
        .into_bytes()
    }

    /// filecoin-proofs' `verify_seal` on a C2 proof. For NI-PoRep (whose standard output is
    /// an aggregate) each partition proof is checked against filecoin-proofs'
    /// `get_seal_inputs` with the verifying key instead.
    pub fn verify_porep(&self, proof: &[u8], vk_dir: &Path) -> Result<bool> {
        if self
            .registered_proof
            .feature_enabled(ApiFeature::NonInteractivePoRep)
        {
            return self.verify_ni_partitions(proof, vk_dir);
        }
        seal::verify_seal(
            self.registered_proof,
            self.comm_r,
            self.comm_d,
            self.prover_id(),
            SectorId::from(self.sector_number),
            self.ticket,
            self.seed,
            proof,
        )
    }

    fn verify_ni_partitions(&self, proof: &[u8], vk_dir: &Path) -> Result<bool> {
        let inputs = seal::get_seal_inputs(
            self.registered_proof,
            self.comm_r,
            self.comm_d,
            self.prover_id(),
            SectorId::from(self.sector_number),
            self.ticket,
            self.seed,
        )?;
        let id = crate::proofs::porep::params_id(self.registered_proof)?;
        let vk_bytes = std::fs::read(id.vk_file(vk_dir))?;
        let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12>::read(&vk_bytes[..])?;
        let pvk = bellperson::groth16::prepare_verifying_key(&vk);
        ensure!(
            proof.len() == 192 * inputs.len(),
            "{} bytes for {} partitions",
            proof.len(),
            inputs.len()
        );
        let proofs = bellperson::groth16::Proof::read_many(proof, inputs.len())?;
        let refs: Vec<_> = proofs.iter().collect();
        Ok(bellperson::groth16::verify_proofs_batch(
            &pvk,
            &mut rand::rngs::OsRng,
            &refs,
            &inputs,
        )?)
    }

    fn post_proof(&self, winning: bool) -> Result<RegisteredPoStProof> {
        let kind = if winning {
            ProofKind::WinningPoSt
        } else {
            ProofKind::WindowPoSt
        };
        Ok(crate::proofs::registry::post_proof(
            kind,
            u64::from(self.registered_proof.sector_size()),
        )?)
    }

    fn vanilla_post(
        &self,
        proof: RegisteredPoStProof,
        randomness: &[u8; 32],
    ) -> Result<Vec<Vec<u8>>> {
        let sector_id = SectorId::from(self.sector_number);
        let challenges = post::generate_fallback_sector_challenges(
            proof,
            randomness,
            &[sector_id],
            self.prover_id(),
        )?;
        let replica = PrivateReplicaInfo::new(
            proof,
            self.comm_r,
            self.cache_path.clone(),
            self.replica_path.clone(),
        );
        let sector_challenges = challenges
            .get(&sector_id)
            .context("no challenges for the sector")?;
        Ok(vec![post::generate_single_vanilla_proof(
            proof,
            sector_id,
            &replica,
            sector_challenges,
        )?])
    }

    /// The WinningPoSt input a miner would send for this sector and `randomness`.
    pub fn winning_post_input(&self, randomness: [u8; 32]) -> Result<WinningPostInput> {
        let proof = self.post_proof(true)?;
        Ok(WinningPostInput {
            registered_proof: proof,
            randomness,
            miner_id: self.miner_id,
            vanilla_proofs: self.vanilla_post(proof, &randomness)?,
        })
    }

    /// The WindowPoSt partition-0 input for this sector and `randomness`.
    pub fn window_post_input(&self, randomness: [u8; 32]) -> Result<WindowPostInput> {
        let proof = self.post_proof(false)?;
        Ok(WindowPostInput {
            registered_proof: proof,
            randomness,
            miner_id: self.miner_id,
            partition_index: Some(0),
            vanilla_proofs: self.vanilla_post(proof, &randomness)?,
        })
    }

    fn replicas(&self, proof: RegisteredPoStProof) -> BTreeMap<SectorId, PublicReplicaInfo> {
        BTreeMap::from([(
            SectorId::from(self.sector_number),
            PublicReplicaInfo::new(proof, self.comm_r),
        )])
    }

    /// filecoin-proofs' `verify_winning_post`.
    pub fn verify_winning_post(&self, randomness: &[u8; 32], proof: &[u8]) -> Result<bool> {
        let p = self.post_proof(true)?;
        post::verify_winning_post(randomness, proof, &self.replicas(p), self.prover_id())
    }

    /// filecoin-proofs' `verify_window_post`.
    pub fn verify_window_post(&self, randomness: &[u8; 32], proof: &[u8]) -> Result<bool> {
        let p = self.post_proof(false)?;
        post::verify_window_post(
            randomness,
            &[(p, proof)],
            &self.replicas(p),
            self.prover_id(),
        )
    }

    /// Encodes new random data into this (CC) sector as a SnapDeals update under `dir` and
    /// returns the update's vanilla proofs as a [`SnapInput`].
    pub fn snap_update(&self, dir: &Path) -> Result<SnapInput> {
        let update_proof = update_proof_of(self.registered_proof)?;
        std::fs::create_dir_all(dir)?;
        let staged = dir.join("staged-update");
        let new_replica = dir.join("update");
        let new_cache = dir.join("update-cache");
        std::fs::create_dir_all(&new_cache)?;
        let sector_size = u64::from(self.registered_proof.sector_size());
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&new_replica)?;
        f.set_len(sector_size)?;
        let piece = stage_random_piece(self.registered_proof, &staged)?;
        let encoded = update::empty_sector_update_encode_into(
            update_proof,
            &new_replica,
            &new_cache,
            &self.replica_path,
            &self.cache_path,
            &staged,
            &[piece],
        )?;
        let vanilla = update::generate_partition_proofs(
            update_proof,
            self.comm_r,
            encoded.comm_r_new,
            encoded.comm_d_new,
            &self.replica_path,
            &self.cache_path,
            &new_replica,
            &new_cache,
        )?;
        Ok(SnapInput {
            registered_proof: update_proof,
            comm_r_old: self.comm_r,
            comm_r_new: encoded.comm_r_new,
            comm_d_new: encoded.comm_d_new,
            vanilla_proofs: vanilla.into_iter().map(|p| p.0).collect(),
        })
    }
}

/// The whole-deadline WindowPoSt input (no `partition_index`) a miner would send for
/// `sectors` (of one miner and sector size) and `randomness`: the challenges drawn for all
/// of them together, as filecoin-proofs draws a deadline's, one vanilla proof each.
pub fn window_post_deadline_input(
    sectors: &[&SealedSector],
    randomness: [u8; 32],
) -> Result<WindowPostInput> {
    let first = sectors.first().context("a deadline needs a sector")?;
    let proof = first.post_proof(false)?;
    let ids: Vec<SectorId> = sectors
        .iter()
        .map(|s| SectorId::from(s.sector_number))
        .collect();
    let challenges =
        post::generate_fallback_sector_challenges(proof, &randomness, &ids, first.prover_id())?;
    let mut vanilla_proofs = Vec::with_capacity(sectors.len());
    for (s, id) in sectors.iter().zip(&ids) {
        ensure!(s.miner_id == first.miner_id, "sectors of two miners");
        let replica = PrivateReplicaInfo::new(
            proof,
            s.comm_r,
            s.cache_path.clone(),
            s.replica_path.clone(),
        );
        let sector_challenges = challenges.get(id).context("no challenges for a sector")?;
        vanilla_proofs.push(post::generate_single_vanilla_proof(
            proof,
            *id,
            &replica,
            sector_challenges,
        )?);
    }
    Ok(WindowPostInput {
        registered_proof: proof,
        randomness,
        miner_id: first.miner_id,
        partition_index: None,
        vanilla_proofs,
    })
}

/// filecoin-proofs' `verify_window_post` of a whole deadline's proof over `sectors`.
pub fn verify_window_post_deadline(
    sectors: &[&SealedSector],
    randomness: &[u8; 32],
    proof: &[u8],
) -> Result<bool> {
    let first = sectors.first().context("a deadline needs a sector")?;
    let p = first.post_proof(false)?;
    let replicas: BTreeMap<SectorId, PublicReplicaInfo> = sectors
        .iter()
        .map(|s| {
            (
                SectorId::from(s.sector_number),
                PublicReplicaInfo::new(p, s.comm_r),
            )
        })
        .collect();
    post::verify_window_post(randomness, &[(p, proof)], &replicas, first.prover_id())
}

/// filecoin-proofs' `verify_seal` on a PoRep C2 proof of the C1 output `c1` (either JSON form
/// `cuzk prove porep --c1` takes) for `miner_id`'s sector `sector_number`: the commitments,
/// ticket and seed are the C1 output's, the verifying key the `.vk` file in filecoin-proofs'
/// parameter cache. Interactive PoRep only (an NI-PoRep C2 is an aggregate).
pub fn verify_c1_proof(c1: &[u8], miner_id: u64, sector_number: u64, proof: &[u8]) -> Result<bool> {
    let parsed = crate::proofs::porep::parse_c1(c1)?;
    let o = parsed.output;
    ensure!(
        !o.registered_proof
            .feature_enabled(ApiFeature::NonInteractivePoRep),
        "{:?}: NI-PoRep proofs are aggregates; verify them with filecoin-proofs' aggregate verifier",
        o.registered_proof
    );
    seal::verify_seal(
        o.registered_proof,
        o.comm_r,
        o.comm_d,
        prover_id(miner_id),
        SectorId::from(sector_number),
        o.ticket,
        o.seed,
        proof,
    )
}

/// The update proof type that goes with a seal proof type.
pub fn update_proof_of(proof: RegisteredSealProof) -> Result<RegisteredUpdateProof> {
    crate::proofs::registry::update_proof(u64::from(proof.sector_size())).map_err(Into::into)
}

/// filecoin-proofs' `verify_empty_sector_update_proof`.
pub fn verify_snap(input: &SnapInput, proof: &[u8]) -> Result<bool> {
    update::verify_empty_sector_update_proof(
        input.registered_proof,
        proof,
        input.comm_r_old,
        input.comm_r_new,
        input.comm_d_new,
    )
}
