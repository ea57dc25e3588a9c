//! One circuit synthesized in independent parts on several threads, stitched into exactly
//! what sequential synthesis records.
//!
//! A split circuit is a *prefix* (everything before the first top-level namespace whose name
//! starts with a marker, e.g. PoRep's `challenge_`) followed by sub-circuits that use the
//! prefix's variables and their own, never each other's. Each part is the same prefix
//! followed by a contiguous run of those sub-circuits, in order. Part 0 is kept whole; every
//! other part contributes what it recorded after its prefix, appended in order, and the
//! densities it marked on prefix variables. The values of a sub-circuit's constraints and
//! variables do not depend on where its variables sit, so the result is bit-identical to
//! synthesizing the whole circuit on one thread (same a/b/c, assignment, inputs, densities).

use bellperson::SynthesisError;
use rayon::prelude::*;

use super::cs::{finish, record, with_yield_point, Mark, RecordingCs, Synthesized};
use super::gadgets::Synthesize;

/// Why a split synthesis failed.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// A part's circuit failed to synthesize.
    #[error(transparent)]
    Synthesis(#[from] SynthesisError),
    /// No parts were given.
    #[error("a split circuit needs at least one part")]
    NoParts,
    /// A part never opened a top-level namespace with the marker's prefix.
    #[error("part {part} has no top-level namespace named {marker}…")]
    NoMarker {
        /// The part's index.
        part: usize,
        /// The marker's prefix.
        marker: &'static str,
    },
    /// A part recorded something at the top level after its first sub-circuit began, or
    /// opened a top-level namespace other than a sub-circuit's: the circuit is not a prefix
    /// followed by independent sub-circuits.
    #[error("part {part} records outside its sub-circuits after the first one ({marker}…): the circuit cannot be split")]
    NotSplittable {
        /// The part's index.
        part: usize,
        /// The marker's prefix.
        marker: &'static str,
    },
    /// The job was stopped while its parts waited.
    #[error("stopped")]
    Stopped,
    /// A part's prefix recorded something else than part 0's: the circuit is not split the
    /// way the caller said.
    #[error("part {part}'s prefix differs from part 0's ({what})")]
    PrefixDiffers {
        /// The part's index.
        part: usize,
        /// What differs.
        what: &'static str,
    },
}

/// A part of a split circuit, synthesized: what it recorded and where its prefix ended.
pub struct Part {
    out: Synthesized,
    mark: Mark,
}

/// Synthesizes one part (the ONE input, the prefix and the part's sub-circuits; no input
/// constraints), marking where the first top-level namespace named `marker…` opened.
pub fn synthesize_part<C: Synthesize>(
    circuit: C,
    marker: &'static str,
    part: usize,
) -> Result<Part, SplitError> {
    let cs = record(circuit, RecordingCs::with_marker(marker))?;
    let mark = cs.marking.prefix_end(part)?;
    Ok(Part { out: cs.out, mark })
}

/// Synthesizes `parts` on the current rayon pool (each with `yield_point` as its thread's
/// yield point, if any), stitches them and appends the input constraints: the same
/// [`Synthesized`] as [`super::synthesize`] of the whole circuit.
pub fn synthesize_split<C: Synthesize + Send>(
    parts: Vec<C>,
    marker: &'static str,
    yield_point: Option<fn()>,
) -> Result<Synthesized, SplitError> {
    let parts = parts
        .into_par_iter()
        .enumerate()
        .map(|(i, c)| match yield_point {
            Some(p) => with_yield_point(p, || synthesize_part(c, marker, i)),
            None => synthesize_part(c, marker, i),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(finish(stitch(parts)?))
}

/// [`synthesize_split`] with the parts queued on `pool` first-in first-out behind the parts
/// already queued there (other partitions'), while this thread — not one of the pool's —
/// waits for them, then stitched on `stitch_pool`. No thread of `pool` ever waits for another
/// partition's part to finish (a waiting rayon thread steals work, and one part of a 32 GiB
/// partition is seconds), and a partition's parts run in order of arrival, queued together
/// (never interleaved with another partition's arriving at the same time). A part that has
/// not started when `stopped()` turns true is skipped, and the result is [`SplitError::Stopped`].
pub fn synthesize_split_on<C: Synthesize + Send>(
    pool: &rayon::ThreadPool,
    stitch_pool: &rayon::ThreadPool,
    parts: Vec<C>,
    marker: &'static str,
    yield_point: Option<fn()>,
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<Synthesized, SplitError> {
    let parts = run_parts_on(pool, parts, yield_point, stopped, |c, i| {
        synthesize_part(c, marker, i)
    })?;
    stitch_pool.install(|| Ok(finish(stitch(parts)?)))
}

/// Held while one partition's parts are queued.
static QUEUEING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `part(circuit, index)` for every part, queued on `pool` as [`synthesize_split_on`]
/// says, and returns the results in order.
pub fn run_parts_on<C: Send, P: Send, E: From<SplitError> + Send>(
    pool: &rayon::ThreadPool,
    parts: Vec<C>,
    yield_point: Option<fn()>,
    stopped: &(dyn Fn() -> bool + Sync),
    part: impl Fn(C, usize) -> Result<P, E> + Sync,
) -> Result<Vec<P>, E> {
    let mut done: Vec<Option<Result<P, E>>> = Vec::new();
    done.resize_with(parts.len(), || None);
    let part = &part;
    pool.in_place_scope_fifo(|scope| {
        // One partition's parts are queued together: partitions that arrive at once (a
        // sector's, admitted together) then finish one after another, the first as soon as
        // the pool could make it, instead of all of them together at the end.
        let _queueing = QUEUEING.lock().unwrap_or_else(|p| p.into_inner());
        for ((i, c), slot) in parts.into_iter().enumerate().zip(done.iter_mut()) {
            scope.spawn_fifo(move |_| {
                if stopped() {
                    *slot = Some(Err(SplitError::Stopped.into()));
                    return;
                }
                let run = || part(c, i);
                *slot = Some(match yield_point {
                    Some(p) => with_yield_point(p, run),
                    None => run(),
                });
            });
        }
    });
    if stopped() {
        return Err(SplitError::Stopped.into());
    }
    // Every slot is filled: the scope returns after all its tasks, and a task that panics
    // takes the scope (and this call) with it.
    done.into_iter()
        .map(|p| p.unwrap_or(Err(SplitError::Stopped.into())))
        .collect()
}

/// Part 0 whole, then every other part's records after its prefix, in order; the prefix
/// densities are the union of all parts'. Each part's tail is copied in parallel and freed
/// at once, so the peak is about one part's vector above the parts.
pub fn stitch(parts: Vec<Part>) -> Result<Synthesized, SplitError> {
    let mut parts = parts.into_iter();
    let Part { mut out, mark } = parts.next().ok_or(SplitError::NoParts)?;
    let mut rest: Vec<Synthesized> = Vec::with_capacity(parts.len());
    for (i, p) in parts.enumerate() {
        check_prefix(&out, mark, &p, i + 1)?;
        rest.push(p.out);
    }
    for r in &rest {
        or_into(&mut out.a_aux_density[..mark.aux], &r.a_aux_density);
        or_into(&mut out.b_aux_density[..mark.aux], &r.b_aux_density);
        or_into(&mut out.b_input_density[..mark.inputs], &r.b_input_density);
    }
    append_tails(
        &mut out.a,
        take_all(&mut rest, |s| &mut s.a),
        mark.constraints,
    );
    append_tails(
        &mut out.b,
        take_all(&mut rest, |s| &mut s.b),
        mark.constraints,
    );
    append_tails(
        &mut out.c,
        take_all(&mut rest, |s| &mut s.c),
        mark.constraints,
    );
    append_tails(&mut out.aux, take_all(&mut rest, |s| &mut s.aux), mark.aux);
    append_tails(
        &mut out.input,
        take_all(&mut rest, |s| &mut s.input),
        mark.inputs,
    );
    let a_aux = take_all(&mut rest, |s| &mut s.a_aux_density);
    append_tails(&mut out.a_aux_density, a_aux, mark.aux);
    let b_aux = take_all(&mut rest, |s| &mut s.b_aux_density);
    append_tails(&mut out.b_aux_density, b_aux, mark.aux);
    let b_input = take_all(&mut rest, |s| &mut s.b_input_density);
    append_tails(&mut out.b_input_density, b_input, mark.inputs);
    Ok(out)
}

/// The prefix is small (a few thousand constraints): comparing it whole is cheap and makes
/// a wrong split an error instead of a wrong proof.
fn check_prefix(out: &Synthesized, mark: Mark, p: &Part, part: usize) -> Result<(), SplitError> {
    let differs = |what| Err(SplitError::PrefixDiffers { part, what });
    if p.mark != mark {
        return differs("its length");
    }
    let x = &p.out;
    if x.a[..mark.constraints] != out.a[..mark.constraints]
        || x.b[..mark.constraints] != out.b[..mark.constraints]
        || x.c[..mark.constraints] != out.c[..mark.constraints]
    {
        return differs("a constraint's values");
    }
    if x.aux[..mark.aux] != out.aux[..mark.aux]
        || x.input[..mark.inputs] != out.input[..mark.inputs]
    {
        return differs("a variable's value");
    }
    Ok(())
}

/// One vector of every part, taken out of it.
fn take_all<T>(rest: &mut [Synthesized], f: fn(&mut Synthesized) -> &mut Vec<T>) -> Vec<Vec<T>> {
    rest.iter_mut().map(|r| std::mem::take(f(r))).collect()
}

fn or_into(dst: &mut [bool], src: &[bool]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= *s;
    }
}

/// Elements copied by one task: large enough that a task's overhead is nothing, small
/// enough that a few parts still spread over every thread.
const COPY_CHUNK: usize = 1 << 18;

/// Appends `tail[skip..]` of every tail to `dst`, in order, each copied in parallel and
/// freed as soon as it is copied.
pub(super) fn append_tails<T: Copy + Send + Sync>(
    dst: &mut Vec<T>,
    tails: Vec<Vec<T>>,
    skip: usize,
) {
    let extra: usize = tails.iter().map(|t| t.len().saturating_sub(skip)).sum();
    dst.reserve_exact(extra);
    for tail in tails {
        let from = tail.get(skip..).unwrap_or(&[]);
        let to = &mut dst.spare_capacity_mut()[..from.len()];
        to.par_chunks_mut(COPY_CHUNK)
            .zip(from.par_chunks(COPY_CHUNK))
            .for_each(|(to, from)| {
                for (t, f) in to.iter_mut().zip(from) {
                    t.write(*f);
                }
            });
        let len = dst.len() + from.len();
        // SAFETY: `reserve_exact` made room for every tail, so `to` has `from.len()`
        // elements, and the loop above wrote each of them (the chunks of `to` and `from` pair
        // up with equal lengths): the first `len` elements are initialized.
        unsafe { dst.set_len(len) };
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::{Circuit, ConstraintSystem};
    use blstrs::Scalar;
    use ff::Field;

    /// A prefix (a public x, x², a second input z and an aux w), then sub-circuits each
    /// proving knowledge of y_i = x² · v_i + i for its own v_i, with y_i public; sub-circuits
    /// from 5 on also use z and w in B, so the prefix densities differ between parts.
    /// `stray` records a constraint at the top level after the sub-circuits began.
    #[derive(Clone)]
    pub(in crate::synth) struct Chain {
        pub x: u64,
        pub subs: std::ops::Range<u64>,
        pub stray: bool,
    }

    impl Circuit<Scalar> for Chain {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(self.x)))?;
            x.inputize(cs.namespace(|| "x input"))?;
            let x2 = x.square(cs.namespace(|| "x2"))?;
            let z = cs.alloc_input(|| "z", || Ok(Scalar::from(3)))?;
            let w = cs.alloc(|| "w", || Ok(Scalar::from(4)))?;
            for i in self.subs {
                let mut ns = cs.namespace(|| format!("sub_{i}"));
                let v = AllocatedNum::alloc(ns.namespace(|| "v"), || Ok(Scalar::from(i * 7 + 3)))?;
                let y = x2.mul(ns.namespace(|| "x2 v"), &v)?;
                let y = AllocatedNum::alloc(ns.namespace(|| "y"), || {
                    Ok(y.get_value().unwrap_or(Scalar::ZERO) + Scalar::from(i))
                })?;
                y.inputize(ns.namespace(|| "y input"))?;
                if i >= 5 {
                    // v · (2z + w − 1) = 9v: coefficients other than one, and ONE in B.
                    let t = ns.alloc(|| "t", || Ok(Scalar::from((i * 7 + 3) * 9)))?;
                    let one = CS::one();
                    ns.enforce(
                        || "uses z, w",
                        |lc| lc + v.get_variable(),
                        |lc| lc + (Scalar::from(2), z) + w - one,
                        |lc| lc + t,
                    );
                }
            }
            if self.stray {
                cs.enforce(|| "stray", |lc| lc + x.get_variable(), |lc| lc, |lc| lc);
            }
            Ok(())
        }
    }

    pub(in crate::synth) fn split(x: u64, bounds: &[u64]) -> Vec<Chain> {
        bounds
            .windows(2)
            .map(|w| Chain {
                x,
                subs: w[0]..w[1],
                stray: false,
            })
            .collect()
    }

    fn pools() -> (rayon::ThreadPool, rayon::ThreadPool) {
        let build = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        (build(3), build(2))
    }

    #[test]
    fn any_split_records_exactly_what_one_thread_records() {
        let whole = crate::synth::synthesize(Chain {
            x: 5,
            subs: 0..9,
            stray: false,
        })
        .unwrap();
        assert!(whole.is_satisfied());
        // z (input 2, after ONE and x) and w (the prefix's last aux) are in B only through sub-circuits ≥ 5.
        assert!(whole.b_input_density[2]);
        let (pool, stitcher) = pools();
        for bounds in [
            &[0, 9][..],
            &[0, 1, 9],
            &[0, 4, 5, 9],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ] {
            let stitched = synthesize_split(split(5, bounds), "sub_", None).unwrap();
            assert_eq!(stitched, whole, "split at {bounds:?}");
            let queued =
                synthesize_split_on(&pool, &stitcher, split(5, bounds), "sub_", None, &|| false)
                    .unwrap();
            assert_eq!(queued, whole, "split at {bounds:?}, queued on a pool");
        }
        // Part 0 alone does not mark z and w: the union of the parts' densities does.
        let first = crate::synth::synthesize(Chain {
            x: 5,
            subs: 0..4,
            stray: false,
        })
        .unwrap();
        assert!(!first.b_input_density[2]);
    }

    #[test]
    fn a_part_without_the_marker_or_with_another_prefix_is_an_error() {
        let e = synthesize_split(split(5, &[0, 3, 3]), "sub_", None).unwrap_err();
        assert!(matches!(e, SplitError::NoMarker { part: 1, .. }), "{e}");
        let parts = vec![
            Chain {
                x: 5,
                subs: 0..3,
                stray: false,
            },
            Chain {
                x: 6,
                subs: 3..9,
                stray: false,
            },
        ];
        let e = synthesize_split(parts, "sub_", None).unwrap_err();
        assert!(
            matches!(e, SplitError::PrefixDiffers { part: 1, .. }),
            "{e}"
        );
        let mut stray = split(5, &[0, 3, 9]);
        stray[1].stray = true;
        let e = synthesize_split(stray, "sub_", None).unwrap_err();
        assert!(
            matches!(e, SplitError::NotSplittable { part: 1, .. }),
            "{e}"
        );
        assert!(matches!(
            synthesize_split(Vec::<Chain>::new(), "sub_", None),
            Err(SplitError::NoParts)
        ));
    }

    #[test]
    fn a_stopped_split_skips_its_parts() {
        let (pool, stitcher) = pools();
        let e = synthesize_split_on(
            &pool,
            &stitcher,
            split(5, &[0, 3, 9]),
            "sub_",
            None,
            &|| true,
        )
        .unwrap_err();
        assert!(matches!(e, SplitError::Stopped), "{e}");
    }
}
