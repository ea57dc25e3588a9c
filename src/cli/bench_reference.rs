//! The reference of `cuzk bench <kind>`: filecoin-proofs' own prover on the same input, run in
//! a child process of its own (`cuzk bench --reference-only <kind> …`), so that its peak RSS
//! is its own and not cuzk's resident parameters besides, and verified with filecoin-proofs'
//! own verifier where its proving call does not verify.
//!
//! filecoin-proofs is built without its GPU features (Cargo.toml): the reference is its CPU
//! prover on every host.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::request::{request_of, ProveWhat};
use crate::proofs::{porep, post, PoRepRequest, ProofRequest};

/// How the reference's proof was checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Checked {
    /// Inside its proving call (`seal_commit_phase2` calls `verify_seal`).
    Inside,
    /// By filecoin-proofs' verifier, called after the proof, taking this long.
    Apart(Duration),
    /// Not at all: filecoin-proofs-api verifies whole WindowPoSt deadlines only, and this was
    /// one partition of a deadline of several.
    Not,
}

/// What the reference took, in its own process.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ReferenceRun {
    /// The filecoin-proofs-api function that proved.
    pub call: String,
    /// Its proving call.
    pub prove: Duration,
    /// Its verification.
    pub checked: Checked,
    /// The child's peak RSS from just before the proving call to the end, in bytes.
    pub peak: u64,
}

impl ReferenceRun {
    /// Proving and, where apart, verifying: what cuzk's time (which includes its own
    /// verification) is compared with.
    pub fn total(&self) -> Duration {
        match self.checked {
            Checked::Apart(v) => self.prove + v,
            Checked::Inside | Checked::Not => self.prove,
        }
    }

    /// The line the child prints on stdout for its parent.
    fn line(&self) -> String {
        let checked = match self.checked {
            Checked::Inside => "inside".to_string(),
            Checked::Not => "not".to_string(),
            Checked::Apart(v) => format!("{:.6}", v.as_secs_f64()),
        };
        format!(
            "{PREFIX} call={} prove_s={:.6} verify={checked} peak_rss={}",
            self.call,
            self.prove.as_secs_f64(),
            self.peak
        )
    }

    /// The child's line, read back.
    fn parse(line: &str) -> Option<ReferenceRun> {
        let mut words = line.strip_prefix(PREFIX)?.split_whitespace();
        let mut field = |name: &str| words.next()?.strip_prefix(name)?.strip_prefix('=');
        let secs = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
        };
        let call = field("call")?.to_string();
        let prove = secs(field("prove_s")?)?;
        let checked = match field("verify")? {
            "inside" => Checked::Inside,
            "not" => Checked::Not,
            v => Checked::Apart(secs(v)?),
        };
        let peak = field("peak_rss")?.parse().ok()?;
        Some(ReferenceRun {
            call,
            prove,
            checked,
            peak,
        })
    }
}

const PREFIX: &str = "cuzk-bench-reference:";

/// The name of filecoin-proofs' verifier for `what`'s proofs.
pub(super) fn verifier(what: &ProveWhat) -> &'static str {
    match what {
        ProveWhat::Porep { .. } => "verify_seal",
        ProveWhat::Snap { .. } => "verify_empty_sector_update_proof",
        ProveWhat::WindowPost { .. } => "verify_window_post",
        ProveWhat::WinningPost { .. } => "verify_winning_post",
    }
}

/// The command line of the child that runs the reference on `what` with the parameters in
/// `dir` (filecoin-proofs reads them from `FIL_PROOFS_PARAMETER_CACHE`, which the child's
/// `main` sets from `--param-dir`).
pub(super) fn child_args(what: &ProveWhat, dir: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "bench".into(),
        "--param-dir".into(),
        dir.into(),
        "--reference-only".into(),
    ];
    match what {
        ProveWhat::Porep {
            c1,
            miner_id,
            sector_number,
        } => {
            a.extend(["porep".into(), "--c1".into(), c1.into()]);
            a.extend(["--miner-id".into(), miner_id.to_string().into()]);
            if let Some(n) = sector_number {
                a.extend(["--sector-number".into(), n.to_string().into()]);
            }
        }
        ProveWhat::Snap { input } => a.extend(["snap".into(), "--input".into(), input.into()]),
        ProveWhat::WindowPost { input } => {
            a.extend(["window-post".into(), "--input".into(), input.into()])
        }
        ProveWhat::WinningPost { input } => {
            a.extend(["winning-post".into(), "--input".into(), input.into()])
        }
    }
    a
}

/// Runs the reference in a child process (this executable) and reads back what it took.
pub(super) fn measure(what: &ProveWhat, dir: &Path) -> anyhow::Result<ReferenceRun> {
    let exe = std::env::current_exe().context("locating cuzk for the reference's process")?;
    let out = Command::new(&exe)
        .args(child_args(what, dir))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("starting {} for the reference", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("the reference's process failed ({})", out.status);
    }
    stdout
        .lines()
        .find_map(ReferenceRun::parse)
        .ok_or_else(|| anyhow!("the reference's process printed no result line"))
}

/// The child's side: the reference once in this process, its line on stdout.
pub(super) fn run_child(what: &ProveWhat) -> anyhow::Result<()> {
    let request = request_of(what)?;
    super::rss::reset_peak_rss();
    let (call, prove, checked) = reference(&request)?;
    let run = ReferenceRun {
        call: call.to_string(),
        prove,
        checked,
        peak: super::rss::peak_rss(),
    };
    println!("{}", run.line());
    Ok(())
}

/// What a reference took: its proving function's name, its time and how its proof was
/// checked.
type Measured = (&'static str, Duration, Checked);

/// filecoin-proofs' own proving function on the same input, then its verifier where the
/// proving function does not verify: the function's name, its time and how its proof was
/// checked. A proof its verifier rejects is an error.
fn reference(request: &ProofRequest) -> anyhow::Result<Measured> {
    let start = Instant::now();
    match request {
        ProofRequest::PoRep(r) => porep_reference(r, start),
        ProofRequest::SnapDeals { input } => snap_reference(input, start),
        ProofRequest::WindowPoSt { input } => window_reference(input, start),
        ProofRequest::WinningPoSt { input } => winning_reference(input, start),
    }
}

/// The verifier's answer `ok`, checked, with its time since `t`.
fn verified(ok: bool, t: Instant) -> anyhow::Result<Checked> {
    anyhow::ensure!(ok, "filecoin-proofs' verifier rejected its own proof");
    Ok(Checked::Apart(t.elapsed()))
}

/// PoRep's reference, timed from `start`: `seal_commit_phase2`, which verifies inside.
fn porep_reference(r: &PoRepRequest, start: Instant) -> anyhow::Result<Measured> {
    let parsed = porep::parse_c1(&r.c1)?;
    let sector = r.sector_number.or(parsed.sector_number).unwrap_or(0);
    filecoin_proofs_api::seal::seal_commit_phase2(
        parsed.output,
        porep::prover_id(r.miner_id),
        sector.into(),
    )?;
    Ok(("seal_commit_phase2", start.elapsed(), Checked::Inside))
}

/// SnapDeals' reference, timed from `start`, then its verifier.
fn snap_reference(input: &[u8], start: Instant) -> anyhow::Result<Measured> {
    use filecoin_proofs_api::{update, PartitionProofBytes};
    let i: crate::proofs::snap::SnapInput = serde_json::from_slice(input)?;
    let vanilla = i.vanilla_proofs.into_iter().map(PartitionProofBytes);
    let proof = update::generate_empty_sector_update_proof_with_vanilla(
        i.registered_proof,
        vanilla.collect(),
        i.comm_r_old,
        i.comm_r_new,
        i.comm_d_new,
    )?;
    let prove = start.elapsed();
    let t = Instant::now();
    let ok = update::verify_empty_sector_update_proof(
        i.registered_proof,
        &proof.0,
        i.comm_r_old,
        i.comm_r_new,
        i.comm_d_new,
    )?;
    let call = "generate_empty_sector_update_proof_with_vanilla";
    Ok((call, prove, verified(ok, t)?))
}

/// WindowPoSt's reference, timed from `start`, then its verifier where the proof is a
/// whole deadline's.
fn window_reference(input: &[u8], start: Instant) -> anyhow::Result<Measured> {
    use filecoin_proofs_api::post as api_post;
    let i: post::WindowPostInput = serde_json::from_slice(input)?;
    let prover = porep::prover_id(i.miner_id);
    let call = match i.partition_index {
        Some(_) => "generate_single_window_post_with_vanilla",
        None => "generate_window_post_with_vanilla",
    };
    let proof = match i.partition_index {
        Some(k) => {
            api_post::generate_single_window_post_with_vanilla(
                i.registered_proof,
                &i.randomness,
                prover,
                &i.vanilla_proofs,
                k,
            )?
            .0
        }
        None => {
            let mut proofs = api_post::generate_window_post_with_vanilla(
                i.registered_proof,
                &i.randomness,
                prover,
                &i.vanilla_proofs,
            )?;
            anyhow::ensure!(proofs.len() == 1, "{} WindowPoSt proofs", proofs.len());
            proofs.remove(0).1
        }
    };
    let prove = start.elapsed();
    let t = Instant::now();
    let replicas = replicas(i.registered_proof, &i.vanilla_proofs)?;
    // Partition 0 of a one-partition deadline is the deadline's proof; another
    // partition cannot be verified alone through the API.
    let several = replicas.len() > i.registered_proof.sector_count();
    if matches!(i.partition_index, Some(k) if k > 0 || several) {
        return Ok((call, prove, Checked::Not));
    }
    let ok = api_post::verify_window_post(
        &i.randomness,
        &[(i.registered_proof, &proof)],
        &replicas,
        prover,
    )?;
    Ok((call, prove, verified(ok, t)?))
}

/// WinningPoSt's reference, timed from `start`, then its verifier.
fn winning_reference(input: &[u8], start: Instant) -> anyhow::Result<Measured> {
    use filecoin_proofs_api::post as api_post;
    let i: post::WinningPostInput = serde_json::from_slice(input)?;
    let prover = porep::prover_id(i.miner_id);
    let proofs = api_post::generate_winning_post_with_vanilla(
        i.registered_proof,
        &i.randomness,
        prover,
        &i.vanilla_proofs,
    )?;
    let prove = start.elapsed();
    let [(_, proof)] = proofs.as_slice() else {
        bail!("{} WinningPoSt proofs", proofs.len());
    };
    let t = Instant::now();
    let replicas = replicas(i.registered_proof, &i.vanilla_proofs)?;
    let ok = api_post::verify_winning_post(&i.randomness, proof, &replicas, prover)?;
    Ok((
        "generate_winning_post_with_vanilla",
        prove,
        verified(ok, t)?,
    ))
}

/// The public replica information of a PoSt input's sectors, as a verifier is given it.
fn replicas(
    proof: filecoin_proofs_api::RegisteredPoStProof,
    vanilla: &[Vec<u8>],
) -> anyhow::Result<
    std::collections::BTreeMap<
        filecoin_proofs_api::SectorId,
        filecoin_proofs_api::PublicReplicaInfo,
    >,
> {
    Ok(post::public_replicas(proof, vanilla)?
        .into_iter()
        .map(|(id, comm_r)| {
            (
                id.into(),
                filecoin_proofs_api::PublicReplicaInfo::new(proof, comm_r),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_childs_line_reads_back() {
        for checked in [
            Checked::Inside,
            Checked::Not,
            Checked::Apart(Duration::from_millis(12)),
        ] {
            let run = ReferenceRun {
                call: "seal_commit_phase2".into(),
                prove: Duration::from_millis(1234),
                checked,
                peak: 3_100_000_000,
            };
            assert_eq!(ReferenceRun::parse(&run.line()), Some(run.clone()));
        }
        let bad = "cuzk-bench-reference: call=f prove_s=-1 verify=not peak_rss=1";
        assert_eq!(ReferenceRun::parse(bad), None);
        assert_eq!(
            ReferenceRun::parse("call=f prove_s=1 verify=not peak_rss=1"),
            None
        );
        let apart = ReferenceRun {
            call: "f".into(),
            prove: Duration::from_secs(2),
            checked: Checked::Apart(Duration::from_secs(1)),
            peak: 0,
        };
        assert_eq!(apart.total(), Duration::from_secs(3));
    }
}
