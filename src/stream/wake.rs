//! A waker that says whether it was used: what a stream gives to the rare
//! sources it waits on beside its items (a heartbeat timer, a shutdown
//! token, the client's hang-up), so that a woken task looks at them again
//! only when one of them woke it, not at every frame (each look is a lock
//! or a timer-wheel visit).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Waker};

use futures_util::task::AtomicWaker;

/// The flag and the task it wakes.
struct Flag {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl std::task::Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// A waker for the rare sources of one stream.
pub(crate) struct WakeFlag {
    flag: Arc<Flag>,
    waker: Waker,
}

impl WakeFlag {
    /// A flag that starts fired: the sources are looked at (and so learn
    /// this waker) at the first poll.
    pub(crate) fn new() -> Self {
        let flag = Arc::new(Flag {
            fired: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Self {
            waker: Waker::from(flag.clone()),
            flag,
        }
    }

    /// Called at each poll of the stream with its task's context: the
    /// task a source's wake goes on to.
    pub(crate) fn register(&self, cx: &Context<'_>) {
        self.flag.task.register(cx.waker());
    }

    /// Whether a source woke the task since the last `take` (or
    /// [`WakeFlag::raise`]): if so, every source must be polled again
    /// (with [`WakeFlag::context`]) before the stream says it is pending.
    pub(crate) fn take(&self) -> bool {
        // Read first: the flag is down at almost every poll, and a read
        // does not take the line for writing as the swap does.
        self.flag.fired.load(Ordering::Relaxed) && self.flag.fired.swap(false, Ordering::AcqRel)
    }

    /// Whether a source woke the task since the last `take`, left as it is.
    pub(crate) fn fired(&self) -> bool {
        self.flag.fired.load(Ordering::Acquire)
    }

    /// Look at the sources at the next poll, woken or not (one of them was
    /// set anew).
    pub(crate) fn raise(&self) {
        self.flag.fired.store(true, Ordering::Release);
    }

    /// The context to poll the sources with.
    pub(crate) fn context(&self) -> Context<'_> {
        Context::from_waker(&self.waker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that fires wakes the task and raises the flag once.
    #[test]
    fn a_source_wakes_the_task_and_raises_the_flag_once() {
        let (task, woken) = counting_waker();
        let cx = Context::from_waker(&task);
        let w = WakeFlag::new();
        w.register(&cx);
        assert!(w.take(), "starts fired");
        assert!(!w.take());
        w.context().waker().wake_by_ref();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(w.take());
        assert!(!w.take());
        w.raise();
        assert!(w.take());
        assert_eq!(woken.load(Ordering::SeqCst), 1, "raising wakes no one");
    }

    fn counting_waker() -> (Waker, Arc<std::sync::atomic::AtomicUsize>) {
        struct Count(Arc<std::sync::atomic::AtomicUsize>);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        (Waker::from(Arc::new(Count(n.clone()))), n)
    }
}
