//! Streams that end when the caller's token expires, with a farewell.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::Stream;

/// When a token expiring at `exp` (seconds since the Unix epoch) expires;
/// `None` without one, or for an expiry too far away for the clock to
/// represent (no deadline at all).
fn instant(exp: Option<u64>) -> Option<tokio::time::Instant> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    exp.and_then(|e| {
        tokio::time::Instant::now().checked_add(Duration::from_secs(e.saturating_sub(now)))
    })
}

/// Resolves when a token expiring at `exp` expires; never without one.
pub async fn deadline(exp: Option<u64>) {
    match instant(exp) {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// End `inner` when a token expires (`exp`, seconds since the Unix epoch):
/// the items of `farewell` are sent, then the stream ends. Without `exp`,
/// `inner` as it is.
pub fn until_expiry<S, T>(
    inner: S,
    exp: Option<u64>,
    farewell: Vec<T>,
) -> impl Stream<Item = T> + Send + 'static
where
    S: Stream<Item = T> + Send + 'static,
    T: Send + 'static,
{
    UntilExpiry {
        inner: Box::pin(inner),
        // One timer for the stream's lifetime (not one per item).
        deadline: instant(exp).map(|at| Box::pin(tokio::time::sleep_until(at))),
        expired: false,
        farewell: farewell.into(),
    }
}

/// [`until_expiry`]'s stream: the items first, the deadline looked at only
/// when none is ready (a frame goes out without a visit to the timer).
struct UntilExpiry<T> {
    inner: Pin<Box<dyn Stream<Item = T> + Send>>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The token expired: what is left of the farewell is sent, then the end.
    expired: bool,
    farewell: VecDeque<T>,
}

// Nothing in it is pinned but the boxes, which pin their own contents.
impl<T> Unpin for UntilExpiry<T> {}

impl<T> Stream for UntilExpiry<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        if this.expired {
            return Poll::Ready(this.farewell.pop_front());
        }
        if let Poll::Ready(item) = this.inner.as_mut().poll_next(cx) {
            return Poll::Ready(item);
        }
        match this.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => {
                this.expired = true;
                Poll::Ready(this.farewell.pop_front())
            }
            _ => Poll::Pending,
        }
    }
}
