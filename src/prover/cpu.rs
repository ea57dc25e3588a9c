//! The CPU backend: rayon NTTs and a batch-affine Pippenger (blst's for small MSMs).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use super::{msm, ntt, Backend, ProverError};

/// Proves on the CPU with every core rayon (and, for small MSMs, blst) is given.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    fn quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError> {
        ntt::quotient(a, b, c)
    }

    fn msm_g1(&self, bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective, ProverError> {
        check_len(bases.len(), scalars.len())?;
        Ok(msm::msm_g1(bases, scalars))
    }

    fn msm_g2(&self, bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective, ProverError> {
        check_len(bases.len(), scalars.len())?;
        Ok(msm::msm_g2(bases, scalars))
    }

    /// Small circuits (PoSt) leave most of a many-core machine idle in each MSM alone;
    /// rayon's work stealing keeps the cores busy when the MSMs run together.
    fn concurrent_msms(&self) -> bool {
        true
    }
}

fn check_len(bases: usize, scalars: usize) -> Result<(), ProverError> {
    if bases == scalars {
        Ok(())
    } else {
        Err(ProverError::Backend(format!(
            "{bases} bases for {scalars} scalars"
        )))
    }
}
