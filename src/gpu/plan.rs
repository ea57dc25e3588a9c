//! The device memory plan: which form each stage of a proof takes on a device of a given
//! memory budget. A pure function of the budget and the parameter set's sizes ([`plan`]), so
//! that what a 16 GB card does can be decided and tested on any machine.
//!
//! A proof's device work runs in phases, each holding its own buffers beside whatever stays
//! resident (points kept between proofs, the recorded shape, the NTT tables):
//!
//! * **fill**: A, B or C evaluated on the device from the recorded shape (or uploaded from host
//!   evaluations), into a domain-long vector;
//! * **transforms**: the quotient's NTTs: all three vectors and a scratch vector on the device
//!   ([`Quotient::Resident`]), or one vector and its scratch at a time, the cosets of A and B
//!   parked in page-locked host memory and streamed back for the pointwise step
//!   ([`Quotient::Parked`]);
//! * **H**: the H query's MSM over the quotient's coefficients;
//! * **aux G1**, **aux G2**: the L, A and B queries' MSMs over the assignment.
//!
//! An MSM whose points are not resident streams them from host memory in pieces through two
//! device buffers (one fills while the other is summed); every MSM may be cut into pieces so
//! that its working buffers fit. [`plan`] tries every form and every set of resident queries,
//! keeps those whose every phase fits the budget, and picks the one with the least estimated
//! extra time ([`Plan::cost`]): a model of bytes over the bus, not a measurement.

use std::fmt;

/// Bytes of a G1 affine point, and of G1 / G2 XYZZ bucket points.
const G1_AFFINE: u64 = 96;
const G2_AFFINE: u64 = 192;
const G1_XYZZ: u64 = 192;
const G2_XYZZ: u64 = 384;
/// Bytes of an Fr element on the device.
const FR: u64 = 32;
/// Bytes of one of the two buffers a streamed shape's rows go through.
pub const SHAPE_SLOT_BYTES: u64 = 128 << 20;
/// Most points of a piece of a streamed G1 MSM over the assignment (1.5 GiB of points): the
/// first piece's upload waits for nothing to overlap it, the others travel while the piece
/// before is summed.
pub const STREAM_PIECE: u64 = 1 << 24;
/// The same for the H query, whose pieces each add a window reduction (its scalars are all
/// full): fewer, larger pieces.
pub const STREAM_PIECE_H: u64 = 1 << 25;
/// Fewest points in a piece of a cut MSM: below this, the fixed costs of each piece dominate.
pub const MIN_PIECE: u64 = 1 << 12;
/// Room kept for what the estimate does not count: the allocator's rounding, small buffers,
/// a critical proof's turn between two phases. Added to every phase's estimate, with
/// [`SLACK_PER_MILLE`] of the budget: with 64 MiB alone, a plan for 22 GiB free (B in G2
/// resident) went 0.22 GB past its budget (docs/benchmarks.md, 2026-12-04).
const SLACK: u64 = 64 << 20;
/// The part of the budget every phase keeps free besides [`SLACK`], in thousandths.
const SLACK_PER_MILLE: u64 = 20;
/// The bus rate the cost model assumes, bytes per second (page-locked host memory to an
/// H200 reaches about 50 GB/s; half of that allows for transfers that stall compute).
const BUS_BYTES_PER_S: f64 = 25e9;
/// Fraction of the H query's streamed bytes the model charges: its upload runs beside an MSM
/// whose arithmetic takes several times longer.
const H_STREAM_CHARGE: f64 = 0.3;
/// Seconds the model charges for each piece an MSM is cut into beyond the first (the window
/// sums of each piece; about 12 ms for a G1 MSM of 20-bit windows on the H200).
const PIECE_S: f64 = 0.012;

pub use super::budget::{available_budget, device_budget, MARGIN};

/// A query of the parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// H (G1, domain − 1 points).
    H,
    /// L (G1, one per aux variable).
    L,
    /// A (G1).
    A,
    /// B in G1.
    BG1,
    /// B in G2.
    BG2,
}

impl Query {
    /// Every query, in the order the cost model prefers to keep them resident in.
    pub const ALL: [Query; 5] = [Query::L, Query::A, Query::BG2, Query::BG1, Query::H];

    fn bit(self) -> u8 {
        match self {
            Query::H => 1,
            Query::L => 2,
            Query::A => 4,
            Query::BG1 => 8,
            Query::BG2 => 16,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Query::H => "H",
            Query::L => "L",
            Query::A => "A",
            Query::BG1 => "B G1",
            Query::BG2 => "B G2",
        }
    }
}

/// A set of queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queries(u8);

impl Queries {
    /// Every query.
    pub const ALL: Queries = Queries(31);
    /// None.
    pub const NONE: Queries = Queries(0);

    /// Whether `q` is in the set.
    pub fn has(self, q: Query) -> bool {
        self.0 & q.bit() != 0
    }

    /// The set without the queries of `other`.
    pub fn without(self, other: Queries) -> Queries {
        Queries(self.0 & !other.0)
    }

    /// The set of the queries in `qs`.
    pub fn of(qs: &[Query]) -> Queries {
        Queries(qs.iter().fold(0, |bits, q| bits | q.bit()))
    }
}

/// The counts a plan needs of a parameter set's proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// The quotient's domain (a power of two): `h + 1`.
    pub domain: u64,
    /// Aux variables (points of L).
    pub aux: u64,
    /// Points of the A query (inputs and aux).
    pub a: u64,
    /// Points of each B query (G1 and G2).
    pub b: u64,
    /// Device bytes of the circuit's recorded shape (an estimate until it is recorded; 0 for
    /// proofs from host evaluations only).
    pub shape: u64,
}

impl Sizes {
    /// The sizes of a set whose queries have these many points: `h` (domain − 1), `l`, `a`,
    /// `b` (each of G1 and G2), with the shape estimated from the domain.
    pub fn from_queries(h: u64, l: u64, a: u64, b: u64) -> Sizes {
        let domain = (h + 1).next_power_of_two().max(2);
        Sizes {
            domain,
            aux: l,
            a,
            b,
            shape: estimated_shape_bytes(domain),
        }
    }

    fn points(&self, q: Query) -> u64 {
        match q {
            Query::H => self.domain - 1,
            Query::L => self.aux,
            Query::A => self.a,
            Query::BG1 | Query::BG2 => self.b,
        }
    }

    /// Host bytes of a query's points (as the device holds them).
    pub fn point_bytes(&self, q: Query) -> u64 {
        self.points(q) * point_size(q)
    }

    /// The most points of one MSM of G1 (the H, L or A query) or of G2 (B).
    pub fn longest(&self, g2: bool) -> u64 {
        if g2 {
            self.b
        } else {
            (self.domain - 1).max(self.aux).max(self.a)
        }
    }

    /// One domain-long vector of Fr.
    fn vector(&self) -> u64 {
        self.domain * FR
    }

    /// The aux assignment.
    fn assignment(&self) -> u64 {
        self.aux * FR
    }
}

/// A recorded shape's device bytes, before it is recorded: three row-start arrays of 4 bytes
/// per constraint and about six terms of 8 bytes per constraint (a 32 GiB PoRep partition has
/// 5.54 terms per constraint, docs/benchmarks.md), the domain taken as the constraint count.
pub fn estimated_shape_bytes(domain: u64) -> u64 {
    domain * (3 * 4 + 6 * 8)
}

fn point_size(q: Query) -> u64 {
    if q == Query::BG2 {
        G2_AFFINE
    } else {
        G1_AFFINE
    }
}

/// Where the quotient's vectors are during the transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quotient {
    /// A, B, C and a scratch vector on the device together.
    Resident,
    /// One vector and its scratch at a time; the cosets of A and B parked in page-locked host
    /// memory, streamed back for the pointwise step.
    Parked,
}

/// The NTT tables' bytes for a domain: the twiddle table (16 bytes per element) and the
/// power tables (five pairs of 2^14 elements).
pub fn tables_bytes(domain: u64) -> u64 {
    16 * domain + 10 * (1 << 14) * FR
}

/// Device bytes an MSM of `n` points with `c`-bit windows takes beyond its points and its
/// scalars (which its caller holds), at the most (every scalar taken as neither 0 nor 1), from
/// msm.rs's allocations: the signed digits and their bucket-sorted list (4 bytes per point and
/// window each), the 0 / 1 / other index lists, the bucket counts, the batch addition of the
/// ones, the buckets and the chunk sums of the accumulation (and the block products of G1's
/// batch-affine walk).
pub fn msm_work_bytes(g2: bool, n: u64, c: u32) -> u64 {
    let xyzz = if g2 { G2_XYZZ } else { G1_XYZZ };
    let windows = u64::from(255 / c + 1);
    let buckets = windows << (c - 1);
    let counts = 4 * (buckets + 1);
    let digits = 4 * windows * n;
    let front = digits + counts + 8 * n + 8;
    let ones = front + (n / 32 + 1) * xyzz * 9 / 8;
    let sort = 2 * digits + 2 * counts + 4 * n;
    let chunks = windows * n / 128 + 1;
    // G1's batch-affine walk (a tuning variant) keeps a field element per 128 chunks.
    let affine = if g2 { 0 } else { (chunks / 128 + 1) * 48 };
    let accumulate = digits + counts + buckets * xyzz + 2 * chunks * xyzz + affine;
    let sums = buckets * xyzz + counts + (buckets / 16 + windows) * xyzz * 9 / 8;
    ones.max(sort).max(accumulate).max(sums)
}

/// The window width the MSM driver picks for `n` points (G2 when true).
pub type WindowBits<'a> = &'a dyn Fn(u64, bool) -> u32;

/// Which form each stage takes. See the module's documentation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// The memory the plan fits in.
    pub budget: u64,
    /// The quotient's form.
    pub quotient: Quotient,
    /// Whether the recorded shape stays on the device; else its rows are streamed in pieces
    /// from page-locked host memory for each evaluation.
    pub shape_resident: bool,
    /// Whether the aux assignment stays on the device from the evaluations to the aux MSMs;
    /// else it goes up for each evaluation and once more for the MSMs.
    pub keep_assignment: bool,
    /// Whether the NTT tables stay on the device between proofs.
    pub keep_tables: bool,
    /// The queries whose points stay on the device; the others are streamed.
    pub resident: Queries,
    /// Points per piece of a G1 MSM (the whole query where it is not cut).
    pub piece_g1: u64,
    /// Points per piece of a G2 MSM.
    pub piece_g2: u64,
    /// The largest phase's estimated bytes, resident ones included.
    pub peak: u64,
    /// The model's extra seconds per proof against everything resident (see the module).
    pub cost: f64,
}

impl Plan {
    /// Whether this is the plan of a device that holds everything: points, shape, all four
    /// quotient vectors, no MSM cut.
    pub fn is_all_resident(&self, sizes: &Sizes) -> bool {
        self.quotient == Quotient::Resident
            && self.shape_resident
            && self.keep_assignment
            && self.resident == Queries::ALL
            && self.piece_g1 >= sizes.longest(false)
            && self.piece_g2 >= sizes.longest(true)
    }

    /// Bytes of points kept resident.
    pub fn resident_bytes(&self, sizes: &Sizes) -> u64 {
        Query::ALL
            .iter()
            .filter(|q| self.resident.has(**q))
            .map(|q| sizes.point_bytes(*q))
            .sum()
    }

    /// Bytes of points streamed per proof.
    pub fn streamed_bytes(&self, sizes: &Sizes) -> u64 {
        Query::ALL
            .iter()
            .filter(|q| !self.resident.has(**q))
            .map(|q| sizes.point_bytes(*q))
            .sum()
    }

    /// Points per piece of query `q`'s MSM: the plan's piece size, and for a streamed query
    /// at most [`STREAM_PIECE`] (G1; half as many G2), so that the first piece of each stream,
    /// which no work overlaps, is short.
    pub fn stream_piece(&self, q: Query) -> usize {
        let piece = if q == Query::BG2 {
            self.piece_g2
        } else {
            self.piece_g1
        };
        usize::try_from(capped(q, piece, self.resident)).unwrap_or(usize::MAX)
    }

    /// Points per piece of query `q`'s MSM (of `points` points) where the plan keeps its
    /// points resident but they are streamed after all (evicted to make room, or not fitting
    /// now): the piece of a streamed query, and at most half the query, so that the ring's two
    /// slots take no more than the resident copy the plan counted in their place. A query the
    /// plan streams keeps its [`Plan::stream_piece`].
    pub fn fallback_piece(&self, q: Query, points: u64) -> usize {
        if !self.resident.has(q) {
            return self.stream_piece(q);
        }
        let piece = if q == Query::BG2 {
            self.piece_g2
        } else {
            self.piece_g1
        };
        usize::try_from(fallback(q, piece, points)).unwrap_or(usize::MAX)
    }

    /// The largest phase's estimated bytes where the points of `evicted` (queries the plan
    /// keeps resident) are streamed in their [`Plan::fallback_piece`]s instead: at most
    /// [`Plan::peak`] (unit-tested over cards, sector sizes and every evicted set).
    pub fn peak_after_eviction(
        &self,
        sizes: &Sizes,
        evicted: Queries,
        window_bits: WindowBits<'_>,
    ) -> u64 {
        let form = Form {
            sizes,
            quotient: self.quotient,
            shape_resident: self.shape_resident,
            keep_assignment: self.keep_assignment,
            keep_tables: self.keep_tables,
            resident: self.resident.without(evicted),
            fallen: Queries(self.resident.0 & evicted.0),
            window_bits,
        };
        form.peak(self.piece_g1, self.piece_g2)
    }

    /// Page-locked host bytes the plan needs beside the parameters: the two parked cosets.
    pub fn parked_bytes(&self, sizes: &Sizes) -> u64 {
        match self.quotient {
            Quotient::Parked => 2 * sizes.vector(),
            Quotient::Resident => 0,
        }
    }

    /// A one-line description for logs and `cuzk status`.
    pub fn describe(&self, sizes: &Sizes) -> String {
        format!("{}", Described(self, sizes))
    }
}

struct Described<'a>(&'a Plan, &'a Sizes);

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, s) = (self.0, self.1);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let streamed: Vec<&str> = Query::ALL
            .iter()
            .filter(|q| !p.resident.has(**q))
            .map(|q| q.name())
            .collect();
        write!(
            f,
            "quotient {}, shape {}, assignment {}, points resident {:.1} GiB",
            match p.quotient {
                Quotient::Resident => "resident",
                Quotient::Parked => "parked",
            },
            if p.shape_resident {
                "resident"
            } else {
                "streamed"
            },
            if p.keep_assignment {
                "kept"
            } else {
                "reloaded"
            },
            gib(p.resident_bytes(s)),
        )?;
        if !streamed.is_empty() {
            write!(
                f,
                ", streamed {} ({:.1} GiB)",
                streamed.join(", "),
                gib(p.streamed_bytes(s))
            )?;
        }
        if s.longest(false) > p.piece_g1 || s.longest(true) > p.piece_g2 {
            write!(f, ", pieces of {} / {} points", p.piece_g1, p.piece_g2)?;
        }
        write!(f, ", peak {:.1} of {:.1} GiB", gib(p.peak), gib(p.budget))
    }
}

/// Why no plan fits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the device's memory budget of {have} bytes cannot hold a proof of this parameter set: \
     its smallest form needs about {need} bytes (raise gpu.memory_limit, free the device, or \
     prove this size on a larger card or the CPU)"
)]
pub struct TooSmall {
    /// The budget.
    pub have: u64,
    /// What the smallest form needs.
    pub need: u64,
}

/// The forms [`plan`] tries, fastest first: (quotient, shape resident, keep the assignment,
/// keep the tables).
const FORMS: [(Quotient, bool, bool, bool); 4] = [
    (Quotient::Resident, true, true, true),
    (Quotient::Resident, false, true, true),
    (Quotient::Parked, false, true, false),
    (Quotient::Parked, false, false, false),
];

/// The plan with the least estimated cost whose every phase fits `budget` bytes, for proofs of
/// `sizes`; `window_bits` gives the MSM driver's window width for n points (G2 when true).
pub fn plan(budget: u64, sizes: &Sizes, window_bits: WindowBits<'_>) -> Result<Plan, TooSmall> {
    let mut best: Option<Plan> = None;
    let mut least_need = u64::MAX;
    for &(quotient, shape_resident, keep_assignment, keep_tables) in &FORMS {
        for set in 0..32u8 {
            let resident = Queries(set);
            let form = Form {
                sizes,
                quotient,
                shape_resident,
                keep_assignment,
                keep_tables,
                resident,
                fallen: Queries::NONE,
                window_bits,
            };
            let smallest = form.peak(MIN_PIECE, MIN_PIECE);
            least_need = least_need.min(with_slack(smallest));
            let room = budget - budget * SLACK_PER_MILLE / 1000;
            if smallest > room {
                continue;
            }
            // G1 first (with the smallest G2 pieces), then G2 beside those G1 pieces: the
            // aux MSMs share one stream, so the two sizes meet in one phase.
            let piece_g1 = form.largest_piece(room, false, MIN_PIECE);
            let piece_g2 = form.largest_piece(room, true, piece_g1);
            let candidate = Plan {
                budget,
                quotient,
                shape_resident,
                keep_assignment,
                keep_tables,
                resident,
                piece_g1,
                piece_g2,
                peak: form.peak(piece_g1, piece_g2),
                cost: 0.0,
            };
            let candidate = Plan {
                cost: cost(&candidate, sizes),
                ..candidate
            };
            if best.is_none_or(|b| candidate.cost < b.cost) {
                best = Some(candidate);
            }
        }
    }
    best.ok_or(TooSmall {
        have: budget,
        need: least_need,
    })
}

/// `piece`, or for a query `resident` does not keep, at most its stream cap.
fn capped(q: Query, piece: u64, resident: Queries) -> u64 {
    let cap = match q {
        Query::BG2 => STREAM_PIECE / 2,
        Query::H => STREAM_PIECE_H,
        _ => STREAM_PIECE,
    };
    if resident.has(q) {
        piece
    } else {
        piece.min(cap)
    }
}

/// Points per piece of query `q`'s MSM (pieces of `piece` planned, `points` in all) streamed
/// although its plan keeps it resident: capped as a streamed query's and at most half the
/// query (see [`Plan::fallback_piece`]).
fn fallback(q: Query, piece: u64, points: u64) -> u64 {
    capped(q, piece, Queries::NONE).min(points / 2).max(1)
}

/// The smallest budget whose room ([`SLACK_PER_MILLE`] kept free) holds `peak`.
fn with_slack(peak: u64) -> u64 {
    (peak * 1000).div_ceil(1000 - SLACK_PER_MILLE)
}

/// The model's extra seconds of a plan (see the module).
fn cost(p: &Plan, s: &Sizes) -> f64 {
    let bus = |bytes: u64| bytes as f64 / BUS_BYTES_PER_S;
    let mut t = 0.0;
    if !p.shape_resident {
        t += bus(s.shape);
    }
    if p.quotient == Quotient::Parked {
        t += bus(4 * s.vector());
    }
    if !p.keep_assignment {
        t += bus(3 * s.assignment());
    }
    for q in Query::ALL {
        if !p.resident.has(q) {
            let charge = if q == Query::H { H_STREAM_CHARGE } else { 1.0 };
            t += charge * bus(s.point_bytes(q));
        }
        let pieces = s.points(q).div_ceil(p.stream_piece(q).max(1) as u64).max(1);
        t += PIECE_S * (pieces - 1) as f64;
    }
    t
}

/// One form with one set of resident queries, whose phases' bytes [`Form::peak`] adds up.
struct Form<'a> {
    sizes: &'a Sizes,
    quotient: Quotient,
    shape_resident: bool,
    keep_assignment: bool,
    keep_tables: bool,
    resident: Queries,
    /// Queries the plan keeps resident that are streamed in fallback pieces (not in
    /// `resident`).
    fallen: Queries,
    window_bits: WindowBits<'a>,
}

impl Form<'_> {
    /// The largest piece (at most the longest query, at least [`MIN_PIECE`]) for which every
    /// phase fits `budget`, for G1 or G2 MSMs, the other curve's pieces being of `other`
    /// points (which must fit with the smallest pieces of this curve).
    fn largest_piece(&self, budget: u64, g2: bool, other: u64) -> u64 {
        let longest = self.sizes.longest(g2).max(MIN_PIECE);
        let fits = |piece: u64| {
            let (p1, p2) = if g2 { (other, piece) } else { (piece, other) };
            self.peak(p1, p2) <= budget
        };
        if fits(longest) {
            return longest;
        }
        // Largest multiple of MIN_PIECE that fits (MIN_PIECE itself fits: the caller checked).
        let (mut lo, mut hi) = (1, longest / MIN_PIECE);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid * MIN_PIECE) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo * MIN_PIECE
    }

    /// The largest phase's bytes with MSM pieces of `p1` G1 and `p2` G2 points.
    fn peak(&self, p1: u64, p2: u64) -> u64 {
        let s = self.sizes;
        let (v, x, t) = (s.vector(), s.assignment(), tables_bytes(s.domain));
        let resident: u64 = Query::ALL
            .iter()
            .filter(|q| self.resident.has(**q))
            .map(|q| s.point_bytes(*q))
            .sum();
        let shape_kept = if self.shape_resident { s.shape } else { 0 };
        let shape_now = if self.shape_resident {
            0
        } else {
            (2 * SHAPE_SLOT_BYTES).min(s.shape)
        };
        let x_kept = if self.keep_assignment { x } else { 0 };
        let (t_kept, t_built) = if self.keep_tables { (t, 0) } else { (0, t) };
        // Always there: resident points and shape, and the tables where kept (else they are
        // built for the transforms and dropped after them).
        let base = resident + shape_kept + t_kept;
        let transforms = match self.quotient {
            Quotient::Resident => 4 * v,
            Quotient::Parked => 2 * v,
        };
        let fill = match self.quotient {
            Quotient::Resident => 4 * v,
            Quotient::Parked => v,
        } + x
            + shape_now
            + t_built;
        // A streamed shape's ring stays for all three vectors, over their transforms too.
        let ntt = transforms + x_kept + t_built + shape_now;
        // The tables go once the quotient is done where they are not kept. The aux MSMs run as
        // one stream: the two buffers and the selected scalars' buffer are sized for the
        // largest piece of any of them, beside each one's working buffers and the A and B
        // densities' flags (a byte per aux value each), on the device for the whole stream.
        let h = v + x_kept + self.stream(&[Query::H], p1, p2) + self.work(Query::H, p1, p2);
        let aux = [Query::A, Query::BG1, Query::BG2, Query::L];
        let selected = [Query::A, Query::BG1, Query::BG2]
            .iter()
            .map(|q| self.piece(*q, p1, p2) * FR)
            .max()
            .unwrap_or(0)
            + 2 * s.aux;
        let aux_work = aux.iter().map(|q| self.work(*q, p1, p2)).max().unwrap_or(0);
        let aux = x + self.stream(&aux, p1, p2) + selected + aux_work;
        let phases = [fill, ntt, h, aux];
        base + phases.into_iter().max().unwrap_or(0) + SLACK
    }

    /// Points of one piece of query `q`'s MSM with pieces of `p1` G1 and `p2` G2 points (a
    /// streamed query's capped).
    fn piece(&self, q: Query, p1: u64, p2: u64) -> u64 {
        let piece = if q == Query::BG2 { p2 } else { p1 };
        let n = self.sizes.points(q);
        let piece = if self.fallen.has(q) {
            fallback(q, piece, n)
        } else {
            capped(q, piece, self.resident)
        };
        piece.min(n).max(1)
    }

    /// The working buffers of one piece of query `q`'s MSM.
    fn work(&self, q: Query, p1: u64, p2: u64) -> u64 {
        let n = self.piece(q, p1, p2);
        let g2 = q == Query::BG2;
        msm_work_bytes(g2, n, (self.window_bits)(n, g2))
    }

    /// The two buffers the streamed queries of `qs` go through, sized for their largest piece.
    fn stream(&self, qs: &[Query], p1: u64, p2: u64) -> u64 {
        qs.iter()
            .filter(|q| !self.resident.has(**q))
            .map(|q| 2 * self.piece(*q, p1, p2) * point_size(*q))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;
    const GIB: u64 = 1 << 30;

    /// msm.rs's table, as the driver uses it.
    pub(crate) fn bits(n: u64, g2: bool) -> u32 {
        let curve = if g2 {
            crate::gpu::msm::Curve::G2
        } else {
            crate::gpu::msm::Curve::G1
        };
        crate::gpu::msm::window_bits(n as usize, curve)
    }

    /// A 32 GiB PoRep partition (ANCHORS.md): 130,169,893 aux, A density 99.7 %, B 33.1 M.
    fn porep_32g() -> Sizes {
        Sizes {
            shape: 7_618_000_000,
            ..Sizes::from_queries((1 << 27) - 1, 130_169_893, 129_778_000, 33_112_609)
        }
    }

    /// A 64 GiB partition: the same domain and about the same counts.
    fn porep_64g() -> Sizes {
        Sizes::from_queries((1 << 27) - 1, 130_300_000, 129_900_000, 33_200_000)
    }

    /// A 512 MiB partition (2^23 domain) and a 2 KiB one (2^22).
    fn porep_512m() -> Sizes {
        Sizes::from_queries((1 << 23) - 1, 4_420_837, 4_410_000, 1_130_000)
    }

    pub(crate) fn porep_2k() -> Sizes {
        Sizes::from_queries((1 << 22) - 1, 2_685_673, 2_674_948, 685_522)
    }

    /// Cards as miners have them: the memory a process can allocate on an idle card, about
    /// 93 % of the marketing figure in bytes.
    fn card(gb: u64) -> u64 {
        gb * GB * 93 / 100
    }

    #[test]
    fn the_budget_is_the_free_memory_less_a_margin_or_the_limit() {
        let free = 140_000_000_000;
        assert_eq!(device_budget(free, None), free - MARGIN);
        assert_eq!(device_budget(free, Some(16 * GIB)), 16 * GIB);
        assert_eq!(device_budget(free, Some(200 * GIB)), free - MARGIN);
        assert_eq!(device_budget(100, None), 0);
    }

    /// Every plan of every card and sector size, and every set of its resident queries.
    fn plans_and_evictions() -> Vec<(Sizes, Plan, Queries)> {
        let mut out = Vec::new();
        for sizes in [porep_32g(), porep_64g(), porep_512m(), porep_2k()] {
            for gb in [2, 4, 8, 12, 16, 24, 32, 48, 80, 141] {
                let Ok(p) = plan(card(gb), &sizes, &bits) else {
                    continue;
                };
                for set in 1..32u8 {
                    let evicted = Queries(set);
                    if p.resident.without(evicted) != p.resident {
                        out.push((sizes, p, Queries(p.resident.0 & set)));
                    }
                }
            }
        }
        out
    }

    /// A query the plan keeps resident that is streamed after all (evicted when another
    /// query's upload ran out of memory, or not fitting) goes through a ring no larger than
    /// the copy it replaces, in pieces no larger than planned: the proof's phases stay within
    /// the plan's estimate. With the plan's own piece (the whole query where it is not cut) the
    /// ring's two slots were twice the query: a 2 KiB plan that keeps L went over.
    #[test]
    fn evicted_points_stream_within_the_plan() {
        let cases = plans_and_evictions();
        assert!(cases.len() > 100, "{} cases", cases.len());
        for (s, p, evicted) in cases {
            for q in Query::ALL.into_iter().filter(|q| evicted.has(*q)) {
                let piece = p.fallback_piece(q, s.points(q)) as u64;
                assert!(2 * piece <= s.points(q) + 1, "{q:?}: {piece}");
                assert!(
                    piece <= p.stream_piece(q) as u64,
                    "{q:?}: {}",
                    p.describe(&s)
                );
            }
            let after = p.peak_after_eviction(&s, evicted, &bits);
            assert!(after <= p.peak, "{evicted:?}: {after} > {}", p.describe(&s));
        }
        // The case that ran out: everything resident at 2 KiB, L evicted. Its ring would have
        // been two slots of all 2,685,673 points (515.7 MB) in place of 257.8 MB.
        let s = porep_2k();
        let p = plan(4 * GIB, &s, &bits).unwrap();
        assert!(p.is_all_resident(&s));
        assert_eq!(p.fallback_piece(Query::L, s.aux), 1_342_836);
        assert!(
            p.stream_piece(Query::L) >= 2_685_673,
            "the plan's own piece: the whole query"
        );
    }

    /// A query the plan streams keeps its planned piece when it "falls back".
    #[test]
    fn a_streamed_query_keeps_its_piece() {
        let s = porep_32g();
        let p = plan(card(16), &s, &bits).unwrap();
        assert!(!p.resident.has(Query::L));
        assert_eq!(p.fallback_piece(Query::L, s.aux), p.stream_piece(Query::L));
    }

    /// What a proof may plan for counts what the handle can free and its own kept assignment,
    /// not another proof's (which stays on the device between that proof's turns): 4 GiB held
    /// so lowers the budget by 4 GiB whether the driver's free memory or the ledger's cap binds.
    #[test]
    fn the_available_budget_leaves_out_what_another_proof_keeps() {
        let (cap, x) = (60 * GIB, 4 * GIB);
        // Free memory binds: 40 GiB free, 10 GiB of points and tables held (reclaimable).
        let all = available_budget(40 * GIB, 10 * GIB, 10 * GIB, cap);
        assert_eq!(all, 50 * GIB - MARGIN);
        let kept = available_budget(40 * GIB, 10 * GIB + x, 10 * GIB, cap);
        assert_eq!(
            kept,
            50 * GIB - MARGIN,
            "another proof's 4 GiB are not free either"
        );
        let kept_free = available_budget(40 * GIB - x, 10 * GIB + x, 10 * GIB, cap);
        assert_eq!(
            kept_free,
            all - x,
            "the driver reports them used: they are not counted"
        );
        // The cap binds: the 4 GiB another proof keeps count against it.
        let big = available_budget(100 * GIB, 10 * GIB + x, 10 * GIB, cap);
        assert_eq!(big, cap - x);
        assert_eq!(available_budget(100 * GIB, 10 * GIB, 10 * GIB, cap), cap);
        // Nothing held: the free memory less the margin, at most the cap.
        assert_eq!(available_budget(8 * GIB, 0, 0, cap), 8 * GIB - MARGIN);
        // More claimed reclaimable than held is taken as all of it.
        assert_eq!(
            available_budget(8 * GIB, GIB, 2 * GIB, cap),
            9 * GIB - MARGIN
        );
    }

    /// The planner against what the device measured (docs/benchmarks.md, 2026-12-04, H200, a
    /// 32 GiB partition with no limit): everything resident, 44.1 GiB of points — by hand,
    /// 96 B × (134,217,727 H + 130,169,893 L + 129,778,000 A + 33,112,609 B) + 192 B ×
    /// 33,112,609 B G2 = 47,376,330,912 B — and a device peak of 75.1 GiB. No budget under
    /// that peak may be planned to hold everything, and every budget a few percent above it
    /// must be (an estimate far over it would refuse the 80 GB cards the layout fits).
    #[test]
    fn everything_resident_is_planned_only_where_the_measured_peak_fits() {
        let s = porep_32g();
        let p = plan(card(141), &s, &bits).unwrap();
        assert!(p.is_all_resident(&s));
        assert_eq!(p.resident_bytes(&s), 47_376_330_912);
        let measured = 75.1 * GIB as f64;
        // The smallest budget that keeps everything, to a MiB.
        let (mut lo, mut hi) = (GIB, 200 * GIB);
        while hi - lo > 1 << 20 {
            let mid = lo + (hi - lo) / 2;
            match plan(mid, &s, &bits) {
                Ok(p) if p.is_all_resident(&s) => hi = mid,
                _ => lo = mid,
            }
        }
        let least = hi as f64;
        println!(
            "everything resident from {:.2} GiB (estimate {:.2} GiB)",
            least / GIB as f64,
            p.peak as f64 / GIB as f64
        );
        assert!(
            least >= measured,
            "planned at {least} under the measured {measured}"
        );
        assert!(
            least <= measured * 1.05,
            "{least} far over the measured {measured}"
        );
    }

    #[test]
    fn the_h200_keeps_everything_as_today() {
        let s = porep_32g();
        let p = plan(card(141), &s, &bits).unwrap();
        assert!(p.is_all_resident(&s), "{}", p.describe(&s));
        assert_eq!(p.cost, 0.0);
    }

    #[test]
    fn a_32gib_partition_fits_the_cards_miners_have() {
        let s = porep_32g();
        for gb in [16, 24, 32, 48, 80] {
            let p = plan(card(gb), &s, &bits).unwrap_or_else(|e| panic!("{gb} GB: {e}"));
            println!("{gb} GB: {}", p.describe(&s));
        }
        // 16 GB: nothing but the two transform vectors fits; 24 GB keeps the assignment.
        let p16 = plan(card(16), &s, &bits).unwrap();
        assert_eq!(p16.quotient, Quotient::Parked);
        assert!(!p16.shape_resident);
        let p24 = plan(card(24), &s, &bits).unwrap();
        assert_eq!(p24.quotient, Quotient::Parked);
        assert!(p24.keep_assignment);
        // 80 GB holds the four quotient vectors.
        assert_eq!(
            plan(card(80), &s, &bits).unwrap().quotient,
            Quotient::Resident
        );
    }

    #[test]
    fn cards_of_8_and_12_gb_are_refused_with_what_they_would_need() {
        let e = plan(card(8), &porep_32g(), &bits).unwrap_err();
        assert_eq!(e.have, card(8));
        // Two domain vectors (8 GiB) and the twiddles (2 GiB) at the least.
        assert!(e.need > 10 * GIB, "{e}");
        assert!(e.to_string().contains("gpu.memory_limit"));
        // 12 GB less the driver's share and the margin is just short of it.
        let e = plan(card(12), &porep_32g(), &bits).unwrap_err();
        assert!(e.need < 11 * GIB, "{e}");
        // A 512 MiB partition proves on it.
        assert!(plan(card(8), &porep_512m(), &bits).is_ok());
    }

    /// More memory never costs more: the plans of larger budgets are at least as good.
    #[test]
    fn the_cost_falls_as_the_budget_grows() {
        for sizes in [porep_32g(), porep_512m(), porep_2k()] {
            let mut last = f64::INFINITY;
            let mut budget = 256 << 20;
            while budget < 150 * GIB {
                if let Ok(p) = plan(budget, &sizes, &bits) {
                    assert!(p.cost <= last + 1e-12, "{budget}: {}", p.describe(&sizes));
                    last = p.cost;
                }
                budget = budget * 9 / 8;
            }
            assert_eq!(last, 0.0, "the largest budget keeps everything");
        }
    }

    /// A budget below the smallest form's need fails; one just above it succeeds with every
    /// query streamed and MSMs cut.
    #[test]
    fn the_smallest_form_streams_everything() {
        let s = porep_2k();
        let need = plan(1 << 20, &s, &bits).unwrap_err().need;
        let p = plan(need, &s, &bits).unwrap();
        assert_eq!(p.resident, Queries::NONE);
        assert!(!p.keep_assignment && p.quotient == Quotient::Parked);
        assert!(p.piece_g1 < s.domain, "{}", p.describe(&s));
        assert!(p.peak <= need);
    }

    /// The MSM's working estimate for one case counted by hand from msm.rs's allocations:
    /// 2^20 G1 points at 16-bit windows, 16 windows of 2^15 buckets. The largest phase is the
    /// accumulation: the digits (4 B × 16 windows × 2^20 = 67,108,864), the bucket counts
    /// (4 B × (2^19 + 1) = 2,097,156), the buckets (192 B × 2^19 = 100,663,296) and two chunk
    /// sums' lists (2 × 192 B × (2^24 / 128 + 1) = 50,332,032) and the batch-affine walk's
    /// block products (48 B × (131,073 / 128 + 1) = 49,200): 220,250,548 bytes. The device
    /// measures it in tests/gpu_small.rs (`msm_work_covers_the_drivers_buffers`).
    #[test]
    fn msm_work_counts_the_drivers_buffers() {
        assert_eq!(msm_work_bytes(false, 1 << 20, 16), 220_250_548);
        assert!(msm_work_bytes(true, 1 << 20, 16) > msm_work_bytes(false, 1 << 20, 16));
        assert!(msm_work_bytes(false, 2 << 20, 16) > msm_work_bytes(false, 1 << 20, 16));
    }

    #[test]
    fn the_description_names_the_forms() {
        let s = porep_32g();
        let d = plan(card(16), &s, &bits).unwrap().describe(&s);
        assert!(d.contains("quotient parked"), "{d}");
        assert!(d.contains("streamed"), "{d}");
        let d = plan(card(141), &s, &bits).unwrap().describe(&s);
        assert!(!d.contains("streamed"), "{d}");
    }
}
