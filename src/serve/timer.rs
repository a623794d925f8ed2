//! The timer hyper reads a connection's request heads against: one tokio
//! sleep per connection, moved only when it fires. Hyper asks for a new
//! sleep at every request head and drops it once the head is read; with
//! hyper-util's timer each was registered in the runtime's timer wheel and
//! removed again, for every request of a keep-alive connection (2% of a
//! single-event POST, docs/BENCHMARKS.md). Here a new deadline only moves
//! a number; the connection's one sleep stays where it was set and, when
//! it fires before the latest deadline, is set again to it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Sleep, Timer};
use tokio::time::Instant;

/// A connection's one sleep, made at its first deadline.
type Armed = Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>;

/// A connection's timer: give each connection its own.
#[derive(Clone, Default)]
pub(super) struct ConnTimer(Armed);

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until((Instant::now() + duration).into_std())
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(Due {
            deadline: deadline.into(),
            armed: self.0.clone(),
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<Due>() {
            Some(due) => due.get_mut().deadline = new_deadline.into(),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }

    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

/// One deadline of a connection, kept by the connection's sleep.
struct Due {
    deadline: Instant,
    armed: Armed,
}

impl Future for Due {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        let sleep = armed.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        // Set for a later deadline (an earlier request's, with a longer
        // timeout): brought forward, else this one would be late.
        if sleep.deadline() > deadline {
            sleep.as_mut().reset(deadline);
        }
        loop {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            // Fired for an earlier deadline: set again for this one.
            sleep.as_mut().reset(deadline);
        }
    }
}

impl Sleep for Due {}

#[cfg(test)]
mod tests {
    use super::*;

    async fn poll_once(sleep: &mut Pin<Box<dyn Sleep>>) -> Poll<()> {
        std::future::poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx))).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_moved_on_is_kept_by_the_one_sleep() {
        let timer = ConnTimer::default();
        let start = Instant::now();
        // A first head, read in time: its sleep is dropped unfired.
        let mut first = timer.sleep(Duration::from_secs(30));
        assert!(poll_once(&mut first).await.is_pending());
        drop(first);
        tokio::time::advance(Duration::from_secs(20)).await;
        // The next head's deadline is 30 s from now, 50 s from the start:
        // the sleep set for 30 s fires, is set again, and this one ends at 50.
        let second = timer.sleep(Duration::from_secs(30));
        second.await;
        assert_eq!(Instant::now() - start, Duration::from_secs(50));
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_is_not_late() {
        let timer = ConnTimer::default();
        let start = Instant::now();
        let mut long = timer.sleep(Duration::from_secs(60));
        assert!(poll_once(&mut long).await.is_pending());
        drop(long);
        timer.sleep(Duration::from_secs(5)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_moves_the_deadline() {
        let timer = ConnTimer::default();
        let start = Instant::now();
        let mut sleep = timer.sleep(Duration::from_secs(5));
        timer.reset(&mut sleep, (start + Duration::from_secs(7)).into_std());
        sleep.await;
        assert_eq!(Instant::now() - start, Duration::from_secs(7));
    }
}
