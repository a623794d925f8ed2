//! A real full disk under the embedded store (issue 12 item 6): a tmpfs of
//! a few MiB (room for the database and the log's halves, which grow ahead
//! of their records), the free-space guard off, another file filling it. Writes fail
//! with 503 and `/readyz` says so; once space is back the store reopens
//! without a restart, writes go on, and nothing acknowledged is lost, also
//! across a restart. Needs root to mount the tmpfs; says SKIPPED otherwise.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{tempdir, Proc};

/// A tmpfs mounted for the test's life.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fill the filesystem of `dir` with one file until it is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
}

fn event(id: &str, bytes: usize) -> Value {
    json!({"id": id, "type": "text.delta", "runId": "r", "messageId": "m",
           "payload": {"delta": "x".repeat(bytes)}})
}

#[tokio::test]
async fn a_full_disk_is_survived_without_a_restart_and_loses_nothing() {
    let dir = tempdir("full-disk");
    let Some(_fs) = Tmpfs::mount(&dir, "8m") else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED a_full_disk_is_survived_without_a_restart_and_loses_nothing: \
             cannot mount a tmpfs (needs root)"
        );
        return;
    };
    let data = dir.join("data");
    let data_arg = data.to_str().unwrap().to_string();
    let args = [
        "--store",
        "embedded",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_arg,
    ];
    // No page cache: reads go to the file, as they do once a store is
    // larger than its cache.
    let env = [
        ("PROJECTOR_STORAGE__MIN_FREE_BYTES", "0"),
        ("PROJECTOR_STORAGE__CACHE_BYTES", "0"),
    ];
    // Session `t` is written by an earlier run: the server below has not
    // loaded it when the disk fills.
    let earlier = {
        let mut p = Proc::start(&args, &env);
        let base = format!("http://{}", p.addr());
        let http = reqwest::Client::new();
        let mut ids = Vec::new();
        for i in 0..3 {
            let r = http
                .post(format!("{base}/v1/sessions/t/events"))
                .json(&event(&format!("t{i}"), 100))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            ids.push(format!("t{i}"));
        }
        p.terminate();
        let _ = p.wait_exit();
        ids
    };
    let mut p = Proc::start(&args, &env);
    let base = format!("http://{}", p.addr());
    let http = reqwest::Client::new();
    let post = |session: &str, body: Value| {
        http.post(format!("{base}/v1/sessions/{session}/events"))
            .json(&body)
            .send()
    };
    let mut acked = Vec::new();
    for i in 0..5 {
        let id = format!("a{i}");
        assert_eq!(post("s", event(&id, 100)).await.unwrap().status(), 200);
        acked.push(id);
    }

    // Another process fills the disk.
    fill(&dir.join("filler"));
    let mut refused = None;
    for i in 0..200 {
        let id = format!("b{i}");
        let r = post("s", event(&id, 20_000)).await.unwrap();
        match r.status().as_u16() {
            200 => acked.push(id),
            503 => {
                refused = Some(r.json::<Value>().await.unwrap());
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    let refused = refused.expect("a write fails on the full disk");
    assert!(
        matches!(
            refused["code"].as_str(),
            Some("store_full" | "store_unavailable")
        ),
        "{refused}"
    );
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(
        ready.status(),
        503,
        "not ready while the store cannot write"
    );
    let r = post("s", event("c0", 10)).await.unwrap();
    assert_eq!(r.status(), 503, "still refused while the disk is full");
    assert!(
        r.headers().get("retry-after").is_some(),
        "a refused write says when to retry"
    );

    // Reads go on while writes cannot: the log, the snapshot, a replay
    // from the start, of the session written to and of one the server had
    // not loaded.
    assert_eq!(logged(&http, &base, "s").await, acked);
    assert_eq!(logged(&http, &base, "t").await, earlier);
    for (session, ids) in [("s", &acked), ("t", &earlier)] {
        let snap = http
            .get(format!("{base}/v1/sessions/{session}/snapshot"))
            .send()
            .await
            .unwrap();
        assert_eq!(snap.status(), 200, "{session}'s snapshot reads");
        let resp = http
            .get(format!("{base}/v1/sessions/{session}/stream?cursor=0"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut replay = crate::common::Sse::from_response(resp);
        let frames = replay.take(ids.len()).await;
        let got: Vec<&str> = frames
            .iter()
            .map(|f| f.data["eventId"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(got, *ids, "{session}: every acknowledged frame replays");
        let last = frames.last().unwrap().data["cursor"].as_u64().unwrap();
        let more = replay.next_any().await.expect("the replay stays open");
        assert_eq!(
            (more.event.as_str(), more.data["cursor"].as_u64()),
            ("live", Some(last))
        );
    }

    // Space is back: the store reopens by itself (no request, no restart).
    std::fs::remove_file(dir.join("filler")).unwrap();
    p.wait_line("embedded store reopened");
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200, "ready again without a restart");
    for i in 0..3 {
        let id = format!("c{i}");
        let r = post("s", event(&id, 100)).await.unwrap();
        assert_eq!(r.status(), 200, "writes go on");
        acked.push(id);
    }
    // A new subscriber of a new session gets its snapshot, not an empty stream.
    let r = post("fresh", event("f0", 10)).await.unwrap();
    assert_eq!(r.status(), 200);
    let resp = http
        .get(format!("{base}/v1/sessions/fresh/stream"))
        .send()
        .await
        .unwrap();
    let mut sse = crate::common::Sse::from_response(resp);
    assert_eq!(sse.next().await.unwrap().event, "snapshot");
    drop(sse);

    // Nothing acknowledged is lost, across a restart too.
    let _ = p.child.kill();
    let _ = p.wait_exit();
    let p = Proc::start(&args, &env);
    let base = format!("http://{}", p.addr());
    assert_eq!(logged(&http, &base, "s").await, acked);
    drop(p);
}

/// The ids of a session's logged events.
async fn logged(http: &reqwest::Client, base: &str, session: &str) -> Vec<String> {
    let r = http
        .get(format!("{base}/v1/sessions/{session}/events?limit=1000"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the log reads");
    let log: Value = r.json().await.unwrap();
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["id"].as_str().unwrap().to_string())
        .collect()
}
