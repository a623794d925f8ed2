//! What the AG-UI client of one connection holds: the AG-UI messages the
//! view's events built, each with the session message it belongs to,
//! applied as `@ag-ui/client` applies them. AG-UI has no event that takes
//! back a message or its content, so when a step is tried again (a
//! `data-superseded` chunk) the view replaces that message's AG-UI
//! messages here and sends them all as one `MESSAGES_SNAPSHOT`, which the
//! client applies as a replacement. The copy is as large as the messages
//! the client holds; the AG-UI view is for AG-UI clients, not for fan-out.

use serde_json::{json, Value};

/// The AG-UI messages of one connection's client, in its order.
#[derive(Debug, Default)]
pub(super) struct Mirror {
    /// (session message id, AG-UI message).
    held: Vec<(String, Value)>,
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

impl Mirror {
    fn find(&self, id: &str) -> Option<usize> {
        self.held.iter().position(|(_, m)| m["id"] == id)
    }

    /// Tool call `tc` in the AG-UI message that holds it.
    fn call(&mut self, tc: &str) -> Option<&mut Value> {
        self.held.iter_mut().find_map(|(_, m)| {
            m.get_mut("toolCalls")?
                .as_array_mut()?
                .iter_mut()
                .find(|c| c["id"] == tc)
        })
    }

    /// A `MESSAGES_SNAPSHOT` of `fresh` applied as the client applies it:
    /// what it held and the snapshot names is replaced, what it names anew
    /// is added; what it held and the snapshot does not name goes, except
    /// reasoning (activity) messages when the snapshot has none of them.
    pub fn snapshot(&mut self, fresh: Vec<(String, Value)>) {
        let has = |r: &str| fresh.iter().any(|(_, m)| role(m) == r);
        let (reasoning, activity) = (has("reasoning"), has("activity"));
        let old = std::mem::take(&mut self.held);
        let mut fresh: Vec<Option<(String, Value)>> = fresh.into_iter().map(Some).collect();
        for (owner, m) in old {
            match fresh
                .iter_mut()
                .find(|f| f.as_ref().is_some_and(|f| f.1["id"] == m["id"]))
            {
                Some(f) => self.held.extend(f.take()),
                None if (role(&m) == "reasoning" && !reasoning)
                    || (role(&m) == "activity" && !activity) =>
                {
                    self.held.push((owner, m))
                }
                None => {}
            }
        }
        self.held.extend(fresh.into_iter().flatten());
    }

    /// The messages of session message `owner` replaced by `fresh`, where
    /// the first of them stood: the `MESSAGES_SNAPSHOT` messages to send.
    /// The copy becomes what a client holds once it applied them.
    pub fn replace(&mut self, owner: &str, fresh: Vec<Value>) -> Vec<Value> {
        let at = self.held.iter().position(|(o, _)| o == owner);
        let mut all: Vec<(String, Value)> = Vec::with_capacity(self.held.len() + fresh.len());
        let mut fresh = Some(fresh);
        for (i, h) in self.held.iter().enumerate() {
            if Some(i) == at {
                let f = fresh.take().unwrap_or_default();
                all.extend(f.into_iter().map(|m| (owner.to_string(), m)));
            }
            if h.0 != owner {
                all.push(h.clone());
            }
        }
        if let Some(f) = fresh {
            all.extend(f.into_iter().map(|m| (owner.to_string(), m)));
        }
        let out = all.iter().map(|(_, m)| m.clone()).collect();
        self.snapshot(all);
        out
    }

    /// Apply one event of session message `owner`'s chunks.
    pub fn apply(&mut self, owner: &str, e: &Value) {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
        let agent = e.get("subagentRunId").filter(|a| !a.is_null());
        let new = |mut m: Value| {
            if let Some(a) = agent {
                m["subagentRunId"] = a.clone();
            }
            (owner.to_string(), m)
        };
        match s("type") {
            "TEXT_MESSAGE_START" if self.find(s("messageId")).is_none() => {
                let role = e.get("role").and_then(Value::as_str).unwrap_or("assistant");
                self.held.push(new(
                    json!({"id": s("messageId"), "role": role, "content": ""}),
                ));
            }
            "REASONING_MESSAGE_START" if self.find(s("messageId")).is_none() => {
                self.held.push(new(
                    json!({"id": s("messageId"), "role": "reasoning", "content": ""}),
                ));
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                if let Some(i) = self.find(s("messageId")) {
                    let m = &mut self.held[i].1;
                    match m.get_mut("content") {
                        Some(Value::String(c)) => c.push_str(s("delta")),
                        _ => m["content"] = s("delta").into(),
                    }
                }
            }
            "TOOL_CALL_START" => {
                let tc = s("toolCallId");
                if self.call(tc).is_some() {
                    return;
                }
                let call = json!({"id": tc, "type": "function",
                                  "function": {"name": s("toolCallName"), "arguments": ""}});
                let parent = s("parentMessageId");
                let i = match self.find(parent) {
                    Some(i) if role(&self.held[i].1) == "assistant" => i,
                    found => {
                        let id = if found.is_some() || parent.is_empty() {
                            tc
                        } else {
                            parent
                        };
                        self.held
                            .push(new(json!({"id": id, "role": "assistant", "toolCalls": []})));
                        self.held.len() - 1
                    }
                };
                let m = &mut self.held[i].1;
                match m.get_mut("toolCalls").and_then(Value::as_array_mut) {
                    Some(calls) => calls.push(call),
                    None => m["toolCalls"] = json!([call]),
                }
            }
            "TOOL_CALL_ARGS" => {
                if let Some(Value::String(a)) = self
                    .call(s("toolCallId"))
                    .and_then(|c| c.pointer_mut("/function/arguments"))
                {
                    a.push_str(s("delta"));
                }
            }
            "TOOL_CALL_RESULT" => {
                let tc = s("toolCallId");
                let m = new(json!({"id": s("messageId"), "toolCallId": tc,
                                   "role": e.get("role").cloned().unwrap_or(json!("tool")),
                                   "content": e.get("content").cloned().unwrap_or(json!(""))}));
                let caller = self.held.iter().position(|(_, h)| {
                    role(h) == "assistant"
                        && h["toolCalls"]
                            .as_array()
                            .is_some_and(|cs| cs.iter().any(|c| c["id"] == tc))
                });
                match caller {
                    None => self.held.push(m),
                    Some(k) => {
                        let mut j = k + 1;
                        while j < self.held.len() && role(&self.held[j].1) == "tool" {
                            j += 1;
                        }
                        self.held.insert(j, m);
                    }
                }
            }
            "ACTIVITY_SNAPSHOT" => {
                let m = new(json!({"id": s("messageId"), "role": "activity",
                                   "activityType": e["activityType"], "content": e["content"]}));
                let replace = e.get("replace").and_then(Value::as_bool).unwrap_or(true);
                match self.find(s("messageId")) {
                    None => self.held.push(m),
                    Some(i) if replace => self.held[i] = m,
                    Some(_) => {}
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(m: &Mirror) -> Vec<String> {
        m.held
            .iter()
            .map(|(_, m)| m["id"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn events_build_what_the_client_holds_and_a_replacement_keeps_the_order() {
        let mut m = Mirror::default();
        m.snapshot(vec![(
            "u1".into(),
            json!({"id": "u1", "role": "user", "content": "Hi"}),
        )]);
        for e in [
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "look."}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "fetch",
                   "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"a\":"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "1}"}),
            json!({"type": "TOOL_CALL_RESULT", "messageId": "tool-c1", "toolCallId": "c1",
                   "content": "ok", "role": "tool"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "m1:r", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "m1:r", "delta": "hm"}),
        ] {
            m.apply("m1", &e);
        }
        m.apply(
            "m2",
            &json!({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"}),
        );
        assert_eq!(ids(&m), ["u1", "m1", "tool-c1", "m1:r", "m2"]);
        let all: Vec<_> = m.held.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(all[1]["content"], "Let me look.");
        assert_eq!(all[1]["toolCalls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(all[3]["content"], "hm");
        // m1 replaced by one message: where m1 stood, m2 after it. The
        // reasoning message stays: the result has none, and a client keeps
        // its reasoning messages then.
        let sent = m.replace(
            "m1",
            vec![json!({"id": "m1", "role": "assistant", "content": "Let me look."})],
        );
        let sent: Vec<_> = sent.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(sent, ["u1", "m1", "m2"]);
        assert_eq!(ids(&m), ["u1", "m1", "m1:r", "m2"]);
        assert!(m.held[1].1.get("toolCalls").is_none());
    }
}
