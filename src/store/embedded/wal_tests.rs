//! The write-ahead log under crashes: a copy of the data dir taken while
//! the store runs is what a crash leaves on disk (the database file is only
//! written by its commits, the log only at the end of its records until it
//! starts over).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::wal::{logged_len, Wal, WAL_FILES};
use super::{EmbeddedLog, EmbeddedOptions, DB_FILE};
use crate::store::contract::{self, batch, ev};
use crate::store::{EventLog, Retention};

pub(super) fn opts(flush_interval: Duration) -> EmbeddedOptions {
    EmbeddedOptions {
        retention: Retention {
            max_events_per_session: 1000,
            max_age_ms: None,
        },
        min_free_bytes: 0,
        cache_bytes: 4 << 20,
        flush_interval,
    }
}

/// Three events kept per session, no trim by age, the log never taken.
fn keep_three() -> EmbeddedOptions {
    EmbeddedOptions {
        retention: Retention {
            max_events_per_session: 3,
            max_age_ms: None,
        },
        ..opts(NEVER)
    }
}

/// The database never takes the log while the test looks.
const NEVER: Duration = Duration::from_secs(3600);

pub(super) fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "projector-wal-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The files a crash would leave now.
fn crash_image(from: &Path, name: &str) -> PathBuf {
    let to = tmpdir(name);
    for f in [DB_FILE, WAL_FILES[0], WAL_FILES[1]] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
    to
}

/// Bytes of records in both halves of the log (past each one's 24-byte
/// header; a half the flusher is starting over may be caught with none).
fn logged_bytes(dir: &Path) -> u64 {
    WAL_FILES.iter().map(|f| logged_len(&dir.join(f))).sum()
}

/// A session the database knows, and three plain appends only logged.
async fn three_logged(dir: &Path) -> EmbeddedLog {
    let log = EmbeddedLog::open(dir, opts(NEVER)).unwrap();
    log.open("s").await.unwrap();
    let before = logged_bytes(dir);
    for c in 1..=3 {
        log.append("s", batch(vec![ev(c)], None)).await.unwrap();
    }
    assert!(logged_bytes(dir) > before, "the appends went to the log");
    assert_eq!(log.meta("s").await.unwrap().unwrap().head, 3);
    assert_eq!(log.read("s", 0, 10).await.unwrap().len(), 3);
    log
}

#[tokio::test]
async fn acknowledged_appends_survive_a_crash_before_the_database_takes_them() {
    let dir = tmpdir("crash");
    let live = three_logged(&dir).await;
    let image = crash_image(&dir, "crash-image");
    let log = EmbeddedLog::open(&image, opts(NEVER)).unwrap();
    let m = log.meta("s").await.unwrap().unwrap();
    assert_eq!(m.head, 3);
    let got = log.read("s", 0, 10).await.unwrap();
    assert_eq!(got.iter().map(|e| e.cursor).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(got[2].frame, ev(3).frame);
    assert_eq!(
        log.lookup_ids("s", &["e2".into(), "e4".into()])
            .await
            .unwrap(),
        vec![Some(2), None]
    );
    assert_eq!(logged_bytes(&image), 0, "the database took the log at open");
    // Appends go on from there, and a second crash keeps them too.
    log.append("s", batch(vec![ev(4)], None)).await.unwrap();
    let again = crash_image(&image, "crash-image-2");
    let reopened = EmbeddedLog::open(&again, opts(NEVER)).unwrap();
    assert_eq!(reopened.meta("s").await.unwrap().unwrap().head, 4);
    assert_eq!(reopened.read("s", 0, 10).await.unwrap().len(), 4);
    drop((live, log, reopened));
    for d in [dir, image, again] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A replay reads the two halves in order of generation. When the
/// database takes the half the appends went to, they go on to the other:
/// that one must come after it, or a crash before the database has the
/// first half replays newer appends before older ones, and the store
/// refuses to open ("the log does not continue the database"; seen once
/// in `crash::sigkill_during_concurrent_ingest_loses_no_acknowledged_event`).
#[tokio::test]
async fn the_half_the_appends_go_on_to_replays_after_the_one_being_taken() {
    let dir = tmpdir("order");
    let live = three_logged(&dir).await;
    let image = crash_image(&dir, "order-image");
    let mut halves: Vec<_> = WAL_FILES
        .iter()
        .map(|f| Wal::open(&image, f).unwrap())
        .collect();
    // The half with the three appends first, then the spare.
    halves.sort_by_key(|(_, records)| std::cmp::Reverse(records.len()));
    assert_eq!(
        (halves[0].1.len(), halves[1].1.len()),
        (3, 0),
        "the appends are in one half"
    );
    assert!(
        halves[1].0.gen() > halves[0].0.gen(),
        "the spare (generation {}) replays after the half it takes over from ({})",
        halves[1].0.gen(),
        halves[0].0.gen()
    );
    drop((live, halves));
    for d in [dir, image] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test]
async fn a_torn_log_tail_replays_whole_records_only() {
    let dir = tmpdir("torn");
    let live = three_logged(&dir).await;
    let image = crash_image(&dir, "torn-image");
    // The last record's write was cut: it was never acknowledged.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(image.join(WAL_FILES[0]))
        .unwrap();
    f.set_len(24 + logged_bytes(&image) - 5).unwrap();
    let log = EmbeddedLog::open(&image, opts(NEVER)).unwrap();
    assert_eq!(log.meta("s").await.unwrap().unwrap().head, 2);
    assert_eq!(log.read("s", 0, 10).await.unwrap().len(), 2);
    // The session goes on at cursor 3, as the writer that got an error expects.
    log.append("s", batch(vec![ev(3)], None)).await.unwrap();
    drop((live, log));
    for d in [dir, image] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test]
async fn the_database_takes_the_log_on_time_and_at_close() {
    let dir = tmpdir("flush");
    {
        let log = EmbeddedLog::open(&dir, opts(Duration::from_millis(20))).unwrap();
        log.open("s").await.unwrap();
        log.append("s", batch(vec![ev(1)], None)).await.unwrap();
        assert!(logged_bytes(&dir) > 0);
        // Within a few ticks the database has it and the log started over.
        let t0 = std::time::Instant::now();
        while logged_bytes(&dir) > 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the log was never taken"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(log.read("s", 0, 10).await.unwrap().len(), 1);
        log.append("s", batch(vec![ev(2)], None)).await.unwrap();
    }
    // Closed: the log is empty, the database has both.
    assert_eq!(logged_bytes(&dir), 0);
    let log = EmbeddedLog::open(&dir, opts(NEVER)).unwrap();
    assert_eq!(log.read("s", 0, 10).await.unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn logged_appends_show_in_the_session_list() {
    let dir = tmpdir("list");
    let log = three_logged(&dir).await;
    let listed = log.list(None, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].0.as_str(), listed[0].1.head), ("s", 3));
    assert!(log
        .expired(listed[0].1.updated_ms, 10)
        .await
        .unwrap()
        .is_empty());
    drop(log);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_contract_holds_while_the_log_is_taken_all_the_time() {
    let dir = tmpdir("contract-busy");
    contract::holds(Arc::new(
        EmbeddedLog::open(&dir, opts(Duration::ZERO)).unwrap(),
    ))
    .await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_logged_checkpoint_trims_at_once_for_readers_and_for_good_after_a_crash() {
    let dir = tmpdir("cp");
    let log = EmbeddedLog::open(&dir, keep_three()).unwrap();
    log.open("s").await.unwrap();
    log.append("s", batch((1..=5).map(ev).collect(), None))
        .await
        .unwrap();
    let cp = crate::store::Checkpoint {
        cursor: 6,
        state: bytes::Bytes::from_static(b"{\"at\":6}"),
    };
    let before = logged_bytes(&dir);
    let m = log
        .append("s", batch(vec![ev(6)], Some(cp.clone())))
        .await
        .unwrap();
    assert!(logged_bytes(&dir) > before, "logged, not committed");
    assert_eq!((m.first, m.head), (4, 6));
    let log = check_trimmed(log, &cp).await;
    let image = crash_image(&dir, "cp-image");
    let reopened = EmbeddedLog::open(&image, keep_three()).unwrap();
    drop(check_trimmed(reopened, &cp).await);
    drop(log);
    for d in [dir, image] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Session "s" of that test: events 4 to 6 kept, the checkpoint at 6.
async fn check_trimmed(log: EmbeddedLog, cp: &crate::store::Checkpoint) -> EmbeddedLog {
    assert_eq!(log.meta("s").await.unwrap().unwrap().first, 4);
    let got = log.read("s", 0, 100).await.unwrap();
    assert_eq!(got.iter().map(|e| e.cursor).collect::<Vec<_>>(), [4, 5, 6]);
    assert_eq!(
        log.lookup_ids("s", &["e1".into(), "e5".into()])
            .await
            .unwrap(),
        vec![None, Some(5)],
        "trimmed ids leave the idempotency index"
    );
    assert_eq!(log.checkpoint("s").await.unwrap().as_ref(), Some(cp));
    log
}

/// Every acknowledged id is found, whichever way it went (committed with
/// a new session, logged, taken by the database, deleted, reopened): the
/// id filter only ever spares reads of ids the session does not hold.
#[tokio::test]
async fn the_id_filter_never_hides_an_acknowledged_id() {
    let dir = tmpdir("idfilter");
    let ids = |n: u64| (1..=n).map(|c| format!("e{c}")).collect::<Vec<_>>();
    let known = |n: u64| (1..=n).map(Some).collect::<Vec<_>>();
    {
        let log = EmbeddedLog::open(&dir, opts(Duration::from_millis(20))).unwrap();
        // New to the database: committed by the writer, not logged.
        log.append("s", batch(vec![ev(1)], None)).await.unwrap();
        log.build_filter("s").unwrap().await.unwrap();
        let fresh = ["e1".to_string(), "new".to_string()];
        let held = log.filters.may_hold("s", &fresh, &[None, None]).unwrap();
        assert!(held[0], "the build read the database");
        assert_eq!(log.lookup_ids("s", &fresh).await.unwrap(), [Some(1), None]);
        for c in 2..=40 {
            log.append("s", batch(vec![ev(c)], None)).await.unwrap();
            assert_eq!(log.lookup_ids("s", &ids(c)).await.unwrap(), known(c));
        }
        // The database takes the log: the ids are read from it now.
        let t0 = std::time::Instant::now();
        while logged_bytes(&dir) > 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "never taken");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(log.lookup_ids("s", &ids(40)).await.unwrap(), known(40));
        // A filter registered before appends gets them as they are noted.
        log.append("t", batch(vec![ev(1)], None)).await.unwrap();
        let build = log.filters.start("t").unwrap();
        log.append("t", batch(vec![ev(2)], None)).await.unwrap();
        log.filters.finish(build, Some(Vec::new()));
        let held = log.filters.may_hold("t", &ids(2), &[None, None]).unwrap();
        assert!(held[1], "noted while it was built");
        assert_eq!(log.lookup_ids("t", &ids(2)).await.unwrap()[1], Some(2));
        // Deleted: the ids are gone, and so is the filter.
        log.delete("s").await.unwrap();
        assert!(log.filters.may_hold("s", &ids(1), &[None]).is_none());
        log.build_filter("s").unwrap().await.unwrap();
        assert_eq!(log.lookup_ids("s", &ids(2)).await.unwrap(), [None, None]);
        // Revived: the writer commits the append (the database holds the
        // session deleted) and notes its id in the filter built before.
        log.append("s", batch(vec![ev(41)], None)).await.unwrap();
        let revived = ["e41".to_string()];
        assert_eq!(log.lookup_ids("s", &revived).await.unwrap(), [Some(41)]);
    }
    // Reopened: filters start empty and are built from the database.
    let log = EmbeddedLog::open(&dir, opts(NEVER)).unwrap();
    assert!(log.filters.may_hold("t", &ids(1), &[None]).is_none());
    log.build_filter("t").unwrap().await.unwrap();
    let held = log.filters.may_hold("t", &ids(2), &[None, None]).unwrap();
    assert_eq!(held, [true, true]);
    assert_eq!(
        log.lookup_ids("t", &ids(3)).await.unwrap(),
        [Some(1), Some(2), None]
    );
    drop(log);
    let _ = std::fs::remove_dir_all(dir);
}
