//! Umo Editor live updates (seed 001 `strategy: append | merge`): the
//! content-block updates one `UIMessageChunk` makes to a Umo message, for a
//! consumer that follows a session as it happens. Pure mapping, no state
//! but the message's role. A block is named by `id` (the part's chunk id,
//! tool call id, source or data id); `append` adds `data` (text) to the
//! block with that id, `merge` replaces the block's fields with these.
//!
//! | chunk | Umo update |
//! |---|---|
//! | `start` | the message, `status: pending` |
//! | `text-start` / `-delta` / `-end` | `markdown` (assistant) or `text` block, `append`; `status` streaming, then complete |
//! | `reasoning-start` / `-delta` / `-end` | `thinking` `{title, text}`, `append` of `data.text`; `status` complete at the end |
//! | `tool-input-start` / `-delta` / `-available`, `tool-output-*` | `toolcall` `{toolCallId, toolCallName?, eventType, args?, chunk?, result?}`, `merge` |
//! | `source-url` / `source-document`, `data-evidence-citation` | a `search` block of one reference, `merge` |
//! | `file` | `image` (assistant, `image/*`) or `attachment`, `merge` |
//! | `data-artifact-card` / `-action-request` / `-plan` / `-attachment` | `artifact` / `action` / `plan` / `attachment`, `merge` |
//! | `finish` / `abort` / `error` | the message's `status`: complete (error for `finishReason: error`) / stop / error |
//!
//! Diagnostics, step starts and other `data-*` parts are not conversation
//! content, as in [`super::umo_blocks`].

use serde_json::{json, Value};

use super::ui_message::Role;
use super::umo_blocks::file_type;

/// What one chunk changes in a Umo message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Update {
    /// The message's new status, if the chunk sets one.
    pub status: Option<&'static str>,
    /// Content blocks to append to or merge into, in order.
    pub blocks: Vec<Value>,
}

fn s<'a>(c: &'a Value, k: &str) -> Option<&'a str> {
    c.get(k).and_then(Value::as_str)
}

fn block(ty: &str, id: &str, data: Value, strategy: &str, status: Option<&str>) -> Value {
    let mut b = json!({"type": ty, "id": id, "data": data, "strategy": strategy});
    if let Some(st) = status {
        b["status"] = st.into();
    }
    b
}

fn toolcall(c: &Value, event: &str, extra: Value, status: &str) -> Value {
    let id = s(c, "toolCallId").unwrap_or_default();
    let mut data = json!({"toolCallId": id, "eventType": event});
    if let Some(n) = s(c, "toolName") {
        data["toolCallName"] = n.into();
    }
    if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
        d.extend(x);
    }
    block("toolcall", id, data, "merge", Some(status))
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    }
}

fn search(id: &str, reference: Value) -> Value {
    block(
        "search",
        id,
        json!({"title": "Sources", "references": [reference]}),
        "merge",
        None,
    )
}

/// The update `chunk` (a `UIMessageChunk` as JSON) makes to a message of
/// `role`.
pub fn update(role: Role, chunk: &Value) -> Update {
    let assistant = role == Role::Assistant;
    let text_type = if assistant { "markdown" } else { "text" };
    let id = |k: &str| s(chunk, k).unwrap_or_default();
    let one = |b: Value| Update {
        status: None,
        blocks: vec![b],
    };
    let ty = s(chunk, "type").unwrap_or_default();
    match ty {
        "start" => Update {
            status: Some("pending"),
            blocks: Vec::new(),
        },
        "text-start" => one(block(
            text_type,
            id("id"),
            json!(""),
            "append",
            Some("streaming"),
        )),
        "text-delta" => one(block(
            text_type,
            id("id"),
            json!(id("delta")),
            "append",
            Some("streaming"),
        )),
        "text-end" => one(block(
            text_type,
            id("id"),
            json!(""),
            "append",
            Some("complete"),
        )),
        "reasoning-start" | "reasoning-delta" | "reasoning-end" => {
            let status = if ty == "reasoning-end" {
                "complete"
            } else {
                "streaming"
            };
            let text = if ty == "reasoning-delta" {
                id("delta")
            } else {
                ""
            };
            one(block(
                "thinking",
                id("id"),
                json!({"title": "Thinking", "text": text}),
                "append",
                Some(status),
            ))
        }
        "tool-input-start" => one(toolcall(chunk, "TOOL_CALL_START", json!({}), "streaming")),
        "tool-input-delta" => one(toolcall(
            chunk,
            "TOOL_CALL_ARGS",
            json!({"chunk": id("inputTextDelta")}),
            "streaming",
        )),
        "tool-input-available" => one(toolcall(
            chunk,
            "TOOL_CALL_END",
            json!({"args": chunk.get("input").map(text_of).unwrap_or_default()}),
            "streaming",
        )),
        "tool-output-available" => {
            let preliminary = chunk.get("preliminary").and_then(Value::as_bool) == Some(true);
            one(toolcall(
                chunk,
                "TOOL_CALL_RESULT",
                json!({"result": chunk.get("output").map(text_of).unwrap_or_default()}),
                if preliminary { "streaming" } else { "complete" },
            ))
        }
        "tool-output-error" => one(toolcall(
            chunk,
            "TOOL_CALL_RESULT",
            json!({"result": id("errorText")}),
            "error",
        )),
        "tool-output-denied" => one(toolcall(chunk, "TOOL_CALL_RESULT", json!({}), "stop")),
        "source-url" => {
            let url = id("url");
            let mut r = json!({"title": s(chunk, "title").unwrap_or(url), "url": url});
            if let Some(site) = url
                .split("://")
                .nth(1)
                .and_then(|r| r.split(['/', '?', '#']).next())
            {
                r["site"] = site.into();
            }
            one(search(id("sourceId"), r))
        }
        "source-document" => one(search(
            id("sourceId"),
            json!({"title": id("title"), "type": "document"}),
        )),
        "file" => {
            let (url, media) = (id("url"), id("mediaType"));
            if assistant && media.starts_with("image/") {
                one(block("image", url, json!({"url": url}), "merge", None))
            } else {
                one(block(
                    "attachment",
                    url,
                    json!([{"fileType": file_type(Some(media), None), "url": url,
                            "metadata": {"mediaType": media}}]),
                    "merge",
                    None,
                ))
            }
        }
        "finish" => Update {
            status: Some(if s(chunk, "finishReason") == Some("error") {
                "error"
            } else {
                "complete"
            }),
            blocks: Vec::new(),
        },
        "abort" => Update {
            status: Some("stop"),
            blocks: Vec::new(),
        },
        "error" => Update {
            status: Some("error"),
            blocks: Vec::new(),
        },
        t if t.starts_with("data-") => data_update(&t[5..], chunk),
        _ => Update::default(),
    }
}

/// The update of a `data-<name>` part.
fn data_update(name: &str, chunk: &Value) -> Update {
    let id = s(chunk, "id").unwrap_or_default();
    let data = chunk.get("data").cloned().unwrap_or(Value::Null);
    let b = match name {
        "evidence-citation" => {
            let mut r = json!({"title": s(&data, "title").or(s(&data, "evidenceId")).unwrap_or("evidence"),
                               "type": "evidence"});
            for (from, to) in [("url", "url"), ("date", "date"), ("snippet", "content")] {
                if let Some(v) = s(&data, from) {
                    r[to] = v.into();
                }
            }
            if let Some(site) = s(&data, "source") {
                r["site"] = site.into();
            }
            search(id, r)
        }
        "artifact-card" => block("artifact", id, data, "merge", None),
        "action-request" => block("action", id, data, "merge", None),
        "plan" => block("plan", id, data, "merge", None),
        "attachment" => block("attachment", id, json!([data]), "merge", None),
        _ => return Update::default(),
    };
    Update {
        status: None,
        blocks: vec![b],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_appends_and_the_message_status_follows() {
        let u = update(
            Role::Assistant,
            &json!({"type": "text-delta", "id": "t1", "delta": "Hel"}),
        );
        assert_eq!(
            u.blocks,
            [
                json!({"type": "markdown", "id": "t1", "data": "Hel", "strategy": "append", "status": "streaming"})
            ]
        );
        let u = update(
            Role::User,
            &json!({"type": "text-delta", "id": "t1", "delta": "Hi"}),
        );
        assert_eq!(u.blocks[0]["type"], "text");
        assert_eq!(
            update(Role::Assistant, &json!({"type": "start"})).status,
            Some("pending")
        );
        assert_eq!(
            update(
                Role::Assistant,
                &json!({"type": "finish", "finishReason": "error"})
            )
            .status,
            Some("error")
        );
        assert_eq!(
            update(Role::Assistant, &json!({"type": "abort"})).status,
            Some("stop")
        );
    }

    #[test]
    fn tools_sources_and_cards_merge_by_id() {
        let u = update(
            Role::Assistant,
            &json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "grep",
                    "input": {"q": "x"}}),
        );
        assert_eq!(u.blocks[0]["id"], "c1");
        assert_eq!(u.blocks[0]["strategy"], "merge");
        assert_eq!(u.blocks[0]["data"]["args"], r#"{"q":"x"}"#);
        assert_eq!(u.blocks[0]["data"]["toolCallName"], "grep");
        let u = update(
            Role::Assistant,
            &json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"n": 2},
                    "preliminary": true}),
        );
        assert_eq!(
            u.blocks[0]["status"], "streaming",
            "a preliminary result is not the end"
        );
        let u = update(
            Role::Assistant,
            &json!({"type": "source-url", "sourceId": "s1", "url": "https://ex.com/a", "title": "A"}),
        );
        assert_eq!(u.blocks[0]["data"]["references"][0]["site"], "ex.com");
        let u = update(
            Role::Assistant,
            &json!({"type": "data-action-request", "id": "a1", "data": {"actionId": "a1", "status": "pending"}}),
        );
        assert_eq!(u.blocks[0]["type"], "action");
        assert!(update(
            Role::Assistant,
            &json!({"type": "data-diagnostic-ref", "id": "d"})
        )
        .blocks
        .is_empty());
    }
}
