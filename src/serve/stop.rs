//! The server's shutdown as its connections watch it: a flag, and the
//! wakers of the connections waiting on it. A connection's task polls its
//! [`Watch`] at every wake (a `select!` with the connection), so that poll
//! is an atomic load and a waker comparison; a `CancellationToken`'s takes
//! two locks (its `is_cancelled`, and its `Notified` checking the waker),
//! 1.6% of a single-event POST's samples (docs/BENCHMARKS.md).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use slab::Slab;

/// The shutdown the connections watch.
#[derive(Default)]
pub(super) struct Shutdown(Arc<Inner>);

#[derive(Default)]
struct Inner {
    stopped: AtomicBool,
    /// The watches waiting, each by its key.
    waiting: Mutex<Slab<Waker>>,
}

impl Inner {
    fn waiting(&self) -> MutexGuard<'_, Slab<Waker>> {
        // A waker's `wake` that panicked leaves nothing half-done here.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shutdown {
    /// Every watch is ready from now on; those waiting are woken.
    pub(super) fn stop(&self) {
        self.0.stopped.store(true, Ordering::Release);
        let waiting = std::mem::take(&mut *self.0.waiting());
        for (_, waker) in waiting {
            waker.wake();
        }
    }

    /// A watch for one connection: ready once [`Shutdown::stop`] is called.
    pub(super) fn watch(&self) -> Watch {
        Watch {
            inner: self.0.clone(),
            seat: None,
        }
    }
}

/// Ready once the server stops. Waits with the waker of the task that
/// polled it last (its key in the list, and a clone to compare).
pub(super) struct Watch {
    inner: Arc<Inner>,
    seat: Option<(usize, Waker)>,
}

impl Future for Watch {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.inner.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if let Some((_, waker)) = &this.seat {
            if waker.will_wake(cx.waker()) {
                // Still in the list: `stop` wakes it.
                return Poll::Pending;
            }
        }
        let mut waiting = this.inner.waiting();
        // `stop` takes the list after setting the flag: under the lock the
        // flag says whether a waker put in now would be woken.
        if this.inner.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let waker = cx.waker().clone();
        let key = match &this.seat {
            Some((key, _)) => {
                waiting[*key] = waker.clone();
                *key
            }
            None => waiting.insert(waker.clone()),
        };
        this.seat = Some((key, waker));
        Poll::Pending
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((key, _)) = self.seat.take() {
            // After `stop` the list is empty and nothing is added to it.
            self.inner.waiting().try_remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A waker that counts its wakes.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(watch: &mut Watch, count: &Arc<Count>) -> Poll<()> {
        let waker = Waker::from(count.clone());
        Pin::new(watch).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn stop_wakes_each_waiting_watch_once_and_a_dropped_one_leaves_the_list() {
        let shutdown = Shutdown::default();
        let (a, b) = (Arc::new(Count(0.into())), Arc::new(Count(0.into())));
        let (mut first, mut second) = (shutdown.watch(), shutdown.watch());
        assert!(poll(&mut first, &a).is_pending());
        assert!(poll(&mut second, &b).is_pending());
        assert_eq!(shutdown.0.waiting().len(), 2);
        drop(second);
        assert_eq!(shutdown.0.waiting().len(), 1);
        // Polled again by the same task: not added twice. By another: the
        // new waker replaces the old one.
        assert!(poll(&mut first, &a).is_pending());
        assert_eq!(shutdown.0.waiting().len(), 1);
        let c = Arc::new(Count(0.into()));
        assert!(poll(&mut first, &c).is_pending());
        assert_eq!(shutdown.0.waiting().len(), 1);
        shutdown.stop();
        assert_eq!(a.0.load(Ordering::SeqCst), 0);
        assert_eq!(b.0.load(Ordering::SeqCst), 0);
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(poll(&mut first, &c).is_ready());
        assert_eq!(shutdown.0.waiting().len(), 0);
        // A watch made after the stop is ready at once.
        assert!(poll(&mut shutdown.watch(), &a).is_ready());
    }
}
