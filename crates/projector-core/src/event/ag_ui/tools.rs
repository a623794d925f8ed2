//! AG-UI tool calls: start, streamed arguments, end (the input), result.

use serde_json::{json, Value};

use super::{one, AgUi, Call, Mapped};

impl AgUi {
    pub(super) fn call_start(
        &mut self,
        tc: &str,
        name: Option<String>,
        parent: Option<String>,
    ) -> Mapped {
        self.last_call = Some(tc.to_string());
        let parent = parent.or_else(|| self.last_message.clone());
        self.calls.insert(
            tc.to_string(),
            Call {
                name: name.clone(),
                parent: parent.clone(),
                args: String::new(),
            },
        );
        let mut e = self.event(
            "tool.args.delta",
            "",
            json!({"toolCallId": tc, "messageId": parent,
                   "payload": {"toolName": name, "delta": ""}}),
        );
        e["id"] = format!("ag:tool:{tc}:start").into();
        one(e)
    }

    pub(super) fn call_args(&mut self, tc: &str, delta: String) -> Mapped {
        self.last_call = Some(tc.to_string());
        let call = self.calls.entry(tc.to_string()).or_default();
        call.args.push_str(&delta);
        let parent = call.parent.clone();
        one(self.event(
            "tool.args.delta",
            "",
            json!({"toolCallId": tc, "messageId": parent, "payload": {"delta": delta}}),
        ))
    }

    pub(super) fn call_end(&mut self, tc: &str) -> Mapped {
        let call = self.calls.remove(tc).unwrap_or_default();
        let input = if call.args.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&call.args).unwrap_or(Value::String(call.args))
        };
        one(self.tool_started(tc, call.name, call.parent, input))
    }

    pub(super) fn tool_started(
        &self,
        tc: &str,
        name: Option<String>,
        parent: Option<String>,
        input: Value,
    ) -> Value {
        let mut e = self.event(
            "tool.started",
            "",
            json!({"toolCallId": tc, "messageId": parent,
                   "payload": {"toolName": name, "input": input}}),
        );
        e["id"] = format!("ag:tool:{tc}:input").into();
        e
    }

    /// A tool's result: its content as the tool sent it.
    pub(super) fn tool_result(&self, tc: &str, content: &Value) -> Value {
        let mut e = self.event(
            "tool.result",
            "",
            json!({"toolCallId": tc,
                   "payload": {"output": content, "verbatim": true}}),
        );
        e["id"] = format!("ag:tool:{tc}:result").into();
        e
    }
}
