//! Conversions between the wire types and the library's own types. The wire types are kept
//! separate so that reordering a library enum can never change the protocol.

use super::messages::{DeviceHealth, HealthState, ProofInput, ProofKind};
use crate::pipeline;
use crate::proofs::{self, PoRepRequest, ProofRequest};

impl From<pipeline::DeviceHealth> for DeviceHealth {
    fn from(h: pipeline::DeviceHealth) -> Self {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self {
            name: h.name,
            state: match h.state {
                pipeline::HealthState::Healthy => HealthState::Healthy,
                pipeline::HealthState::Quarantined => HealthState::Quarantined,
                pipeline::HealthState::Probing => HealthState::Probing,
            },
            failures: h.failures,
            consecutive_failures: h.consecutive_failures,
            quarantined_for_ms: ms(h.quarantined_for),
            probe_in_ms: ms(h.probe_in),
            last_error: h.last_error,
        }
    }
}

impl From<ProofKind> for proofs::ProofKind {
    fn from(k: ProofKind) -> Self {
        match k {
            ProofKind::PoRep => proofs::ProofKind::PoRep,
            ProofKind::SnapDeals => proofs::ProofKind::SnapDeals,
            ProofKind::WindowPoSt => proofs::ProofKind::WindowPoSt,
            ProofKind::WinningPoSt => proofs::ProofKind::WinningPoSt,
        }
    }
}

impl From<proofs::ProofKind> for ProofKind {
    fn from(k: proofs::ProofKind) -> Self {
        match k {
            proofs::ProofKind::PoRep => ProofKind::PoRep,
            proofs::ProofKind::SnapDeals => ProofKind::SnapDeals,
            proofs::ProofKind::WindowPoSt => ProofKind::WindowPoSt,
            proofs::ProofKind::WinningPoSt => ProofKind::WinningPoSt,
        }
    }
}

impl From<ProofInput> for ProofRequest {
    fn from(input: ProofInput) -> Self {
        match input {
            ProofInput::PoRep {
                c1,
                miner_id,
                sector_number,
            } => ProofRequest::PoRep(PoRepRequest {
                c1,
                miner_id,
                sector_number,
            }),
            ProofInput::SnapDeals { input } => ProofRequest::SnapDeals { input },
            ProofInput::WindowPoSt { input } => ProofRequest::WindowPoSt { input },
            ProofInput::WinningPoSt { input } => ProofRequest::WinningPoSt { input },
        }
    }
}

impl From<ProofRequest> for ProofInput {
    fn from(request: ProofRequest) -> Self {
        match request {
            ProofRequest::PoRep(PoRepRequest {
                c1,
                miner_id,
                sector_number,
            }) => ProofInput::PoRep {
                c1,
                miner_id,
                sector_number,
            },
            ProofRequest::SnapDeals { input } => ProofInput::SnapDeals { input },
            ProofRequest::WindowPoSt { input } => ProofInput::WindowPoSt { input },
            ProofRequest::WinningPoSt { input } => ProofInput::WinningPoSt { input },
        }
    }
}

impl ProofKind {
    /// The lower-case name used on the command line (`porep`, `snap`, `window-post`,
    /// `winning-post`).
    pub fn as_str(self) -> &'static str {
        proofs::ProofKind::from(self).as_str()
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
