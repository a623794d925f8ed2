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

/// The image's build context, rebuilt from the Dockerfile itself: the
/// build stage's `COPY` lines (minus what `.dockerignore` leaves out) and its
/// `RUN` lines, run in a scratch directory, with `cargo build` swapped for
/// `cargo check` (same manifest, lockfile and sources; no Docker engine here).
/// A file the build needs that the Dockerfile does not copy fails this test.
#[test]
fn the_dockerfile_build_stage_compiles_from_its_own_build_context() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ignore: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_matches('/').to_string())
        .collect();
    let dockerfile = read("Dockerfile");
    let build_stage = dockerfile_instructions(&dockerfile)
        .into_iter()
        .skip_while(|i| !i.starts_with("FROM "))
        .skip(1)
        .take_while(|i| !i.starts_with("FROM "))
        .collect::<Vec<_>>();
    assert!(!build_stage.is_empty(), "a build stage");
    // A whole `cargo check` on a fresh machine: both cores for minutes.
    let _machine = crate::common::Machine::alone();

    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("docker-context");
    let _ = std::fs::remove_dir_all(&scratch);
    let workdir = scratch.join("src");
    std::fs::create_dir_all(&workdir).unwrap();
    // A target directory of its own that outlives the test, so that later
    // runs check only the crate.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("docker-context-target");
    for instruction in &build_stage {
        let (op, args) = instruction.split_once(' ').unwrap_or((instruction, ""));
        match op {
            "WORKDIR" => assert_eq!(
                args.trim(),
                "/src",
                "the test's scratch dir stands for /src"
            ),
            "COPY" => {
                let parts: Vec<&str> = args.split_whitespace().collect();
                assert!(
                    !parts[0].starts_with("--"),
                    "COPY flags in the build stage: {instruction}"
                );
                let (dest, sources) = parts.split_last().unwrap();
                for src in sources {
                    let to = if sources.len() > 1 || dest.ends_with('/') {
                        workdir.join(dest).join(src)
                    } else {
                        workdir.join(dest)
                    };
                    copy_context(root, &root.join(src), &to, &ignore);
                }
            }
            "RUN" => {
                let script = args.replace("cargo build", "cargo check --offline");
                let out = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&script)
                    .current_dir(&workdir)
                    .env("CARGO_TARGET_DIR", &target)
                    .output()
                    .expect("sh");
                assert!(
                    out.status.success(),
                    "RUN {script}\nfailed in the Dockerfile's build context:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            _ => {}
        }
    }
    assert!(
        build_stage
            .iter()
            .any(|i| i.starts_with("RUN ") && i.contains("cargo build --release --locked")),
        "the build stage builds the release binary with the lockfile"
    );
}

/// The Dockerfile's instructions, one per entry: comments dropped,
/// continuation lines joined.
fn dockerfile_instructions(dockerfile: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current).trim().to_string());
            }
        }
    }
    out
}

/// Copies `from` (a file or a tree of the repository) to `to`, leaving out
/// what `.dockerignore` names (paths from the context root).
fn copy_context(
    root: &std::path::Path,
    from: &std::path::Path,
    to: &std::path::Path,
    ignore: &[String],
) {
    let rel = from
        .strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/");
    if ignore
        .iter()
        .any(|p| rel == *p || rel.starts_with(&format!("{p}/")))
    {
        return;
    }
    let meta = std::fs::metadata(from).unwrap_or_else(|e| panic!("COPY source {rel}: {e}"));
    if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_context(root, &entry.path(), &to.join(entry.file_name()), ignore);
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

/// A plain clone stands alone: no file of the repository (sources, tests,
/// scripts, docs, config) refers to a folder beside the checkout.
#[test]
fn the_repository_refers_to_nothing_outside_itself() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Built here so that this file does not name what it looks for.
    let needles = [format!("../{}", "shared"), format!("{}/seeds", "shared")];
    let mut offenders = Vec::new();
    let mut stack: Vec<std::path::PathBuf> = [
        "README.md",
        "Dockerfile",
        ".ci",
        "config",
        "docs",
        "scripts",
        "src",
        "tests",
        "benches",
        "assets",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            let name = path.file_name().unwrap_or_default();
            if name == "node_modules" || name == "__pycache__" {
                continue;
            }
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            if needles.iter().any(|n| text.contains(n.as_str())) {
                offenders.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "files that refer outside the repository: {offenders:?}"
    );
}
