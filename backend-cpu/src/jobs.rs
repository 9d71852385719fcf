//! Jobs handed out to threads as they ask: the calling thread and
//! `threads - 1` threads of the pool take the next job from one queue until it
//! is empty, so a thread that starts late (a sleeping vCPU took up to 4 ms
//! to wake on the 2-core VM) takes fewer jobs instead of its fixed share,
//! and the caller works instead of sleeping while the pool wakes. The
//! launch still ends only once every pool thread asked for has started
//! (rayon's scope waits for it), though not for work it did not take.
//! Where the pool cannot start its threads, every job runs on the caller.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Runs `work` on every job, first to last, on one thread per state in
/// `states` (the caller with the first). Each job runs exactly once, on
/// one thread, with that thread's state; a single state runs every job on
/// the caller, in order. There must be a state: with none, nothing runs.
pub(crate) fn run<J: Send, S: Send>(
    jobs: Vec<J>,
    states: &mut [S],
    work: impl Fn(&mut S, J) + Sync,
) {
    debug_assert!(!states.is_empty(), "jobs with no thread to run them");
    let Some((mine, others)) = states.split_first_mut() else {
        return;
    };
    let pool = pool().filter(|_| !others.is_empty() && jobs.len() >= 2);
    let Some(pool) = pool else {
        for job in jobs {
            work(mine, job);
        }
        return;
    };
    let total = jobs.len();
    let queue = Mutex::new(jobs.into_iter());
    let done = AtomicUsize::new(0);
    let drain = |state: &mut S| loop {
        // The lock is released before the job runs, so a panicking job
        // cannot poison it; a poisoned one would still hand out the rest.
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
        let Some(job) = next else { break };
        // Counted even when the job panics, so the caller's wait ends and
        // the scope passes the panic on.
        let _counted = Counted(&done);
        work(state, job);
    };
    pool.in_place_scope(|scope| {
        for state in others.iter_mut() {
            scope.spawn(|_| drain(state));
        }
        drain(mine);
        // Jobs are short: spinning until the last one ends keeps this
        // thread awake, where rayon's wait would put it to sleep and cost
        // a wake-up at the end of every launch (once every helper has
        // started; one that has not is still waited for by the scope).
        let mut spins = 0u32;
        while done.load(Ordering::Acquire) < total {
            if spins < 1 << 16 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    });
}

/// The pool the helpers run on: this crate's own, started on first use
/// (so that a user's global pool settings are theirs); `None` where its
/// threads could not be started (a tight memory or thread limit), and
/// then every job runs on the caller instead of the launch aborting.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("backend-cpu-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// `slice` split into the given ranges, which must be increasing and
/// apart (each starts at or after the end of the one before): a mutable
/// part for each, for a job of its own.
pub(crate) fn split_apart(
    slice: &mut [f32],
    ranges: impl IntoIterator<Item = std::ops::Range<usize>>,
) -> Vec<&mut [f32]> {
    let mut rest = slice;
    let mut consumed = 0;
    let mut parts = Vec::new();
    for range in ranges {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(range.start - consumed);
        let (mine, tail) = tail.split_at_mut(range.len());
        parts.push(mine);
        rest = tail;
        consumed = range.end;
    }
    parts
}

/// Adds one to a count when dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_once_whatever_the_threads() {
        for threads in 1..=4 {
            for n in [0usize, 1, 2, 7, 100] {
                let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                let mut states = vec![0usize; threads];
                run((0..n).collect(), &mut states, |count, j| {
                    *count += 1;
                    seen[j].fetch_add(1, Ordering::Relaxed);
                });
                assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
                assert_eq!(states.iter().sum::<usize>(), n);
            }
        }
    }

    #[test]
    fn parts_split_apart_are_the_ranges_given() {
        let mut v: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let parts = split_apart(&mut v, [1..3, 3..4, 7..10]);
        let got: Vec<Vec<f32>> = parts.into_iter().map(|p| p.to_vec()).collect();
        assert_eq!(got, vec![vec![1.0, 2.0], vec![3.0], vec![7.0, 8.0, 9.0]]);
    }

    #[test]
    fn a_panicking_job_is_passed_on_not_waited_for() {
        let caught = std::panic::catch_unwind(|| {
            let mut states = vec![(); 2];
            run((0..8).collect(), &mut states, |_, j: i32| {
                assert!(j != 5, "job 5")
            });
        });
        assert!(caught.is_err());
    }
}
