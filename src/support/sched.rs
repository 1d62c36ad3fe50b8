//! The scheduling class of sluice's own background threads.
//!
//! The threads that serve requests (the tokio workers) are latency work; the threads that
//! write the state database, the log file, render the console or purge freed memory are
//! throughput work. On Linux, throughput threads run in the `SCHED_BATCH` class: they keep
//! their full share of the CPU (same weight as nice 0, so the store writer keeps up under
//! saturation), but waking up never preempts a request that is running. Measured on one
//! CPU shared with the runtime worker (`perf sched`): the store writer's wake-up every
//! ~27 ms preempted the worker for a 1.6 ms transaction, stalling about one request in 350.
//! On other OSes these are no-ops.

/// Puts the calling thread in the background class (Linux `SCHED_BATCH`; nice is set to 0
/// where the OS allows, and a nice the operator raised is kept). Threads it starts
/// afterwards inherit the class. Returns whether the thread is now in that class; a refusal
/// by the OS (or another OS) leaves the thread as it was, which is only slower.
pub fn background_thread() -> bool {
    set_class(Class::Background)
}

/// Runs `f` with the calling thread in the background class, so threads that `f` starts
/// (a library's worker thread, say) inherit it; then puts the calling thread back in the
/// normal class and returns `f`'s result.
pub fn spawning_background<T>(f: impl FnOnce() -> T) -> T {
    let _restore = Restore(background_thread());
    f()
}

/// Runs `f` on tokio's blocking pool with that thread in the background class for the call
/// (and back in the normal class afterwards, since pool threads are reused): for work off
/// the request path, such as building and serialising a large snapshot, that must not hold a
/// runtime worker. Must be called within a tokio runtime; the handle's error is `f`'s panic.
pub fn spawn_background<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    tokio::task::spawn_blocking(move || spawning_background(f))
}

/// Puts the calling thread back in the normal class when dropped, if it was moved out of it
/// (also when `f` above panics: pooled threads are reused for other work).
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        if self.0 {
            set_class(Class::Normal);
        }
    }
}

#[derive(Clone, Copy)]
enum Class {
    Normal,
    Background,
}

#[cfg(target_os = "linux")]
fn set_class(class: Class) -> bool {
    use thread_priority::{
        NormalThreadSchedulePolicy as Policy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id, thread_schedule_policy,
    };
    let policy = ThreadSchedulePolicy::Normal(match class {
        Class::Normal => Policy::Other,
        Class::Background => Policy::Batch,
    });
    // The call sets the policy, then nice 0; the OS refuses the second step when the operator
    // started sluice under `nice`, which keeps their nice and is fine. The policy is what counts.
    let _ = set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Os(Default::default()),
        policy,
    );
    thread_schedule_policy().is_ok_and(|now| now == policy)
}

#[cfg(not(target_os = "linux"))]
fn set_class(_class: Class) -> bool {
    false
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    use thread_priority::{NormalThreadSchedulePolicy as P, ThreadSchedulePolicy};

    fn policy() -> ThreadSchedulePolicy {
        thread_priority::thread_schedule_policy().expect("readable policy")
    }
    const BATCH: ThreadSchedulePolicy = ThreadSchedulePolicy::Normal(P::Batch);
    const OTHER: ThreadSchedulePolicy = ThreadSchedulePolicy::Normal(P::Other);

    #[test]
    fn background_thread_sets_batch_on_this_thread_only() {
        let inside = std::thread::spawn(|| (background_thread(), policy()))
            .join()
            .expect("thread");
        assert_eq!(inside, (true, BATCH));
        assert_eq!(policy(), OTHER);
    }

    #[test]
    fn threads_started_inside_spawning_background_inherit_it_and_the_caller_is_restored() {
        let (child, after) = std::thread::spawn(|| {
            let child = spawning_background(|| std::thread::spawn(policy).join().expect("child"));
            (child, policy())
        })
        .join()
        .expect("thread");
        assert_eq!(child, BATCH);
        assert_eq!(after, OTHER);
    }
}
