//! Who may see and do what once connected (docs/security.md, "Who owns what"): pure
//! decisions over uids, so that they are tested with any uids, not only the test's own (the
//! daemon reads its peers' with SO_PEERCRED).
//!
//! A job belongs to the uid that submitted it. Admins — root, the daemon's own uid and
//! `socket.admin_uids` — see and act on every job and manage the parameter sets; every other
//! client sees and acts on its own jobs only, and is refused Preload and Evict.

use crate::engine::Owner;
use crate::proto::Request;

/// What a connection's peer may see and do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The peer's uid: the owner of the jobs it submits.
    pub uid: u32,
    /// Whether the peer is an admin.
    pub admin: bool,
}

impl Access {
    /// The access of a peer of uid `uid` to a daemon running as `own_uid` whose
    /// configuration names `admin_uids`: root and the daemon's own uid are always admins.
    pub fn of(uid: u32, own_uid: u32, admin_uids: &[u32]) -> Self {
        Self {
            uid,
            admin: uid == 0 || uid == own_uid || admin_uids.contains(&uid),
        }
    }

    /// Whether the peer sees, and may await, cancel and look up, a job of `owner`. To a peer
    /// that may not, the job does not exist (`UnknownJob`, as for an id never given out).
    pub fn sees(self, owner: Owner) -> bool {
        self.admin || owner == self.uid
    }

    /// Whether `request` is for admins only and this peer is not one (`AdminRequired`):
    /// loading and dropping parameter sets affects every user's jobs.
    pub fn refuses(self, request: &Request) -> bool {
        !self.admin
            && matches!(
                request,
                Request::Preload(_)
                    | Request::Evict(_)
                    | Request::PreloadProof(_)
                    | Request::EvictProof(_)
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, ParamSpec, ProofKind, RegisteredProof};

    const DAEMON: u32 = 999;

    #[test]
    fn root_the_daemons_uid_and_the_listed_uids_are_admins() {
        let listed = [1001, 1002];
        assert!(Access::of(0, DAEMON, &[]).admin, "root");
        assert!(
            Access::of(DAEMON, DAEMON, &[]).admin,
            "the daemon's own uid"
        );
        assert!(Access::of(1002, DAEMON, &listed).admin, "listed");
        assert!(!Access::of(1000, DAEMON, &listed).admin, "not listed");
        assert!(!Access::of(1000, DAEMON, &[]).admin);
        // A daemon running as root: only root and the listed uids.
        assert!(!Access::of(1000, 0, &[]).admin);
        assert!(Access::of(0, 0, &[]).admin);
    }

    #[test]
    fn a_client_sees_its_own_jobs_and_an_admin_every_job() {
        let alice = Access::of(1000, DAEMON, &[]);
        let operator = Access::of(1001, DAEMON, &[1001]);
        assert!(alice.sees(1000));
        assert!(!alice.sees(1002), "another user's job");
        assert!(!alice.sees(DAEMON), "the daemon's own user's job");
        assert!(!alice.sees(0), "root's job");
        for owner in [0, 1000, 1002, DAEMON] {
            assert!(operator.sees(owner), "an admin sees {owner}'s job");
        }
    }

    #[test]
    fn parameter_sets_are_managed_by_admins_only() {
        let spec = ParamSpec {
            kind: ProofKind::PoRep,
            sector_size: 2048,
        };
        let admin_only = [
            Request::Preload(spec.clone()),
            Request::Evict(spec.clone()),
            Request::PreloadProof(RegisteredProof::Seal(5)),
            Request::EvictProof(RegisteredProof::PoSt(5)),
        ];
        let everyone = [
            Request::Status(proto::StatusQuery { job_id: None }),
            Request::Cancel(proto::JobRef { job_id: 1 }),
            Request::Metrics,
            Request::Residency,
            Request::Jobs(proto::JobsQuery {
                after: None,
                max: 0,
            }),
            Request::Lookup(proto::LookupQuery {
                request_id: "s-1".into(),
            }),
            Request::Info,
            Request::Capacity(proto::CapacityQuery {
                kind: ProofKind::PoRep,
                priority: None,
            }),
            Request::Health,
            Request::DeviceMemory,
            Request::Deadlines(proto::DeadlinesQuery { max: 0 }),
        ];
        let alice = Access::of(1000, DAEMON, &[]);
        let admin = Access::of(1000, DAEMON, &[1000]);
        for r in &admin_only {
            assert!(alice.refuses(r), "{r:?} refused to a client");
            assert!(!admin.refuses(r), "{r:?} allowed to an admin");
        }
        for r in &everyone {
            assert!(!alice.refuses(r), "{r:?} allowed to everyone");
        }
    }
}
