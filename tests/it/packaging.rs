//! The container recipe and the CI entry point say what the README promises.
//! (No Docker engine runs on the test machines, so the image itself is not
//! built here; these checks keep the recipe honest.)

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn dockerfile_is_multi_stage_non_root_with_binary_healthcheck_and_data_volume() {
    let d = read("Dockerfile");
    assert!(
        d.matches("\nFROM ").count() + usize::from(d.starts_with("FROM ")) >= 2,
        "multi-stage"
    );
    assert!(
        d.contains("COPY Cargo.toml Cargo.lock"),
        "dependency layer before the sources"
    );
    assert!(d.contains("--locked"));
    assert!(d.contains("\nUSER projector"), "runs as a non-root user");
    assert!(d.contains("VOLUME [\"/data\"]"));
    assert!(
        d.contains("\"agent-projector\", \"healthcheck\""),
        "HEALTHCHECK uses the binary"
    );
    let instructions: String = d
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!instructions.contains("curl"), "no curl in the image");
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = read("README.md");
    assert!(readme.contains("./scripts/test.sh"));
    assert!(readme.contains("cargo run --release"));
    assert!(read(".ci/run").contains("./scripts/test.sh"));
}
