//! `write_ready`: the frames ready together are fed, then flushed once.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{stream, Sink, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use super::{write_ready, Ready, COALESCE};

/// What a sink was asked to do, in order: `feed` of a text, or a flush.
#[derive(Default)]
struct Log {
    ops: Vec<String>,
    /// Fail every send from this op on.
    fail_at: Option<usize>,
}

impl Sink<Message> for Log {
    type Error = ();
    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Ready(Ok(()))
    }
    fn start_send(mut self: Pin<&mut Self>, m: Message) -> Result<(), ()> {
        if self.fail_at.is_some_and(|n| self.ops.len() >= n) {
            return Err(());
        }
        let t = m.into_text().map_err(|_| ())?.to_string();
        self.ops.push(t);
        Ok(())
    }
    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        self.ops.push("flush".into());
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Ready(Ok(()))
    }
}

fn text(n: u32) -> Option<Message> {
    Some(Message::text(n.to_string()))
}

#[tokio::test]
async fn the_ready_frames_go_out_with_one_flush_and_the_rest_waits() {
    // Three ready, then nothing for now.
    let mut frames = stream::iter([2u32, 3]).chain(stream::pending());
    let mut log = Log::default();
    let r = write_ready(&mut log, 1, &mut frames, text).await;
    assert!(matches!(r, Ok(Ready::More)));
    assert_eq!(log.ops, ["1", "2", "3", "flush"]);
}

#[tokio::test]
async fn at_most_coalesce_frames_share_a_write() {
    let total = COALESCE as u32 + 6;
    let mut frames = stream::iter(2..=total).chain(stream::pending());
    let mut log = Log::default();
    let r = write_ready(&mut log, 1, &mut frames, text).await;
    assert!(matches!(r, Ok(Ready::More)));
    assert_eq!(log.ops.len(), COALESCE + 1);
    assert_eq!(log.ops[COALESCE - 1], COALESCE.to_string());
    assert_eq!(log.ops[COALESCE], "flush");
    // Nothing was taken past the write: the next one starts where it ended.
    let next = frames.next().await.unwrap();
    assert_eq!(next, COALESCE as u32 + 1);
    let r = write_ready(&mut log, next, &mut frames, text).await;
    assert!(matches!(r, Ok(Ready::More)));
    assert_eq!(log.ops.len(), COALESCE + 1 + 7);
    assert_eq!(log.ops.last().unwrap(), "flush");
}

#[tokio::test]
async fn an_ended_stream_is_told_after_its_last_frames_are_flushed() {
    let mut frames = stream::iter([2u32]);
    let mut log = Log::default();
    let r = write_ready(&mut log, 1, &mut frames, text).await;
    assert!(matches!(r, Ok(Ready::Ended)));
    assert_eq!(log.ops, ["1", "2", "flush"]);
}

#[tokio::test]
async fn frames_without_a_message_are_skipped_and_a_failed_send_is_an_error() {
    let mut frames = stream::iter([2u32, 3, 4]).chain(stream::pending());
    let mut log = Log::default();
    let odd = |n: u32| (n % 2 == 1).then(|| Message::text(n.to_string()));
    let r = write_ready(&mut log, 1, &mut frames, odd).await;
    assert!(matches!(r, Ok(Ready::More)));
    assert_eq!(log.ops, ["1", "3", "flush"]);

    let mut frames = stream::iter([2u32, 3]).chain(stream::pending());
    let mut log = Log {
        fail_at: Some(1),
        ..Log::default()
    };
    let r = write_ready(&mut log, 1, &mut frames, text).await;
    assert!(r.is_err());
    assert_eq!(log.ops, ["1"]);
}
