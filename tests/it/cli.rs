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
    let pid = p.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
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
