//! The queue surface (`queue.changed`): queued turns and steer input, kept
//! apart (a queued turn waits for its own turn; a steer enters the running
//! one).

use serde_json::{json, Value};

use super::reducer::{merge, nonempty, truncate, Reducer};

/// Queue item kinds: a queued turn waits for its own turn; a steer enters
/// the running turn. They never merge.
fn item_kind(item: &Value, list_key: &str, control: Option<&str>) -> &'static str {
    let word = ["kind", "intent", "mode", "type"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str));
    match word.or(control) {
        Some("steer") => "steer",
        Some("queue") | Some("queued") => "queue",
        _ => match list_key {
            "steer" | "steers" | "steering" => "steer",
            "items" => "unknown",
            _ => "queue",
        },
    }
}

impl Reducer<'_> {
    /// `queue.changed`: the payload is the whole queue state. Queued turns
    /// and steer input are listed as items with their `kind`, counted apart.
    pub fn on_queue(&mut self) {
        let control = nonempty(self.fact.taxonomy.control.as_deref())
            .or_else(|| self.first_str(&["control", "intent"]));
        let mut q = Value::Object(self.fact.payload.clone());
        let mut items = Vec::new();
        for key in [
            "queuedTurns",
            "queue",
            "queued",
            "items",
            "steer",
            "steers",
            "steering",
        ] {
            let list = match self.fact.payload_get(key) {
                Some(Value::Array(a)) => a.clone(),
                Some(v @ Value::Object(_)) => vec![v.clone()],
                Some(Value::String(s)) if !s.trim().is_empty() => vec![json!({"text": s})],
                _ => continue,
            };
            for (i, it) in list.iter().enumerate() {
                let it = if it.is_string() {
                    json!({ "text": it })
                } else {
                    it.clone()
                };
                let kind = item_kind(&it, key, control.as_deref());
                let s = |k: &str| it.get(k).and_then(Value::as_str).map(str::to_string);
                let id = s("id")
                    .or_else(|| s("queueId"))
                    .or_else(|| s("turnId"))
                    .unwrap_or_else(|| format!("{key}-{i}"));
                let mut item = json!({"id": id, "kind": kind});
                merge(
                    &mut item,
                    json!({
                        "status": s("status"),
                        "turnId": s("turnId"),
                        "text": s("text").or_else(|| s("preview")).map(|t| truncate(&t, 300)),
                    }),
                );
                items.push(item);
            }
        }
        let live = |i: &&Value| {
            !matches!(
                i.get("status").and_then(Value::as_str),
                Some("removed" | "started" | "promoted" | "done")
            )
        };
        let count = |k: &str| items.iter().filter(live).filter(|i| i["kind"] == k).count();
        q["queuedCount"] = json!(count("queue"));
        q["steerCount"] = json!(count("steer"));
        q["items"] = json!(items);
        if let Some(c) = control {
            q["control"] = json!(c);
        }
        q["updatedCursor"] = json!(self.cursor);
        self.state.queue = q;
        self.touch("queue", "queue");
    }
}
