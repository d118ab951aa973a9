//! The kernels' parallel loops ([`for_each`], [`map`]) and the spinning team that runs them
//! during a decode step ([`with_spinning_workers`]).
//!
//! A decode step is about 140 short parallel loops (five a layer: the q/k/v(+gate) projections,
//! attention, o_proj, gate/up, down), each well under a millisecond. Between two rayon loops the
//! idle workers go to sleep, and waking them (a futex and an inter-processor interrupt, slow in
//! a VM) left threads idle for a noticeable share of a decode step. Inside
//! [`with_spinning_workers`] the pool's other workers spin, waiting for the loops that the
//! calling thread posts; outside it the loops are plain rayon loops (prefill's loops are long
//! enough for rayon's sleeping to cost nothing).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;

/// Runs `f(i)` for every `i < n`, in parallel.
pub fn for_each(n: usize, f: impl Fn(usize) + Sync) {
    match TEAM.with(Cell::get) {
        Some(team) if n > 1 => team.run(n, &f),
        _ => (0..n).into_par_iter().for_each(&f),
    }
}

/// Runs `f(i, &mut items[i])` for every item, in parallel (each item borrowed by one call).
pub fn for_each_mut<T: Send>(items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
    match TEAM.with(Cell::get) {
        Some(team) if items.len() > 1 => {
            let base = ItemsPtr(items.as_mut_ptr());
            team.run(items.len(), &|i| {
                // SAFETY: `i < items.len()`, and `Team::run` runs each index exactly once (its
                // claim word hands an index to one thread), so no two calls share an item; the
                // slice stays borrowed (by this function) until every index has finished.
                let item = unsafe { &mut *base.at(i) };
                f(i, item)
            });
        }
        _ => items
            .par_iter_mut()
            .enumerate()
            .for_each(|(i, item)| f(i, item)),
    }
}

/// The start of the slice [`for_each_mut`] hands out, shared by the threads of its loop.
struct ItemsPtr<T>(*mut T);

impl<T> ItemsPtr<T> {
    /// A method (not the field) so that closures capture the whole `Sync` wrapper.
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

// SAFETY: the pointer is only used to reach distinct items from distinct threads (see
// `for_each_mut`), which is what `&mut [T]` with `T: Send` allows (as `par_iter_mut` does).
unsafe impl<T: Send> Sync for ItemsPtr<T> {}

/// `[f(0), .., f(n - 1)]`, computed in parallel.
pub fn map<T: Send + Sync>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    match TEAM.with(Cell::get) {
        Some(team) if n > 1 => {
            let slots: Vec<OnceLock<T>> = (0..n).map(|_| OnceLock::new()).collect();
            team.run(n, &|i| {
                let _ = slots[i].set(f(i));
            });
            slots
                .into_iter()
                .map(|slot| slot.into_inner().expect("every index ran"))
                .collect()
        }
        _ => (0..n).into_par_iter().map(&f).collect(),
    }
}

/// Runs `f` on a worker of the current rayon pool while the pool's other workers spin, waiting
/// for the [`for_each`] and [`map`] loops that `f` runs (on this thread, not nested in a loop).
/// For a stretch of short loops with little serial work between them: one decode step.
pub fn with_spinning_workers<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let helpers = rayon::current_num_threads().saturating_sub(1);
    if helpers == 0 || TEAM.with(Cell::get).is_some() {
        return f();
    }
    let team = Team::new();
    // `rayon::join` runs on a worker of the pool (the caller's thread may be outside it), so
    // the leader and the helpers are the pool's threads, as many as it has. Its jobs live on
    // the stack (`rayon::scope` would box each spawned helper: a decode step allocates nothing).
    lead_with_helpers(&team, helpers, f)
}

/// Runs `f` as `team`'s leader beside `helpers` jobs of `team.help()` offered to the pool.
fn lead_with_helpers<R: Send>(team: &Team, helpers: usize, f: impl FnOnce() -> R + Send) -> R {
    if helpers == 0 {
        // Dropped at the end of `f`, before the joins above wait for their helpers.
        let _leading = Leading::start(team);
        return f();
    }
    rayon::join(|| lead_with_helpers(team, helpers - 1, f), || team.help()).0
}

thread_local! {
    /// The team this thread leads, while it is free to post a loop.
    static TEAM: Cell<Option<&'static Team>> = const { Cell::new(None) };
    /// This thread runs [`Team::help`] (perhaps deep inside it, in a nested rayon wait).
    static HELPING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as `team`'s leader; on drop (also when `f` panics) lets the helpers go.
///
/// Why the `&'static Team` in [`TEAM`] never outlives the team:
/// - The team is a local of [`with_spinning_workers`]. The guard is made inside the innermost
///   `rayon::join` of [`lead_with_helpers`] and dropped at the end of `f`, on return and on
///   unwind alike, so before the joins (which also wait for every helper) return and the team
///   is dropped.
/// - Only the leader's thread holds the reference, and only while the guard lives: `drop`
///   clears it, and [`Team::run`] (reached only through it, on this thread) takes it out for the
///   loop and puts it back before returning or re-raising a body's panic.
/// - No one copies it out: `for_each` and `map` use it for the duration of one loop, and the
///   helpers borrow the team through the scope, not through [`TEAM`].
/// - A loop's body pointer is valid until `done == n`, which the leader waits for; a body that
///   panics is caught and still counted, so the wait ends.
///
/// `a_dangling_team_is_never_left_behind` runs many short teams whose bodies and leaders panic
/// and checks that no reference survives one.
struct Leading<'t>(&'t Team);

impl<'t> Leading<'t> {
    fn start(team: &'t Team) -> Self {
        // SAFETY: the reference is removed in `drop`, before `team` (owned by the caller of
        // `with_spinning_workers`, which outlives this guard) goes away (see above).
        let team_static: &'static Team = unsafe { &*(team as *const Team) };
        TEAM.with(|t| t.set(Some(team_static)));
        team.leader
            .set(std::thread::current().id())
            .expect("one leader a team");
        Leading(team)
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        TEAM.with(|t| t.set(None));
        self.0.stop.store(true, Ordering::Release);
    }
}

/// A loop's body, on the leader's stack for as long as the loop runs.
type Body<'a> = &'a (dyn Fn(usize) + Sync);

/// Loops posted to a claim word: `loop number (32 bits) | n (16 bits) | next index (16 bits)`.
/// A thread takes index `i` of the running loop with one compare-exchange of the whole word, so
/// a claim that succeeds proves that the loop it read is still the running one.
const FIELD_BITS: u32 = 16;
const FIELD_MAX: usize = (1 << FIELD_BITS) - 1;

fn pack(loop_number: u64, n: usize, next: usize) -> u64 {
    (loop_number << (2 * FIELD_BITS)) | ((n as u64) << FIELD_BITS) | next as u64
}

fn unpack(word: u64) -> (usize, usize) {
    let n = (word >> FIELD_BITS) as usize & FIELD_MAX;
    let next = word as usize & FIELD_MAX;
    (n, next)
}

/// Helper spins without work before they also yield their core to the OS scheduler (a few
/// milliseconds: longer than the serial work between two loops of a decode step).
const SPINS_BEFORE_YIELDING: u32 = 1 << 16;

struct Team {
    claim: AtomicU64,
    /// The running loop's body (a `*const Body`), valid while an index is unfinished.
    body: AtomicPtr<()>,
    /// Indices of the running loop finished; the leader waits for all of them.
    done: AtomicUsize,
    /// Loops posted so far (the leader's count; the claim word holds its low 32 bits).
    loops: AtomicU64,
    stop: AtomicBool,
    leader: OnceLock<std::thread::ThreadId>,
    /// A body panicked on some thread: the leader raises it again once the loop is over.
    panicked: AtomicBool,
}

impl Team {
    fn new() -> Self {
        Team {
            claim: AtomicU64::new(0),
            body: AtomicPtr::new(std::ptr::null_mut()),
            done: AtomicUsize::new(0),
            loops: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            leader: OnceLock::new(),
            panicked: AtomicBool::new(false),
        }
    }

    /// The leader's side: posts `body` for `0..n`, works on it too, and returns when every index
    /// has finished. Loops longer than the claim word holds run as loops over index ranges.
    fn run(&self, n: usize, body: Body<'_>) {
        if n > FIELD_MAX {
            let per = n.div_ceil(FIELD_MAX);
            let ranges = &|r: usize| (r * per..((r + 1) * per).min(n)).for_each(body);
            return self.run(n.div_ceil(per), ranges);
        }
        // A body that calls for_each again runs that inner loop with rayon, not on this team.
        TEAM.with(|t| t.set(None));
        let loop_number = self.loops.fetch_add(1, Ordering::Relaxed) + 1;
        self.done.store(0, Ordering::Relaxed);
        self.body
            .store(&body as *const Body<'_> as *mut (), Ordering::Relaxed);
        // Release: a thread whose claim reads this word also sees `body` and `done` above.
        self.claim.store(pack(loop_number, n, 0), Ordering::Release);
        while self.run_one() {}
        while self.done.load(Ordering::Acquire) < n {
            std::hint::spin_loop();
        }
        // SAFETY: as in `Leading::start` (this thread leads `self` until the guard drops).
        TEAM.with(|t| t.set(Some(unsafe { &*(self as *const Team) })));
        if self.panicked.swap(false, Ordering::Relaxed) {
            resume_unwind(Box::new("a parallel loop's body panicked"));
        }
    }

    /// Claims and runs one index of the running loop; false when none is left to claim.
    fn run_one(&self) -> bool {
        loop {
            let word = self.claim.load(Ordering::Acquire);
            let (n, next) = unpack(word);
            if next >= n {
                return false;
            }
            if self
                .claim
                .compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // SAFETY: index `next` of the running loop is ours, and the leader keeps the loop
            // (and `body` on its stack) alive until it is done.
            let body = unsafe { *(self.body.load(Ordering::Relaxed) as *const Body<'_>) };
            if catch_unwind(AssertUnwindSafe(|| body(next))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            self.done.fetch_add(1, Ordering::Release);
            return true;
        }
    }

    /// A helper's side: runs indices of posted loops until the leader stops the team.
    ///
    /// A thread that waits inside rayon (a nested loop of a body) runs other queued rayon jobs,
    /// and a not yet started `help` may be one of them. On the leader, or on a thread already
    /// helping, it returns at once: it would spin there, and the loop or the `stop` it waits
    /// for could never come.
    fn help(&self) {
        let leader = self.leader.get() == Some(&std::thread::current().id());
        if leader || HELPING.with(|h| h.replace(true)) {
            return;
        }
        let mut idle: u32 = 0;
        while !self.stop.load(Ordering::Acquire) {
            if self.run_one() {
                idle = 0;
            } else if idle < SPINS_BEFORE_YIELDING {
                idle += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        HELPING.with(|h| h.set(false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn every_index_runs_once_inside_and_outside_a_team() {
        for threads in [1, 2, 3] {
            pool(threads).install(|| {
                for spinning in [false, true] {
                    let run = || {
                        for n in [0, 1, 2, 7, 1000, FIELD_MAX + 5] {
                            let counts: Vec<AtomicUsize> =
                                (0..n).map(|_| AtomicUsize::new(0)).collect();
                            for_each(n, |i| {
                                counts[i].fetch_add(1, Ordering::Relaxed);
                            });
                            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
                            assert_eq!(
                                map(n, |i| 3 * i),
                                (0..n).map(|i| 3 * i).collect::<Vec<_>>()
                            );
                            let mut items = vec![0usize; n];
                            for_each_mut(&mut items, |i, item| *item += i + 1);
                            assert!(items.iter().enumerate().all(|(i, &x)| x == i + 1));
                        }
                    };
                    if spinning {
                        with_spinning_workers(run);
                    } else {
                        run();
                    }
                }
            });
        }
    }

    #[test]
    fn nested_loops_and_helper_threads_do_the_work() {
        pool(2).install(|| {
            with_spinning_workers(|| {
                let threads = std::sync::Mutex::new(std::collections::HashSet::new());
                let joined = || threads.lock().unwrap().len() == 2;
                // Bodies wait (up to a deadline) for the helper to take one: how soon it does
                // depends on the scheduler, and a fast leader could otherwise run them all.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                for _ in 0..200 {
                    for_each(64, |i| {
                        threads.lock().unwrap().insert(std::thread::current().id());
                        // An inner loop from a body runs too (with rayon, not on the team).
                        let inner = map(3, |j| i + j);
                        assert_eq!(inner, vec![i, i + 1, i + 2]);
                        while !joined() && std::time::Instant::now() < deadline {
                            std::thread::yield_now();
                        }
                    });
                }
                assert!(joined(), "the helper thread ran bodies within 20 s");
            })
        });
    }

    #[test]
    fn a_panicking_body_reaches_the_leader_after_the_loop() {
        pool(2).install(|| {
            let finished = AtomicUsize::new(0);
            let result = catch_unwind(AssertUnwindSafe(|| {
                with_spinning_workers(|| {
                    for_each(100, |i| {
                        if i == 37 {
                            panic!("body 37");
                        }
                        finished.fetch_add(1, Ordering::Relaxed);
                    })
                })
            }));
            assert!(result.is_err());
            assert_eq!(finished.load(Ordering::Relaxed), 99);
            // The pool is still usable afterwards.
            with_spinning_workers(|| for_each(10, |_| {}));
        });
    }

    /// Many short teams, some of whose bodies or leaders panic: after each, the leading thread
    /// holds no team (a later loop would otherwise run on a freed one) and is no helper.
    #[test]
    fn a_dangling_team_is_never_left_behind() {
        pool(2).install(|| {
            for round in 0..300usize {
                let body_panics = round % 11 < 8;
                let leader_panics = round.is_multiple_of(3);
                let result = catch_unwind(AssertUnwindSafe(|| {
                    with_spinning_workers(|| {
                        for_each(8, |i| assert!(i != round % 11, "body {i} of round {round}"));
                        assert!(!leader_panics, "leader of round {round}");
                    })
                }));
                assert_eq!(
                    result.is_err(),
                    body_panics || leader_panics,
                    "round {round}"
                );
                assert!(
                    TEAM.with(Cell::get).is_none(),
                    "round {round} left its team"
                );
                assert!(!HELPING.with(Cell::get), "round {round}");
                for_each(4, |_| {});
            }
        });
    }
}
