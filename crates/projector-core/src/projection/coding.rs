//! The coding workbench surface: `file.read`, `file.changed`, `patch.*`,
//! `command.*`, `test.*` and `sandbox.blocked`. Patch, command and test facts
//! with a `toolCallId` are also tool calls (see `tools.rs`). Command output
//! stays refs; exit codes and test results come only from their facts.

use serde_json::{json, Value};

use super::public_state::Severity;
use super::reducer::{merge, push_unique, truncate, Reducer};
use super::tools::ToolEnd;

fn refs_of(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl<'a> Reducer<'a> {
    fn upsert_coding(&mut self, which: &str, id: &str, patch: Value, refs: &[String]) {
        let c = &mut self.state.coding;
        let map = match which {
            "file" => &mut c.files,
            "patch" => &mut c.patches,
            "command" => &mut c.commands,
            _ => &mut c.tests,
        };
        let e = map.entry(id.to_string()).or_insert_with(|| json!({}));
        merge(e, patch);
        if !refs.is_empty() {
            let key = if which == "file" || which == "patch" {
                "refs"
            } else {
                "outputRefs"
            };
            let mut list = refs_of(e, key);
            for r in refs {
                push_unique(&mut list, r);
            }
            e[key] = json!(list);
        }
        self.touch("coding", format!("{which}:{id}"));
    }

    /// `file.read | file.changed`.
    pub fn on_file(&mut self) {
        let path = self
            .first_str(&["path", "relativePath"])
            .or_else(|| self.fact.ids.artifact_id.clone())
            .unwrap_or_else(|| format!("unknown:{}", self.fact.id));
        let changed = self.fact.class == "file.changed";
        let prev = self
            .state
            .coding
            .files
            .get(&path)
            .cloned()
            .unwrap_or(json!({}));
        let count = |k: &str| prev.get(k).and_then(Value::as_u64).unwrap_or(0);
        let patch = json!({
            "path": path,
            "reads": count("reads") + u64::from(!changed),
            "changes": count("changes") + u64::from(changed),
            "changeKind": if changed { self.first_str(&["changeKind", "operation"]) } else { None },
            "artifactId": self.fact.ids.artifact_id,
            "toolCallId": self.tool_call_id(),
            "diffRef": self.first_str(&["diffRef"]),
            "checkpointRef": self.first_str(&["checkpointRef"]),
            "contentRef": self.first_str(&["contentRef"]),
            "updatedCursor": self.cursor,
        });
        self.upsert_coding("file", &path, patch, &[]);
        self.on_artifact_facts();
    }

    /// `patch.* | command.* | test.*`.
    pub fn on_coding(&mut self) {
        let class = self.fact.class.clone();
        let fam = self.fact.family().to_string();
        let tcid = self.tool_call_id();
        let id_key = match fam.as_str() {
            "patch" => "patchId",
            "command" => "commandId",
            _ => "testRunId",
        };
        let id = self
            .first_str(&[id_key])
            .or_else(|| tcid.clone())
            .unwrap_or_else(|| format!("unknown:{}", self.fact.id));
        let refs = self.refs();
        let status = self.status().unwrap_or("").to_string();
        let exit = self.payload_int("exitCode");
        let result = self.first_str(&["result"]);
        let failure = self.first_str(&["failureCategory"]);
        let ended_failed = match class.as_str() {
            "patch.failed" => true,
            "command.exited" => exit.is_some_and(|c| c != 0) || status == "failed",
            "test.completed" => {
                result
                    .as_deref()
                    .is_some_and(|r| r == "failed" || r == "error")
                    || status == "failed"
            }
            _ => false,
        };
        let terminal = matches!(
            class.as_str(),
            "patch.applied" | "patch.failed" | "command.exited" | "test.completed"
        );
        let entry_status = if class.ends_with(".started") {
            Some("running".to_string())
        } else if terminal {
            Some(match (fam.as_str(), ended_failed) {
                (_, true) => "failed".to_string(),
                ("patch", false) => "applied".to_string(),
                ("test", false) => result.clone().unwrap_or_else(|| "passed".into()),
                _ => "completed".to_string(),
            })
        } else {
            None
        };
        let mut patch = json!({});
        patch[id_key] = json!(id);
        merge(
            &mut patch,
            json!({
                "status": entry_status,
                "toolCallId": tcid,
                "failureCategory": if ended_failed { failure.clone() } else { None },
                "updatedCursor": self.cursor,
            }),
        );
        match fam.as_str() {
            "patch" => merge(
                &mut patch,
                json!({"path": self.first_str(&["path"]), "diffRef": self.first_str(&["diffRef"])}),
            ),
            "command" => merge(
                &mut patch,
                json!({
                    "command": self.first_str(&["command"]).map(|c| truncate(&c, 500)),
                    "cwd": self.first_str(&["cwd"]),
                    "exitCode": exit,
                }),
            ),
            _ => {
                let prev_runs = self
                    .state
                    .coding
                    .tests
                    .get(&id)
                    .and_then(|t| t.get("runs"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                merge(
                    &mut patch,
                    json!({
                        "suite": self.first_str(&["suite"]),
                        "commandId": self.first_str(&["commandId"]),
                        "passed": self.first_value(&["passed"]),
                        "failed": self.first_value(&["failed"]),
                        "runs": if class == "test.started" { Some(prev_runs + 1) } else { None },
                    }),
                );
            }
        }
        if !ended_failed {
            if let Some(e) = match fam.as_str() {
                "patch" => self.state.coding.patches.get_mut(&id),
                "command" => self.state.coding.commands.get_mut(&id),
                _ => self.state.coding.tests.get_mut(&id),
            } {
                if let Some(o) = e.as_object_mut() {
                    if terminal || class.ends_with(".started") {
                        o.remove("failureCategory");
                    }
                }
            }
        }
        self.upsert_coding(&fam, &id, patch, &refs);

        if ended_failed {
            let what = match class.as_str() {
                "command.exited" => match exit {
                    Some(c) => format!("command {id} exited with code {c}"),
                    None => format!("command {id} failed"),
                },
                "test.completed" => format!("test run {id} failed"),
                _ => format!("patch {id} failed"),
            };
            let what = match &failure {
                Some(f) => format!("{what} ({f})"),
                None => what,
            };
            self.diag_tool(&class, Severity::Warning, what, tcid.clone());
        }

        // Tool-like projection into the message.
        let Some(tcid) = tcid else { return };
        if class.ends_with(".started") {
            self.on_tool_started(&tcid);
        } else if class == "command.output" {
            self.on_tool_progress(&tcid);
        } else if terminal {
            let end = if ended_failed {
                let text = match (class.as_str(), exit) {
                    ("command.exited", Some(c)) if c != 0 => format!("exit code {c}"),
                    _ => self.tool_error_text(),
                };
                ToolEnd::Error(text)
            } else {
                let extra = match fam.as_str() {
                    "command" => json!({"exitCode": exit}),
                    "test" => {
                        json!({"result": result, "passed": self.first_value(&["passed"]), "failed": self.first_value(&["failed"])})
                    }
                    _ => json!({"path": self.first_str(&["path"])}),
                };
                ToolEnd::Output(self.tool_output(extra))
            };
            self.on_tool_end(&tcid, end);
        }
    }

    /// `sandbox.blocked`: coding and permission blocks, a diagnostic, and a
    /// blocked runtime.
    pub fn on_sandbox_blocked(&mut self) {
        self.books.block_seq += 1;
        let block_id = format!("block:{}", self.books.block_seq);
        let mut b = json!({"blockId": block_id});
        merge(
            &mut b,
            json!({
                "reasonCode": self.first_str(&["reasonCode", "reason"]),
                "commandId": self.first_str(&["commandId"]),
                "toolCallId": self.tool_call_id(),
                "title": self.title(),
                "recoveryHintRef": self.first_str(&["recoveryHintRef"]),
                "eventId": self.fact.id,
                "cursor": self.cursor,
            }),
        );
        self.state.coding.blocks.push(b.clone());
        self.state.permissions.blocks.push(b);
        self.state.permissions.updated_cursor = Some(self.cursor);
        self.touch("coding", block_id);
        self.touch("permissions", "permissions");
        let reason = self
            .first_str(&["reasonCode", "reason"])
            .unwrap_or_else(|| "sandbox".into());
        self.diag(
            "sandbox.blocked",
            Severity::Warning,
            format!("blocked by the sandbox: {reason}"),
        );
        self.on_blocked();
    }
}
