//! The house rules of `src/` (docs/ARCHITECTURE.md "Modules"): no module
//! imports one that imports it back, and no source file holds more than
//! about 500 lines besides its tests. Read from the source itself, so that a
//! loop or an overgrown room fails here, not in a reviewer's head.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lines a source file may hold before its `#[cfg(test)]` module.
const MAX_LINES: usize = 520;

/// Every module of the library crate by path (`session::actor`), with its
/// source up to its tests. `main.rs` is another crate and is left out.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
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
            if segs == ["main"] {
                continue;
            }
            if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
                segs.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            let body = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            out.insert(segs.join("::"), body);
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
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
