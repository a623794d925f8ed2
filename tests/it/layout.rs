//! The house rules of the source (docs/ARCHITECTURE.md "Modules"), for the
//! server (`src/`) and its pure core (`crates/projector-core/src/`): no
//! module imports one that imports it back, file to file or folder to
//! folder; no source file holds more than about 500 lines outside its
//! `#[cfg(test)]` items; the core depends on no async runtime, HTTP stack,
//! logging or metrics; every file a module's index names exists. Read from
//! the source itself, so that a loop or an overgrown room fails here, not in
//! a reviewer's head; each rule is shown to fail on a planted violation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lines a source file may hold outside its `#[cfg(test)]` items.
const MAX_LINES: usize = 520;

/// The source without its `#[cfg(test)]` items: each such attribute, the
/// attributes after it, and the item it marks (a `mod x;` line, or the item
/// up to the brace that closes its body).
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let mut i = at + "#[cfg(test)]".len();
        let b = rest.as_bytes();
        // The item ends at a `;` or `,` outside any bracket, or at the `}`
        // that closes its body. String and char literals are skipped.
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                b'r' if rest[i..].starts_with("r#\"") => {
                    i += rest[i..].find("\"#").unwrap_or(b.len() - i) + 1;
                }
                b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
                b'\'' if b.get(i + 1) == Some(&b'\\') => {
                    i += rest[i + 2..].find('\'').map_or(b.len() - i, |k| k + 2);
                }
                b'{' | b'(' | b'[' => depth += 1,
                b'}' if depth == 1 => {
                    i += 1;
                    break;
                }
                b'}' | b')' | b']' => depth = depth.saturating_sub(1),
                b';' | b',' if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        rest = &rest[i.min(b.len())..];
    }
    out.push_str(rest);
    out
}

/// Every module of the server's library crate and of the core crate by
/// path (`session::actor`, `projection::tools`: the server re-exports the
/// core's modules under their own names), with its source outside its
/// tests. `main.rs` and the core's `lib.rs` (module declarations only) are
/// left out, and so are files under a `tests/` folder (test modules).
fn modules() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeMap::new();
    for src in [root.join("src"), root.join("crates/projector-core/src")] {
        let core = src != root.join("src");
        walk(&src, &src, core, &mut out);
    }
    out
}

fn walk(dir: &Path, root: &Path, core: bool, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            walk(&path, root, core, out);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let rel = path.strip_prefix(root).expect("under src/");
        let mut segs: Vec<String> = rel
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if segs == ["main"] || (core && segs == ["lib"]) {
            continue;
        }
        if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
            segs.pop();
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        out.insert(segs.join("::"), without_tests(&text));
    }
}

/// The paths a source names through `crate::` or `super::`, as segment
/// lists relative to the crate root (`use super::{a, b::c}` gives both).
fn referenced(module: &str, source: &str) -> Vec<Vec<String>> {
    let code: String = source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let own: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let bytes = code.as_bytes();
    let ident = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
            j += 1;
        }
        (code[i..j].to_string(), j)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // Identifiers are ASCII, so `i` is on a char boundary whenever one starts.
        if !(bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let (word, end) = ident(i);
        if !starts_word || !(word == "crate" || word == "super") {
            i = end;
            continue;
        }
        let mut base = if word == "crate" {
            Vec::new()
        } else {
            own[..own.len().saturating_sub(1)].to_vec()
        };
        let mut j = end;
        while code[j..].starts_with("::") {
            j += 2;
            if bytes.get(j) == Some(&b'{') {
                // One level of a use group: the first segments of its items.
                let close = code[j..].find('}').map_or(bytes.len(), |k| j + k);
                for item in code[j + 1..close].split(',') {
                    let first = item.trim().split("::").next().unwrap_or("").trim();
                    if !first.is_empty() && first != "self" {
                        let mut p = base.clone();
                        p.push(first.to_string());
                        out.push(p);
                    }
                }
                base.clear();
                j = close;
                break;
            }
            let (seg, next) = ident(j);
            if seg.is_empty() {
                break;
            }
            if seg == "super" {
                base.pop();
            } else {
                base.push(seg);
            }
            j = next;
        }
        if !base.is_empty() {
            out.push(base);
        }
        i = j.max(end);
    }
    out.extend(relative_uses(&own, &code));
    out
}

/// The paths of `use` declarations relative to the module itself (`use
/// registry::Registry;`, `pub use expiry::until_expiry;`, `use self::a::b`):
/// re-exports count as imports. Paths of other crates resolve to no module
/// and are dropped by `resolve`.
fn relative_uses(own: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let t = stmt.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(path) = t.strip_prefix("use ") else {
            continue;
        };
        let path = path.trim().trim_start_matches("self::");
        let first = path.split("::").next().unwrap_or("").trim();
        if first.is_empty()
            || matches!(first, "crate" | "super" | "std" | "core" | "alloc")
            || !first
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            continue;
        }
        let mut p = own.to_vec();
        p.extend(
            path.split("::")
                .map(|s| s.trim().to_string())
                .take_while(|s| !s.is_empty() && !s.starts_with('{')),
        );
        out.push(p);
    }
    out
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &[String], modules: &BTreeMap<String, String>) -> Option<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|p| modules.contains_key(p))
}

/// `a` is `b` or lies inside it (a child naming its parent, or a parent
/// its child, is the tree itself, not a loop).
fn within(a: &str, b: &str) -> bool {
    b.is_empty() || a == b || a.starts_with(&format!("{b}::"))
}

/// The import graph between modules that do not contain one another.
fn graph(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    modules
        .iter()
        .map(|(m, src)| {
            let deps = referenced(m, src)
                .iter()
                .filter_map(|p| resolve(p, modules))
                .filter(|d| !within(m, d) && !within(d, m))
                .collect();
            (m.clone(), deps)
        })
        .collect()
}

/// The graph of top-level rooms (a module's first path segment): an edge
/// wherever a module of one imports a module of another. The crate root
/// (`lib.rs`, which wires every room together) is left out.
fn folders(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, deps) in g {
        let a = top(m);
        if a.is_empty() {
            continue;
        }
        let entry = out.entry(a.clone()).or_default();
        for d in deps {
            let b = top(d);
            if !b.is_empty() && b != a {
                entry.insert(b);
            }
        }
    }
    out
}

/// One cycle of the graph, if it has any.
fn a_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == d).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(d, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_import_loops() {
    let modules = modules();
    assert!(
        modules.contains_key("session::actor::ingest"),
        "src/ was read"
    );
    let g = graph(&modules);
    // The reading itself is checked: known one-way edges are seen.
    assert!(
        g["http::ingest"].contains("session"),
        "{:?}",
        g["http::ingest"]
    );
    assert!(g["config"].contains("allowlist"), "{:?}", g["config"]);
    if let Some(cycle) = a_cycle(&g) {
        panic!("an import loop: {}", cycle.join(" -> "));
    }
    let rooms = folders(&g);
    assert!(rooms["http"].contains("session"), "{:?}", rooms["http"]);
    assert!(
        rooms["session"].contains("projection"),
        "{:?}",
        rooms["session"]
    );
    if let Some(cycle) = a_cycle(&rooms) {
        panic!("an import loop between rooms: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_detector_finds_a_loop_between_rooms_and_through_a_re_export() {
    // `session::registry` names the stream room, whose mod.rs names the
    // session room: no file imports one that imports it back, the rooms do.
    let mut modules = BTreeMap::new();
    modules.insert(String::new(), String::new());
    modules.insert("session".into(), "pub use registry::Registry;".into());
    modules.insert(
        "session::registry".into(),
        "use crate::stream::StartAt;".into(),
    );
    modules.insert("stream".into(), "use crate::session::Registry;".into());
    let g = graph(&modules);
    assert!(a_cycle(&g).is_none(), "no loop file to file: {g:?}");
    let cycle = a_cycle(&folders(&g)).expect("a loop between rooms");
    assert!(cycle.contains(&"session".to_string()) && cycle.contains(&"stream".to_string()));
    // A bare re-export is an import: `a` re-exports `b::x`, `b` uses `a`.
    let mut modules = BTreeMap::new();
    modules.insert("a".into(), "mod inner;".into());
    modules.insert("a::inner".into(), "pub use crate::b::X;".into());
    modules.insert("b".into(), "pub use crate::a::inner::Y;".into());
    modules.insert("c".into(), "pub use d::Z;".into());
    modules.insert("c::d".into(), String::new());
    let g = graph(&modules);
    assert!(a_cycle(&g).is_some(), "{g:?}");
    assert!(g["c"].is_empty(), "a child re-exported is the room itself");
    assert_eq!(
        relative_uses(&["c".into()], "pub use d::Z; use serde::Deserialize;"),
        [
            vec!["c".to_string(), "d".into(), "Z".into()],
            vec!["c".to_string(), "serde".into(), "Deserialize".into()]
        ]
    );
}

#[test]
fn the_detector_finds_a_loop() {
    let mut modules = BTreeMap::new();
    modules.insert(String::new(), String::new());
    modules.insert("config".into(), "use crate::control::validate;".into());
    modules.insert(
        "control".into(),
        "use crate::{config::ControlsConfig, frame};".into(),
    );
    modules.insert("frame".into(), String::new());
    modules.insert(
        "session::actor".into(),
        "use super::registry::Inner;".into(),
    );
    modules.insert(
        "session::registry".into(),
        "use super::actor::Actor;".into(),
    );
    modules.insert("session".into(), "pub use registry::Registry;".into());
    let g = graph(&modules);
    assert!(g["control"].contains("frame"));
    assert!(g["session::actor"].contains("session::registry"));
    let cycle = a_cycle(&g).expect("a loop");
    assert!(cycle.contains(&"config".to_string()) || cycle.contains(&"session::actor".to_string()));
}

#[test]
fn lines_are_counted_outside_test_items() {
    // A test field early in a struct does not end the count.
    let planted = format!(
        "struct S {{\n    #[cfg(test)]\n    seen: u32,\n    a: u8,\n}}\n{}",
        "fn f() {}\n".repeat(600)
    );
    assert!(without_tests(&planted).lines().count() > MAX_LINES);
    // A test module, a declared one and a test function are left out, with
    // braces in their strings and chars; what follows them counts.
    let src = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let _ = (\"}\", '{', b'}'); }\n}\n#[cfg(test)]\n#[path = \"tests/x.rs\"]\nmod x;\n#[cfg(test)]\nfn helper() -> u8 { 1 }\nfn b() {}\n";
    let kept = without_tests(src);
    assert!(kept.contains("fn a()") && kept.contains("fn b()"), "{kept}");
    assert!(
        !kept.contains("fn t()") && !kept.contains("mod x") && !kept.contains("helper"),
        "{kept}"
    );
}

#[test]
fn no_room_is_overgrown() {
    let over: Vec<String> = modules()
        .iter()
        .filter(|(m, _)| !m.rsplit("::").next().unwrap_or("").starts_with("tests"))
        .map(|(m, src)| (m, src.lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(m, n)| format!("{m}: {n} lines"))
        .collect();
    assert!(
        over.is_empty(),
        "over {MAX_LINES} lines besides tests: {over:?}"
    );
}

/// The crates the core may not depend on: an async runtime, an HTTP stack,
/// logging, metrics, a store or a client.
const NOT_IN_CORE: &[&str] = &[
    "tokio",
    "axum",
    "hyper",
    "tower",
    "tracing",
    "metrics",
    "reqwest",
    "redis",
    "redb",
    "futures",
    "futures-util",
];

/// The names in a manifest's `[dependencies]` that the core may not have.
fn forbidden_in_core(manifest: &str) -> Vec<String> {
    let deps = manifest
        .split("\n[")
        .find(|t| t.starts_with("dependencies]"))
        .unwrap_or("");
    deps.lines()
        .skip(1)
        .filter_map(|l| l.split('=').next())
        .map(str::trim)
        .filter(|n| {
            NOT_IN_CORE
                .iter()
                .any(|x| n == x || n.starts_with(&format!("{x}-")))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn the_core_knows_nothing_of_async_http_logs_or_metrics() {
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/projector-core/Cargo.toml"
    ))
    .unwrap();
    assert!(
        manifest.contains("serde_json"),
        "the core's manifest was read"
    );
    assert_eq!(forbidden_in_core(&manifest), Vec::<String>::new());
    // And the check sees a planted one.
    let planted = manifest.replace(
        "[dependencies]\n",
        "[dependencies]\ntokio = \"1\"\nmetrics = \"0.24\"\n",
    );
    assert_eq!(forbidden_in_core(&planted), ["tokio", "metrics"]);
}

/// The files a module index names in backticks (`reducer.rs`, `tests/`,
/// `public_state/`) that do not exist beside it.
fn missing_signposts(dir: &Path, doc: &str) -> Vec<String> {
    doc.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            (t.ends_with(".rs") || t.ends_with('/')) && !t.contains(' ') && !t.starts_with("../")
        })
        .filter(|t| !dir.join(t).exists())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_file_a_module_index_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for index in [
        "src/lib.rs",
        "crates/projector-core/src/lib.rs",
        "crates/projector-core/src/projection/mod.rs",
        "src/stream/mod.rs",
        "src/session/mod.rs",
        "src/store/mod.rs",
    ] {
        let path = root.join(index);
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for m in missing_signposts(path.parent().unwrap(), &doc) {
            missing.push(format!("{index} names {m}"));
        }
    }
    // docs/ARCHITECTURE.md names files by their path from the repository.
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    for m in missing_signposts(root, &arch) {
        if m.starts_with("src/") || m.starts_with("crates/") {
            missing.push(format!("docs/ARCHITECTURE.md names {m}"));
        }
    }
    assert!(missing.is_empty(), "{missing:?}");
    // A planted stale name is found.
    let dir = root.join("crates/projector-core/src/projection");
    assert_eq!(
        missing_signposts(&dir, "`reducer.rs`, `state.rs` and `tests/`"),
        ["state.rs"]
    );
}
