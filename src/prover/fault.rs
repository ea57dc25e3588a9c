//! Fault injection (`debug.fault_*`, a testing aid): a [`Backend`] decorator whose prepared
//! sets fail every Nth call of a chosen stage, with a device error, an out-of-memory error or
//! a wrong sum, so that the stages' retries, the quarantine and the job's verification can be
//! exercised on any device, the CPU included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{G1Projective, Scalar};
use group::Group;

use super::{
    Backend, HostAllocator, PreparedSrs, ProverError, Scalars, Sums, Witness, WitnessSums,
};
use crate::config::{FaultConfig, FaultKind, FaultStage};
use crate::srs::Srs;

/// The error an injected fault reports (inside [`ProverError::Device`] or
/// [`ProverError::OutOfMemory`]).
#[derive(Debug, thiserror::Error)]
#[error("injected fault: {kind} in the {stage} stage (debug.fault_kind)")]
pub struct InjectedFault {
    /// `"error"` or `"out of memory"`.
    pub kind: &'static str,
    /// `"h"` or `"witness"`.
    pub stage: &'static str,
}

/// Counts the calls of a device's stages and decides which fail. Shared by every set the
/// device prepares: the Nth call is counted across jobs and parameter sets.
#[derive(Debug)]
struct Injector {
    options: FaultConfig,
    calls: AtomicU64,
    faults: AtomicU64,
}

impl Injector {
    /// How the call of `stage` now fails, if it does.
    fn strike(&self, stage: FaultStage) -> Option<FaultKind> {
        let o = &self.options;
        if o.every == 0 || (o.stage != FaultStage::Any && o.stage != stage) {
            return None;
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if !n.is_multiple_of(o.every) {
            return None;
        }
        let allowed = self
            .faults
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| {
                (o.limit == 0 || f < o.limit).then_some(f + 1)
            })
            .is_ok();
        allowed.then_some(o.kind)
    }
}

/// The error of a fault of `kind` in `stage`; `None` for a wrong result (the call goes on).
fn failure(kind: FaultKind, stage: FaultStage) -> Option<ProverError> {
    let stage = match stage {
        FaultStage::H => "h",
        FaultStage::Witness | FaultStage::Any => "witness",
    };
    match kind {
        FaultKind::Error => Some(ProverError::Device(Box::new(InjectedFault {
            kind: "error",
            stage,
        }))),
        FaultKind::Oom => Some(ProverError::OutOfMemory(Box::new(InjectedFault {
            kind: "out of memory",
            stage,
        }))),
        FaultKind::Wrong => None,
    }
}

/// A backend whose prepared sets fail as `options` say; everything else is `inner`'s.
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    injector: Arc<Injector>,
}

impl FaultyBackend {
    /// `inner` with faults injected as `options` says (none where `options.every` is 0).
    pub fn wrap(inner: Arc<dyn Backend>, options: FaultConfig) -> Arc<dyn Backend> {
        Arc::new(Self {
            inner,
            injector: Arc::new(Injector {
                options,
                calls: AtomicU64::new(0),
                faults: AtomicU64::new(0),
            }),
        })
    }
}

impl Backend for FaultyBackend {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn prepare(&self, srs: Arc<Srs>) -> Result<Arc<dyn PreparedSrs>, ProverError> {
        Ok(Arc::new(FaultyPrepared {
            inner: self.inner.prepare(srs)?,
            injector: self.injector.clone(),
        }))
    }
    fn is_accelerator(&self) -> bool {
        self.inner.is_accelerator()
    }
    fn pci_bus_id(&self) -> Option<String> {
        self.inner.pci_bus_id()
    }
    fn host_allocator(&self) -> Option<HostAllocator> {
        self.inner.host_allocator()
    }
    fn memory(&self) -> Option<super::DeviceMemory> {
        self.inner.memory()
    }
    fn reset_memory_peak(&self) {
        self.inner.reset_memory_peak()
    }
    fn pauses(&self) -> Option<super::DevicePauses> {
        self.inner.pauses()
    }
}

struct FaultyPrepared {
    inner: Arc<dyn PreparedSrs>,
    injector: Arc<Injector>,
}

impl FaultyPrepared {
    /// The faults of a call that runs both stages: an error of either ends it before the
    /// device works; `(wrong H, wrong witness)` otherwise.
    fn strike_both(&self) -> Result<(bool, bool), ProverError> {
        let h = self.injector.strike(FaultStage::H);
        let w = self.injector.strike(FaultStage::Witness);
        for (kind, stage) in [(h, FaultStage::H), (w, FaultStage::Witness)] {
            if let Some(e) = kind.and_then(|k| failure(k, stage)) {
                return Err(e);
            }
        }
        Ok((h.is_some(), w.is_some()))
    }

    fn strike(&self, stage: FaultStage) -> Result<bool, ProverError> {
        match self.injector.strike(stage) {
            None => Ok(false),
            Some(kind) => failure(kind, stage).map_or(Ok(true), Err),
        }
    }
}

/// A valid-looking but wrong sum: the true one plus the generator.
fn skewed(p: G1Projective) -> G1Projective {
    p + G1Projective::generator()
}

fn skewed_witness(w: WitnessSums) -> WitnessSums {
    WitnessSums {
        l: skewed(w.l),
        ..w
    }
}

fn skewed_sums(s: Sums, (h, w): (bool, bool)) -> Sums {
    Sums {
        h: if h { skewed(s.h) } else { s.h },
        witness: if w {
            skewed_witness(s.witness)
        } else {
            s.witness
        },
        h_done: s.h_done,
    }
}

impl PreparedSrs for FaultyPrepared {
    fn srs(&self) -> &Arc<Srs> {
        self.inner.srs()
    }

    fn h_sum(&self, a: Scalars, b: Scalars, c: Scalars) -> Result<G1Projective, ProverError> {
        let wrong = self.strike(FaultStage::H)?;
        let h = self.inner.h_sum(a, b, c)?;
        Ok(if wrong { skewed(h) } else { h })
    }

    fn witness_sums(&self, w: Witness) -> Result<WitnessSums, ProverError> {
        let wrong = self.strike(FaultStage::Witness)?;
        let s = self.inner.witness_sums(w)?;
        Ok(if wrong { skewed_witness(s) } else { s })
    }

    fn sums(&self, a: Scalars, b: Scalars, c: Scalars, w: Witness) -> Result<Sums, ProverError> {
        let wrong = self.strike_both()?;
        Ok(skewed_sums(self.inner.sums(a, b, c, w)?, wrong))
    }

    fn evaluates_shapes(&self) -> bool {
        self.inner.evaluates_shapes()
    }

    fn h_sum_shaped(
        &self,
        shape: &Arc<crate::synth::R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<G1Projective, ProverError> {
        let wrong = self.strike(FaultStage::H)?;
        let h = self.inner.h_sum_shaped(shape, input, aux)?;
        Ok(if wrong { skewed(h) } else { h })
    }

    fn sums_shaped(
        &self,
        shape: &Arc<crate::synth::R1cs>,
        w: Witness,
    ) -> Result<Sums, ProverError> {
        let wrong = self.strike_both()?;
        Ok(skewed_sums(self.inner.sums_shaped(shape, w)?, wrong))
    }

    fn device_bytes(&self) -> u64 {
        self.inner.device_bytes()
    }
    fn memory_plan(&self) -> Option<String> {
        self.inner.memory_plan()
    }
    fn host_bytes(&self) -> u64 {
        self.inner.host_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injector(stage: FaultStage, kind: FaultKind, every: u64, limit: u64) -> Injector {
        Injector {
            options: FaultConfig {
                device: 0,
                stage,
                kind,
                every,
                limit,
            },
            calls: AtomicU64::new(0),
            faults: AtomicU64::new(0),
        }
    }

    #[test]
    fn every_nth_call_of_the_stage_fails_up_to_the_limit() {
        let i = injector(FaultStage::H, FaultKind::Oom, 2, 2);
        let seen: Vec<_> = (0..8)
            .map(|_| {
                // A witness call is not counted where the stage is H.
                assert_eq!(i.strike(FaultStage::Witness), None);
                i.strike(FaultStage::H)
            })
            .collect();
        let oom = Some(FaultKind::Oom);
        assert_eq!(seen, [None, oom, None, oom, None, None, None, None]);
    }

    #[test]
    fn off_without_every_and_any_counts_both_stages() {
        let off = injector(FaultStage::Any, FaultKind::Error, 0, 0);
        assert!((0..5).all(|_| off.strike(FaultStage::H).is_none()));
        let any = injector(FaultStage::Any, FaultKind::Wrong, 3, 0);
        let seen: Vec<_> = [FaultStage::H, FaultStage::Witness]
            .into_iter()
            .cycle()
            .take(6)
            .map(|s| any.strike(s).is_some())
            .collect();
        assert_eq!(seen, [false, false, true, false, false, true]);
    }

    #[test]
    fn errors_are_typed_and_a_wrong_sum_differs() {
        assert!(matches!(
            failure(FaultKind::Oom, FaultStage::H),
            Some(ProverError::OutOfMemory(_))
        ));
        let e = failure(FaultKind::Error, FaultStage::Witness);
        assert!(matches!(e, Some(ProverError::Device(_))), "{e:?}");
        assert!(e.is_some_and(|e| e.to_string().contains("injected fault")));
        assert!(failure(FaultKind::Wrong, FaultStage::H).is_none());
        let p = G1Projective::generator();
        assert_ne!(skewed(p), p);
    }
}
