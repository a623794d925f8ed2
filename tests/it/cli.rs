//! The binary as a user runs it: flags and env, the listening log line,
//! `healthcheck`, SIGTERM shutdown, and clear start-up errors.

use std::process::{Command, Stdio};

use crate::common::{tempdir, Proc, BIN};

fn healthcheck(addr: &str) -> bool {
    Command::new(BIN)
        .args(["healthcheck", "--addr", addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn serves_logs_address_answers_healthcheck_and_stops_on_sigterm() {
    let dir = tempdir("cli");
    let mut p = Proc::start(
        &["--listen", "127.0.0.1:0"],
        &[("PROJECTOR_DATA_DIR", dir.to_str().unwrap())],
    );
    let addr = p.addr();
    assert!(
        healthcheck(&addr),
        "healthcheck passes against a running server"
    );
    assert!(
        dir.join("projector.redb").exists(),
        "embedded store is the default and lives in the data dir"
    );
    p.terminate();
    p.wait_line("shutdown signal received");
    let status = p.wait_exit();
    assert!(status.success(), "graceful exit, got {status}");
    assert!(
        !healthcheck(&addr),
        "healthcheck fails when nothing listens"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn env_selects_the_memory_store_and_flags_win_over_env() {
    let dir = tempdir("cli-env");
    let p = Proc::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.to_str().unwrap(),
        ],
        &[
            ("PROJECTOR_STORE", "memory"),
            ("PROJECTOR_LISTEN", "127.0.0.1:1"),
        ],
    );
    let addr = p.addr();
    assert_ne!(addr, "127.0.0.1:1", "--listen beats PROJECTOR_LISTEN");
    assert!(healthcheck(&addr));
    assert!(
        !dir.join("projector.redb").exists(),
        "PROJECTOR_STORE=memory writes nothing to disk"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_config_and_corrupt_store_are_clear_errors() {
    let mut p = Proc::start(
        &["--listen", "127.0.0.1:0"],
        &[("PROJECTOR_STREAM__LIVE_BUFFER", "0")],
    );
    p.wait_line("stream.live_buffer");
    assert_eq!(p.wait_exit().code(), Some(2));

    let mut p = Proc::start(&["--config", "/nonexistent/projector.toml"], &[]);
    p.wait_line("/nonexistent/projector.toml");
    assert_eq!(p.wait_exit().code(), Some(2));

    let dir = tempdir("cli-corrupt");
    let file = dir.join("projector.redb");
    std::fs::write(&file, b"definitely not a database").unwrap();
    let mut p = Proc::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let line = p.wait_line("projector.redb");
    assert!(
        line.contains(file.to_str().unwrap()),
        "names the file: {line}"
    );
    assert!(!p.wait_exit().success());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"definitely not a database",
        "left untouched"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn config_file_layers_over_defaults() {
    let dir = tempdir("cli-file");
    let file = dir.join("p.toml");
    std::fs::write(&file, "store = \"memory\"\n[stream]\nheartbeat_secs = 7\n").unwrap();
    let p = Proc::start(
        &[
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let addr = p.addr();
    assert!(healthcheck(&addr));
    assert!(
        !dir.join("projector.redb").exists(),
        "store = memory from the file"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// All the output of the binary run with `args` and `envs` (stdout and
/// stderr piped, so not a terminal; NO_COLOR unset), and its exit code.
fn run_captured(args: &[&str], envs: &[(&str, &str)]) -> (String, Option<i32>) {
    let out = Command::new(BIN)
        .args(args)
        .envs(envs.iter().copied())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (text, out.status.code())
}

/// Issue 12 item 14: a bad environment value names the variable (not a
/// place in the source); a fatal start error is printed once; no ANSI
/// colour codes when the output is not a terminal.
#[test]
fn start_errors_name_the_variable_once_and_without_colour() {
    let (out, code) = run_captured(
        &["--store", "memory", "--listen", "127.0.0.1:0"],
        &[("PROJECTOR_STREAM__HEARTBEAT_SECS", "abc")],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("PROJECTOR_STREAM__HEARTBEAT_SECS"), "{out}");
    assert!(!out.contains("src/config.rs"), "{out}");

    let dir = tempdir("cli-once");
    let file = dir.join("projector.redb");
    std::fs::write(&file, b"not a database").unwrap();
    let (out, code) = run_captured(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_ne!(code, Some(0));
    assert_eq!(
        out.matches(file.to_str().unwrap()).count(),
        1,
        "the error once: {out}"
    );
    assert!(
        !out.contains('\u{1b}'),
        "no ANSI codes in piped output: {out:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `healthcheck --addr localhost:PORT` resolves the host name.
#[test]
fn healthcheck_takes_a_host_name() {
    let mut p = Proc::start(&["--store", "memory", "--listen", "127.0.0.1:0"], &[]);
    let port = p.addr().rsplit(':').next().unwrap().to_string();
    assert!(healthcheck(&format!("localhost:{port}")));
    let _ = p.child.kill();
    let _ = p.wait_exit();
}

/// `agent-projector token` mints a token the server accepts, for exactly
/// the sessions and scopes asked; without a secret it says what to set; a
/// short HS256 secret is warned about at start.
#[tokio::test]
async fn token_mints_what_the_server_accepts() {
    const SECRET: &str = "0123456789abcdef0123456789abcdef-long-enough";
    let env = [
        ("PROJECTOR_AUTH__MODE", "jwt"),
        ("PROJECTOR_AUTH__HS256_SECRET", SECRET),
    ];
    let (token, code) = run_captured(
        &[
            "token",
            "--session",
            "team-a/*",
            "--scope",
            "publish",
            "--scope",
            "subscribe",
            "--ttl",
            "10m",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{token}");
    let token = token.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let mut p = Proc::start(&["--store", "memory", "--listen", "127.0.0.1:0"], &env);
    let base = format!("http://{}", p.addr());
    let http = reqwest::Client::new();
    let post = |session: &str| {
        http.post(format!("{base}/v1/sessions/{session}/events"))
            .bearer_auth(&token)
            .json(&serde_json::json!({"type": "run.started", "runId": "r"}))
            .send()
    };
    assert_eq!(post("team-a%2Frun-1").await.unwrap().status(), 200);
    assert_eq!(
        post("team-b").await.unwrap().status(),
        403,
        "only its sessions"
    );
    let del = http
        .delete(format!("{base}/v1/sessions/team-a%2Frun-1"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 403, "only its scopes");
    let _ = p.child.kill();
    let _ = p.wait_exit();

    let (out, code) = run_captured(&["token"], &[]);
    assert_eq!(code, Some(2));
    assert!(out.contains("PROJECTOR_AUTH__HS256_SECRET"), "{out}");
    let (out, code) = run_captured(&["token", "--scope", "everything"], &env);
    assert_eq!(code, Some(2));
    assert!(out.contains("unknown scope"), "{out}");

    let p = Proc::start(
        &["--store", "memory", "--listen", "127.0.0.1:0"],
        &[
            ("PROJECTOR_AUTH__MODE", "jwt"),
            ("PROJECTOR_AUTH__HS256_SECRET", "short"),
        ],
    );
    p.wait_line("shorter than 32 bytes");
}
