//! A PoSt partition's circuit cut into runs of its sector slots, which the stages synthesize
//! at once and stitch (`synth::synthesize_split`). storage-proofs-post proves a WinningPoSt
//! as one challenge over each of 66 slots (the challenged sector repeated), a WindowPoSt
//! partition as ten challenges over each of its sectors: both are cut the same way.

use bellperson::{ConstraintSystem, SynthesisError};
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_post::fallback::FallbackPoStCircuit;

use crate::pipeline::partitions::PartitionCircuit;
use crate::proofs::porep::even_runs;
use crate::synth::{Gadgets, Synthesize};

/// The top-level namespace in which storage-proofs-post 19's `FallbackPoStCircuit` puts
/// every sector (`sector_{i}` inside it) on its sequential path, recording nothing else.
pub(crate) const SECTORS_MARKER: &str = "outer namespace";

/// A PoSt partition's circuit, or a run of its sectors. storage-proofs-post's circuit
/// synthesizes into an extensible constraint system (cuzk's evaluating one) in groups of
/// sectors on the current rayon pool (as many groups as its `window_post_synthesis_num_cpus`
/// setting says), each in a system of its own that is then appended: a partition
/// synthesized whole keeps that path. A run takes the sequential path
/// (`synthesize_default`'s namespaces, which are what a part of a split is recognised by)
/// whatever the system, so that its parts run where the stages put them.
#[derive(Clone)]
pub(crate) struct PostCircuit<Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    sequential: bool,
}

impl<Tree: 'static + MerkleTreeTrait> Synthesize for PostCircuit<Tree> {
    fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if !self.sequential {
            return bellperson::Circuit::synthesize(self.circuit, cs);
        }
        let cs = &mut cs.namespace(|| SECTORS_MARKER);
        for (i, sector) in self.circuit.sectors.iter().enumerate() {
            let cs = &mut cs.namespace(|| format!("sector_{i}"));
            bellperson::Circuit::synthesize(sector, cs)?;
        }
        Ok(())
    }
}

/// `c` cut into at most `most` circuits over contiguous runs of its sector slots: each
/// records exactly its run's part of `c` (the slots are independent, their inputs allocated
/// in order), so the stages synthesize them at once on their part threads and stitch them
/// into what `c` records (`synth::synthesize_split`). A WindowPoSt partition of 2,349 sectors
/// is about 125 M constraints: on one thread, minutes; a 32 GiB WinningPoSt's 66 slots, a
/// tenth of a second that a critical proof waits for.
pub(crate) fn runs<Tree: 'static + MerkleTreeTrait>(
    c: FallbackPoStCircuit<Tree>,
    most: usize,
) -> PartitionCircuit<PostCircuit<Tree>> {
    let FallbackPoStCircuit { prover_id, sectors } = c;
    let len = sectors.len();
    let n = most.min(len);
    if n <= 1 {
        return PartitionCircuit::Whole(PostCircuit {
            circuit: FallbackPoStCircuit { prover_id, sectors },
            sequential: false,
        });
    }
    let mut rest = sectors.into_iter();
    let parts = even_runs(len, n)
        .map(|run| PostCircuit {
            circuit: FallbackPoStCircuit {
                prover_id,
                sectors: rest.by_ref().take(run.len()).collect(),
            },
            sequential: true,
        })
        .collect();
    PartitionCircuit::Split {
        parts,
        marker: SECTORS_MARKER,
    }
}
