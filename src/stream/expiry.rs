//! Streams that end when the caller's token expires, with a farewell.

use std::collections::VecDeque;
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
    use futures_util::StreamExt;
    enum St<T> {
        Running,
        Farewell(VecDeque<T>),
    }
    // One timer for the stream's lifetime (not one per item).
    let deadline = instant(exp).map(|at| Box::pin(tokio::time::sleep_until(at)));
    let farewell: VecDeque<T> = farewell.into();
    futures_util::stream::unfold(
        (Box::pin(inner), St::Running, Some(farewell), deadline),
        move |(mut inner, mut st, mut bye, mut deadline)| async move {
            loop {
                match &mut st {
                    St::Farewell(q) => {
                        let item = q.pop_front()?;
                        return Some((item, (inner, st, bye, deadline)));
                    }
                    St::Running => {
                        let item = match deadline.as_mut() {
                            None => inner.next().await,
                            Some(d) => tokio::select! {
                                item = inner.next() => item,
                                _ = d.as_mut() => {
                                    st = St::Farewell(bye.take().unwrap_or_default());
                                    continue;
                                }
                            },
                        };
                        return item.map(|i| (i, (inner, st, bye, deadline)));
                    }
                }
            }
        },
    )
}
