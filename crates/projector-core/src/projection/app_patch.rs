//! `state.snapshot` / `state.delta`: the application state object
//! (`state.app`), the one target external state may write. `state.delta`
//! carries an RFC 6902 JSON Patch whose paths must lie under `/app` (for
//! example `/app/board/columns/0`); a patch that names any other target
//! (`/actions/...`, `/tools/...`, `/messages/...`), fails an op (a `test`
//! that does not hold, a missing path) or grows the object past
//! [`MAX_APP_BYTES`] is rejected whole, with a `state_delta_rejected`
//! finding. The ops are implemented here (add, remove, replace, move, copy,
//! test): a hundred lines, atomic by working on a copy, with no new
//! dependency and full control over the allowed targets.

use serde_json::{json, Value};

use super::public_state::Severity;
use super::reducer::Reducer;

/// The one allowed patch root.
pub const APP_ROOT: &str = "/app";
/// Largest application state (JSON text), in bytes.
pub const MAX_APP_BYTES: usize = 65_536;

/// RFC 6901 pointer tokens of `path`, which must be under `/app`.
fn app_tokens(path: &str) -> Result<Vec<String>, String> {
    let rest = if path == APP_ROOT {
        ""
    } else if let Some(r) = path.strip_prefix("/app/") {
        return Ok(r
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect());
    } else {
        return Err(format!(
            "path '{path}' is not under {APP_ROOT}: only the application state may be patched"
        ));
    };
    debug_assert!(rest.is_empty());
    Ok(Vec::new())
}

fn get<'v>(root: &'v Value, toks: &[String]) -> Option<&'v Value> {
    toks.iter().try_fold(root, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn get_mut<'v>(root: &'v mut Value, toks: &[String]) -> Option<&'v mut Value> {
    toks.iter().try_fold(root, |v, t| match v {
        Value::Object(m) => m.get_mut(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    })
}

fn index(t: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && t == "-" {
        return Ok(len);
    }
    let bad = || format!("bad array index '{t}'");
    if t.len() > 1 && t.starts_with('0') {
        return Err(bad());
    }
    let i: usize = t.parse().map_err(|_| bad())?;
    let max = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if i > max || (!allow_end && len == 0) {
        return Err(format!("array index {i} out of range"));
    }
    Ok(i)
}

fn add(root: &mut Value, toks: &[String], v: Value) -> Result<(), String> {
    let Some((last, parent)) = toks.split_last() else {
        *root = v;
        return Ok(());
    };
    match get_mut(root, parent) {
        Some(Value::Object(m)) => {
            m.insert(last.clone(), v);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i = index(last, a.len(), true)?;
            a.insert(i, v);
            Ok(())
        }
        _ => Err("the parent of the path does not exist".into()),
    }
}

fn remove(root: &mut Value, toks: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = toks.split_last() else {
        return Err("cannot remove the application state itself".into());
    };
    match get_mut(root, parent) {
        Some(Value::Object(m)) => m
            .shift_remove(last)
            .ok_or_else(|| format!("no member '{last}' to remove")),
        Some(Value::Array(a)) => {
            let i = index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err("the path does not exist".into()),
    }
}

/// Apply `ops` to a copy of `app`; the patched copy, or why not.
pub fn apply_patch(app: &Value, ops: &[Value]) -> Result<Value, String> {
    let mut doc = json!({ "app": app.clone() });
    for (n, op) in ops.iter().enumerate() {
        let fail = |m: String| format!("op {n}: {m}");
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("no `op`".into()))?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("no `path`".into()))?;
        let mut toks = vec!["app".to_string()];
        toks.extend(app_tokens(path).map_err(fail)?);
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| fail("no `value`".into()))
        };
        let from = || -> Result<Vec<String>, String> {
            let f = op
                .get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| fail("no `from`".into()))?;
            let mut t = vec!["app".to_string()];
            t.extend(app_tokens(f).map_err(fail)?);
            Ok(t)
        };
        match name {
            "add" => add(&mut doc, &toks, value()?).map_err(fail)?,
            "remove" => {
                remove(&mut doc, &toks).map_err(fail)?;
            }
            "replace" => {
                let v = value()?;
                let slot = get_mut(&mut doc, &toks)
                    .ok_or_else(|| fail(format!("'{path}' does not exist")))?;
                *slot = v;
            }
            "move" => {
                let f = from()?;
                if toks.len() > f.len() && toks.starts_with(&f) {
                    return Err(fail("cannot move a value into itself".into()));
                }
                let v = remove(&mut doc, &f).map_err(fail)?;
                add(&mut doc, &toks, v).map_err(fail)?;
            }
            "copy" => {
                let f = from()?;
                let v = get(&doc, &f)
                    .cloned()
                    .ok_or_else(|| fail("`from` does not exist".into()))?;
                add(&mut doc, &toks, v).map_err(fail)?;
            }
            "test" => {
                let v = value()?;
                if get(&doc, &toks) != Some(&v) {
                    return Err(fail(format!("test of '{path}' failed")));
                }
            }
            other => return Err(fail(format!("unknown op '{other}'"))),
        }
    }
    let app = doc.get_mut("app").map(Value::take).unwrap_or(Value::Null);
    if !app.is_object() {
        return Err("the application state must stay an object".into());
    }
    let size = serde_json::to_string(&app)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > MAX_APP_BYTES {
        return Err(format!(
            "the application state would be {size} bytes; the limit is {MAX_APP_BYTES}"
        ));
    }
    Ok(app)
}

impl<'a> Reducer<'a> {
    /// `state.delta`: patch `state.app`, or reject the whole patch.
    pub fn on_state_delta(&mut self) {
        let target = self.first_str(&["target"]);
        let ops = ["patch", "operations", "ops", "delta"]
            .iter()
            .find_map(|k| self.fact.payload_get(k).and_then(Value::as_array).cloned());
        let result = match (target.as_deref(), ops) {
            (Some(t), _) if t != "app" && t != APP_ROOT => {
                Err(format!("target '{t}' is not allowed; only 'app' is"))
            }
            (_, None) => Err("no JSON Patch array in payload.patch".into()),
            (_, Some(ops)) => apply_patch(&self.state.app, &ops),
        };
        match result {
            Ok(app) => {
                if app != self.state.app {
                    self.state.app = app;
                    self.touch("app", "app");
                }
            }
            Err(why) => self.finding(
                "state_delta_rejected",
                format!("state.delta rejected, nothing applied: {why}"),
            ),
        }
    }

    /// `state.snapshot` (or a repair carrying `payload.state`/`app`): the
    /// whole application state.
    pub fn on_app_snapshot(&mut self) {
        let Some(v) = self.first_value(&["app", "state"]) else {
            return;
        };
        match apply_patch(
            &json!({}),
            &[json!({"op": "add", "path": "/app", "value": v})],
        ) {
            Ok(app) => {
                self.state.app = app;
                self.touch("app", "app");
            }
            Err(why) => {
                self.diag(
                    "state_snapshot_rejected",
                    Severity::Warning,
                    format!("state.snapshot not applied: {why}"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(app: Value, ops: Value) -> Result<Value, String> {
        apply_patch(&app, ops.as_array().unwrap())
    }

    #[test]
    fn every_op() {
        let app = json!({"a": 1, "list": [1, 2], "o": {"x": "y"}});
        let out = patch(
            app,
            json!([
                {"op": "add", "path": "/app/b", "value": 2},
                {"op": "add", "path": "/app/list/-", "value": 3},
                {"op": "add", "path": "/app/list/0", "value": 0},
                {"op": "remove", "path": "/app/a"},
                {"op": "replace", "path": "/app/o/x", "value": "z"},
                {"op": "copy", "from": "/app/o", "path": "/app/o2"},
                {"op": "move", "from": "/app/b", "path": "/app/c"},
                {"op": "test", "path": "/app/list", "value": [0, 1, 2, 3]},
                {"op": "add", "path": "/app/we~1ird~0", "value": true}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"list": [0, 1, 2, 3], "o": {"x": "z"}, "o2": {"x": "z"}, "c": 2, "we/ird~": true})
        );
    }

    #[test]
    fn failures_are_whole_and_targets_are_checked() {
        let app = json!({"a": 1});
        for (ops, why) in [
            (
                json!([{"op": "replace", "path": "/actions/a1/status", "value": "resolved"}]),
                "not under /app",
            ),
            (
                json!([{"op": "add", "path": "/app/b", "value": 1}, {"op": "test", "path": "/app/a", "value": 2}]),
                "test of",
            ),
            (json!([{"op": "remove", "path": "/app/zz"}]), "no member"),
            (
                json!([{"op": "replace", "path": "/app/zz", "value": 1}]),
                "does not exist",
            ),
            (
                json!([{"op": "add", "path": "/app/x/y", "value": 1}]),
                "parent",
            ),
            (
                json!([{"op": "replace", "path": "/app", "value": [1]}]),
                "stay an object",
            ),
            (
                json!([{"op": "move", "from": "/app", "path": "/app/a/b"}]),
                "into itself",
            ),
            (
                json!([{"op": "copy", "from": "/tools", "path": "/app/t"}]),
                "not under /app",
            ),
            (
                json!([{"op": "frobnicate", "path": "/app/a"}]),
                "unknown op",
            ),
            (
                json!([{"op": "add", "path": "/app/big", "value": "x".repeat(MAX_APP_BYTES)}]),
                "limit",
            ),
        ] {
            let err = patch(app.clone(), ops).unwrap_err();
            assert!(err.contains(why), "{err} should say {why}");
        }
    }
}
