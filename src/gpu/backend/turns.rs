//! Callers taking turns on the device: [`Shared`] holds the device's [`State`] behind a lock
//! and a queue of turns in which urgent callers ([`crate::prover::urgency`]) go first, and a
//! [`DeviceGuard`] is one turn. One device stream runs one call at a time, so a turn is the
//! way to the state for a device call. [`SetGuard`], a prepared set's claim on the device,
//! lives here too: it holds the shared device, and when dropped frees its points under the
//! state's lock without waiting for a turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::critical::{turn_work, TurnBytes};
use super::residency::State;
use crate::gpu::device::{DeviceInfo, Gpu, Ledger};
use crate::gpu::GpuError;
use crate::prover::DevicePauses;

/// The device, shared by the backend and the sets prepared on it.
pub(super) struct Shared {
    pub(super) info: DeviceInfo,
    /// The device's memory ledger, read without the lock (Status, metrics).
    pub(super) ledger: Arc<Ledger>,
    state: Mutex<State>,
    /// Whose turn on the device is next: urgent callers first ([`crate::prover::urgency`]).
    turn: Mutex<Turn>,
    turn_changed: Condvar,
    /// Turns let go part way through a call, by [`Pause`].
    pauses: [AtomicU64; Pause::COUNT],
    /// Of those, the ones let go for an urgent proof announced but not yet arrived.
    pauses_ahead: AtomicU64,
}

/// The device's turn-taking: whether a call holds it, how many urgent callers wait, and how
/// many callers that let it go part way through a call wait to go on.
#[derive(Default)]
struct Turn {
    busy: bool,
    urgent_waiting: usize,
    resuming: usize,
}

/// Where a caller stands in the queue for a turn: urgent callers first, then callers going on
/// with a call they paused for them (so that its partial state on the device is used up
/// before another call's joins it), then new calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rank {
    Urgent,
    Resuming,
    New,
}

/// Where a call let the device go to an urgent caller ([`Shared::yield_to_urgent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pause {
    /// After the assignment's upload.
    Assignment,
    /// Before one of the quotient's transforms to the coset (the first after A, B and C are
    /// evaluated).
    Quotient,
    /// Between the quotient and the H MSM.
    BeforeH,
    /// Before or between the pieces of an MSM's bucket sums.
    MsmPiece,
    /// Before one of the aux MSMs.
    AuxMsm,
}

impl Pause {
    const COUNT: usize = 5;
    const ALL: [Pause; Pause::COUNT] = [
        Pause::Assignment,
        Pause::Quotient,
        Pause::BeforeH,
        Pause::MsmPiece,
        Pause::AuxMsm,
    ];
}

/// A turn on the device: the state, and the turn released for the next caller on drop.
pub(in crate::gpu) struct DeviceGuard<'a> {
    state: MutexGuard<'a, State>,
    shared: &'a Shared,
    /// An urgent caller's turn: the working memory it took is noted when it ends.
    urgent: bool,
    /// The state's device bytes when the turn began ([`State::kept_bytes`]).
    state_start: u64,
}

impl std::ops::Deref for DeviceGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for DeviceGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for DeviceGuard<'_> {
    fn drop(&mut self) {
        if self.urgent {
            // The turn's working memory (`turn_work`): room other callers' plans and pause
            // points keep for the next urgent turn (its points and tables stay; see
            // `Critical`).
            let (start, peak, end) = self.shared.ledger.turn_bytes();
            let work = turn_work(TurnBytes {
                start,
                peak,
                end,
                state_start: self.state_start,
                state_end: self.state.kept_bytes(),
            });
            self.state.note_critical_work(work);
        }
        self.shared.end_turn();
    }
}

/// A set's claim on the device: its id, under which its points are resident, and their
/// bytes. Dropping it frees the points.
pub(super) struct SetGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) id: u64,
    pub(super) bytes: Arc<AtomicU64>,
}

impl SetGuard {
    pub(super) fn new(shared: &Arc<Shared>) -> Result<Self, GpuError> {
        let mut s = shared.lock()?;
        let (id, bytes) = s.open_set();
        Ok(SetGuard {
            shared: shared.clone(),
            id,
            bytes,
        })
    }
}

impl Drop for SetGuard {
    fn drop(&mut self) {
        // A panic in an earlier device call poisons the lock but leaves the map usable, and the
        // points must go either way.
        let mut s = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        s.close_set(self.id);
    }
}

impl Shared {
    /// The device `gpu`, nothing resident, no one's turn.
    pub(super) fn new(gpu: Gpu) -> Self {
        let info = gpu.info.clone();
        let ledger = gpu.ledger();
        Shared {
            info,
            ledger,
            state: Mutex::new(State::new(gpu)),
            turn: Mutex::new(Turn::default()),
            turn_changed: Condvar::new(),
            pauses: Default::default(),
            pauses_ahead: AtomicU64::new(0),
        }
    }

    /// The pauses counted so far.
    pub(super) fn pauses(&self) -> DevicePauses {
        let n = |p: Pause| self.pauses[p as usize].load(Ordering::Relaxed);
        let [assignment, quotient, before_h, msm_piece, aux_msm] = Pause::ALL.map(n);
        DevicePauses {
            assignment,
            quotient,
            before_h,
            msm_piece,
            aux_msm,
            ahead: self.pauses_ahead.load(Ordering::Relaxed),
        }
    }

    /// The state without taking a turn, for reading what needs no device call (its context):
    /// a panic in an earlier device call poisons the lock but leaves the state usable.
    pub(super) fn state_outside_turn(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a turn on the device (urgent callers take the next turn ahead of the
    /// others), then for its state.
    pub(super) fn lock(&self) -> Result<DeviceGuard<'_>, GpuError> {
        let rank = match crate::prover::urgency::is_urgent() {
            true => Rank::Urgent,
            false => Rank::New,
        };
        self.lock_as(rank)
    }

    /// [`Shared::lock`] for a caller of rank `rank`.
    fn lock_as(&self, rank: Rank) -> Result<DeviceGuard<'_>, GpuError> {
        let urgent = rank == Rank::Urgent;
        {
            let mut t = self.turn.lock().unwrap_or_else(|p| p.into_inner());
            t.urgent_waiting += usize::from(urgent);
            t.resuming += usize::from(rank == Rank::Resuming);
            loop {
                match next_move(&t, rank, urgent_near(Instant::now())) {
                    Move::Wait => {
                        t = self.turn_changed.wait(t).unwrap_or_else(|p| p.into_inner());
                    }
                    // An urgent proof between its device calls, or about to arrive: its end
                    // or its arrival wakes nobody, so look again shortly.
                    Move::LookAgain => {
                        t = self
                            .turn_changed
                            .wait_timeout(t, Duration::from_millis(1))
                            .map(|(t, _)| t)
                            .unwrap_or_else(|p| p.into_inner().0);
                    }
                    Move::Take => break,
                }
            }
            t.urgent_waiting -= usize::from(urgent);
            t.resuming -= usize::from(rank == Rank::Resuming);
            t.busy = true;
        }
        match self.state.lock() {
            Ok(state) => {
                self.ledger.begin_turn();
                let state_start = state.kept_bytes();
                let guard = DeviceGuard {
                    state,
                    shared: self,
                    urgent,
                    state_start,
                };
                // Whatever this thread drops on the device from here on is freed in the
                // device's context (see `Gpu::bind`).
                guard.gpu.bind()?;
                Ok(guard)
            }
            Err(_) => {
                self.end_turn();
                Err(GpuError::Cuda {
                    context: "lock",
                    message: "a previous GPU call panicked".into(),
                })
            }
        }
    }

    fn end_turn(&self) {
        self.turn.lock().unwrap_or_else(|p| p.into_inner()).busy = false;
        self.turn_changed.notify_all();
    }

    /// `s` again, after the urgent callers waiting for the device, between their device
    /// calls or announced as about to arrive (if any) had their turns; the caller goes on
    /// before any new call (counted at `at`).
    pub(super) fn yield_to_urgent<'s>(
        &'s self,
        s: DeviceGuard<'s>,
        at: Pause,
    ) -> Result<DeviceGuard<'s>, GpuError> {
        let Some(why) = self.pause_for() else {
            return Ok(s);
        };
        self.pauses[at as usize].fetch_add(1, Ordering::Relaxed);
        if why == PauseFor::Expected {
            self.pauses_ahead.fetch_add(1, Ordering::Relaxed);
        }
        drop(s);
        self.lock_as(match crate::prover::urgency::is_urgent() {
            true => Rank::Urgent,
            false => Rank::Resuming,
        })
    }

    /// Whether the calling thread, holding the turn, would let it go at a pause point now
    /// ([`Shared::yield_to_urgent`]'s answer): asked between the pieces of a stream, so that
    /// it stops only where the device would be let go. Takes nothing but the turn's lock, for
    /// a moment.
    pub(super) fn would_pause(&self) -> bool {
        self.pause_for().is_some()
    }

    /// Why the calling thread, holding the turn, would let it go at a pause point now.
    fn pause_for(&self) -> Option<PauseFor> {
        use crate::prover::urgency::{any_urgent, expected_soon, is_urgent};
        let waiting = self
            .turn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .urgent_waiting;
        let urgent = Urgent {
            waiting,
            in_progress: any_urgent(),
            expected: expected_soon(Instant::now()),
        };
        pauses_for(urgent, is_urgent())
    }
}

/// A turn on the device held by a call that lets it go part way through to urgent callers
/// ([`Held::pause`]): the call reaches the state through [`Held::state`] each time, since a
/// pause gives the state to another caller, who may evict what the call read from it before
/// (resident points, tables, shapes). What the call took out of the state or made itself
/// stays with it meanwhile.
pub(super) struct Held<'s> {
    shared: &'s Shared,
    /// The turn; `None` once a pause lost it (the lock could not be had again).
    guard: Option<DeviceGuard<'s>>,
    /// Whether this call's large allocations settle the pool first ([`Gpu::set_tight`]): its
    /// own setting, not the one of a caller it lets go first.
    tight: bool,
    /// Whether its pause points let the device go at all ([`Held::set_lets_go`]).
    lets_go: bool,
}

impl<'s> Held<'s> {
    /// The turn `guard`, held by a call that may pause.
    pub(super) fn new(guard: DeviceGuard<'s>) -> Self {
        Held {
            shared: guard.shared,
            guard: Some(guard),
            tight: false,
            lets_go: true,
        }
    }

    /// Sets whether this call's pause points let the device go: a call whose plan kept no
    /// room for an urgent caller's working buffers (none measured yet) holds its turn to the
    /// end, as an urgent caller given the device in the middle of its phases could find no
    /// memory for them.
    pub(super) fn set_lets_go(&mut self, lets_go: bool) {
        self.lets_go = lets_go;
    }

    /// Whether its pause points let the device go at all: where not, the pieces of a stream
    /// need not stop to ask ([`Shared::would_pause`]).
    pub(super) fn lets_go(&self) -> bool {
        self.lets_go
    }

    /// The device shared, for asking [`Shared::would_pause`] (whether [`Held::pause`] would
    /// let the device go now) from a closure that runs while the state is borrowed: between
    /// the pieces of a stream.
    pub(super) fn shared(&self) -> &'s Shared {
        self.shared
    }

    /// The device's state, for as long as the turn is held; an error where a pause lost it.
    pub(super) fn state(&mut self) -> Result<&mut State, GpuError> {
        match self.guard.as_mut() {
            Some(guard) => Ok(&mut **guard),
            None => Err(lost_turn()),
        }
    }

    /// Sets whether this call's large allocations settle the pool first, for the device now
    /// and again after each pause.
    pub(super) fn set_tight(&mut self, tight: bool) -> Result<(), GpuError> {
        self.state()?.gpu.set_tight(tight);
        self.tight = tight;
        Ok(())
    }

    /// A pause point: the device synchronized (so that the question is asked when the work
    /// before is done, and an urgent caller's work does not queue behind it), then let go to
    /// the urgent callers waiting, if any ([`Shared::yield_to_urgent`] decides, and counts the
    /// pause at `at`), and taken back before any new call. Where the lock cannot be had
    /// again, the turn is lost: this and every later [`Held::state`] return the error.
    pub(super) fn pause(&mut self, at: Pause) -> Result<(), GpuError> {
        if !self.lets_go {
            return self.state().map(|_| ());
        }
        self.state()?.gpu.sync()?;
        // The driver is asked only where the device would be let go.
        if self.shared.would_pause() && !self.room_for_urgent()? {
            return Ok(());
        }
        let Some(guard) = self.guard.take() else {
            return Err(lost_turn());
        };
        // The caller going first allocates as its own plan says, not as this one's.
        if self.tight {
            guard.gpu.set_tight(false);
        }
        let guard = self.shared.yield_to_urgent(guard, at)?;
        if self.tight {
            guard.gpu.set_tight(true);
        }
        self.guard = Some(guard);
        Ok(())
    }

    /// Whether the device has free now, beside what this call holds at its pause point, the
    /// most working memory an urgent turn has taken: a call that holds most of a small card
    /// lets go only where its phase leaves that much, so that the urgent caller let in finds
    /// room for its buffers.
    fn room_for_urgent(&mut self) -> Result<bool, GpuError> {
        let s = self.state()?;
        let reserve = s.critical_reserve();
        let held = s.gpu.memory();
        let (free, _) = s.gpu.mem_info()?;
        Ok(room_for(reserve, held.budget, held.used, free as u64))
    }

    /// The turn as a plain guard again (its tight setting left as it is); an error where a
    /// pause lost it.
    pub(super) fn into_guard(mut self) -> Result<DeviceGuard<'s>, GpuError> {
        self.guard.take().ok_or_else(lost_turn)
    }
}

/// The error of a call whose turn a pause lost (the pause itself returned why: a GPU call
/// that panicked meanwhile, or a context that could not be bound again).
fn lost_turn() -> GpuError {
    GpuError::Cuda {
        context: "pause",
        message: "the device's turn was lost in a pause and not taken back".into(),
    }
}

/// Whether `reserve` bytes (an urgent turn's working memory) are free: under the ledger's
/// `budget` beside the `used` bytes it counts, and in the driver's `free` count less the
/// margin the plans keep. No room where no urgent turn was measured.
pub(super) fn room_for(reserve: u64, budget: u64, used: u64, free: u64) -> bool {
    let room = budget
        .saturating_sub(used)
        .min(free.saturating_sub(crate::gpu::plan::MARGIN));
    reserve > 0 && room >= reserve
}

/// Whether an urgent proof is in progress or announced as about to arrive
/// ([`crate::prover::urgency::expected_soon`]) at `now`: other callers keep off the device.
fn urgent_near(now: Instant) -> bool {
    use crate::prover::urgency::{any_urgent, expected_soon};
    any_urgent() || expected_soon(now)
}

/// The urgent work a caller at a pause point sees.
#[derive(Clone, Copy, Debug, Default)]
struct Urgent {
    /// Urgent callers waiting for the turn.
    waiting: usize,
    /// An urgent proof in progress anywhere (between its device calls, say).
    in_progress: bool,
    /// An urgent proof announced as about to arrive on the device.
    expected: bool,
}

/// Why a caller at a pause point lets the device go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PauseFor {
    /// An urgent caller waits for the turn, or an urgent proof is between its calls.
    Urgent,
    /// An urgent proof is about to arrive: let go now, so that it finds the device free
    /// rather than waiting for the next point.
    Expected,
}

/// What a caller waiting for a turn does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Move {
    /// Takes the turn.
    Take,
    /// Waits until a turn ends.
    Wait,
    /// Looks again shortly: an urgent proof is between its device calls, and its end wakes
    /// nobody.
    LookAgain,
}

/// A caller of `rank` facing the turn `t`, while `urgent_near` says whether an urgent proof
/// is in progress anywhere or about to arrive ([`urgent_near`]): urgent callers take any free
/// turn; a caller going on after a pause waits for urgent callers waiting; a new call for
/// those and for paused callers; and neither of the two takes a turn while an urgent proof is
/// near.
fn next_move(t: &Turn, rank: Rank, urgent_near: bool) -> Move {
    let ahead = match rank {
        Rank::Urgent => false,
        Rank::Resuming => t.urgent_waiting > 0,
        Rank::New => t.urgent_waiting > 0 || t.resuming > 0,
    };
    if t.busy || ahead {
        Move::Wait
    } else if rank != Rank::Urgent && urgent_near {
        Move::LookAgain
    } else {
        Move::Take
    }
}

/// Whether and why a caller at a pause point lets the device go: for an urgent caller waiting
/// for it, and, unless the caller is urgent itself, for an urgent proof between its calls or
/// about to arrive (an urgent caller makes way only for another one waiting, not for one
/// between its calls, itself say).
fn pauses_for(u: Urgent, caller_urgent: bool) -> Option<PauseFor> {
    if u.waiting > 0 || (!caller_urgent && u.in_progress) {
        Some(PauseFor::Urgent)
    } else if !caller_urgent && u.expected {
        Some(PauseFor::Expected)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(busy: bool, urgent_waiting: usize, resuming: usize) -> Turn {
        Turn {
            busy,
            urgent_waiting,
            resuming,
        }
    }

    /// Room for an urgent turn: none before one was measured; where measured, as much as the
    /// ledger leaves under its budget and the driver's count less the margin, whichever is
    /// less.
    #[test]
    fn room_for_an_urgent_turn_is_the_least_of_the_ledger_and_the_driver() {
        let m = crate::gpu::plan::MARGIN;
        assert!(!room_for(0, 1000, 0, u64::MAX), "nothing measured");
        assert!(room_for(34, 910, 876, u64::MAX));
        assert!(!room_for(35, 910, 876, u64::MAX), "a byte short");
        assert!(!room_for(100, 1 << 40, 0, m + 99), "the driver has less");
        assert!(room_for(100, 1 << 40, 0, m + 100));
        assert!(!room_for(1, 1 << 40, 0, 0));
    }

    #[test]
    fn urgent_callers_go_first_then_paused_ones_then_new_ones() {
        use Move::*;
        use Rank::*;
        // (turn, urgent proof in progress) → what Urgent, Resuming and New callers do.
        let cases = [
            (turn(false, 0, 0), false, [Take, Take, Take]),
            (turn(true, 0, 0), false, [Wait, Wait, Wait]),
            (turn(false, 1, 0), true, [Take, Wait, Wait]),
            (turn(false, 0, 1), false, [Take, Take, Wait]),
            (turn(false, 0, 0), true, [Take, LookAgain, LookAgain]),
            (turn(false, 0, 2), true, [Take, LookAgain, Wait]),
            (turn(true, 3, 2), true, [Wait, Wait, Wait]),
        ];
        for (t, in_progress, want) in cases {
            let got = [Urgent, Resuming, New].map(|r| next_move(&t, r, in_progress));
            assert_eq!(
                got, want,
                "busy {} urgent waiting {} resuming {} in progress {in_progress}",
                t.busy, t.urgent_waiting, t.resuming
            );
        }
    }

    #[test]
    fn a_caller_pauses_for_urgent_work_but_an_urgent_one_only_for_another_waiting() {
        use PauseFor::*;
        // (urgent callers waiting, an urgent proof in progress, one expected, the caller
        // urgent) → pauses, and why
        for (waiting, in_progress, expected, caller_urgent, want) in [
            (0, false, false, false, None),
            (1, true, false, false, Some(Urgent)),
            (0, true, false, false, Some(Urgent)),
            (0, true, false, true, None),
            (1, true, false, true, Some(Urgent)),
            (0, false, true, false, Some(Expected)),
            (0, true, true, false, Some(Urgent)),
            (1, false, true, false, Some(Urgent)),
            (0, false, true, true, None),
        ] {
            let u = super::Urgent {
                waiting,
                in_progress,
                expected,
            };
            assert_eq!(
                pauses_for(u, caller_urgent),
                want,
                "{u:?}, caller urgent {caller_urgent}"
            );
        }
    }
}
