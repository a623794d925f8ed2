//! The checks of one event before it becomes a fact: shape limits (depth,
//! string length), payload size, credential-like values redacted, unsafe
//! refs dropped, and the scope ids each class needs (seed 002).

use serde_json::{Map, Value};

use super::reader::Reader;
use super::{code, Issue, Limits};
use crate::event::fact::Fact;
use crate::event::redact::{self, At};

/// The first place where an event `v` breaks the string or depth limit.
pub(super) fn shape_issue(v: &Value, limits: &Limits) -> Option<Issue> {
    check_shape(v, At::Base(""), 0, limits)
}

/// [`shape_issue`] of `v`, found at `at`, `depth` levels down.
fn check_shape(v: &Value, at: At<'_>, depth: usize, limits: &Limits) -> Option<Issue> {
    let long = |len: usize, at: &At<'_>| {
        (len > limits.max_string_bytes).then(|| {
            Issue::new(
                code::STRING_TOO_LONG,
                at.path(),
                format!(
                    "a string of {len} bytes; the limit is {} (send large bodies as refs)",
                    limits.max_string_bytes
                ),
            )
        })
    };
    match v {
        Value::String(s) => long(s.len(), &at),
        Value::Array(_) | Value::Object(_) if depth >= limits.max_depth => Some(Issue::new(
            code::TOO_DEEP,
            at.path(),
            format!("nested deeper than {} levels", limits.max_depth),
        )),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, it)| check_shape(it, At::Index(&at, i), depth + 1, limits)),
        Value::Object(m) => m.iter().find_map(|(k, it)| {
            let here = At::Key(&at, k);
            long(k.len(), &here).or_else(|| check_shape(it, here, depth + 1, limits))
        }),
        _ => None,
    }
}

/// Redacts credential-like values (in `payload`, `refs` and extension
/// fields) before anything else reads them; one warning per value.
pub(super) fn redact_secrets(r: &mut Reader) -> Vec<Issue> {
    let mut paths = Vec::new();
    for (key, base) in [("payload", "/payload"), ("refs", "/refs")] {
        if let Some(v) = r.field_mut(key) {
            paths.extend(redact::redact(v, base));
        }
    }
    for (k, v) in r.extra.iter_mut() {
        if redact::is_secret_key(k) && !v.is_null() {
            *v = Value::String(redact::REDACTED.into());
            paths.push(format!("/{k}"));
        } else {
            paths.extend(redact::redact(v, &format!("/{k}")));
        }
    }
    paths
        .into_iter()
        .map(|p| {
            Issue::new(
                code::SECRET_LEAK_RISK,
                p,
                "credential-like key; its value was redacted before storage",
            )
        })
        .collect()
}

/// Drops refs that are local absolute paths or URLs carrying credentials;
/// one warning per ref.
pub(super) fn drop_unsafe_refs(r: &mut Reader) -> Vec<Issue> {
    let mut dropped = Vec::new();
    if let Some(v) = r.field_mut("payload") {
        dropped.extend(redact::drop_unsafe_refs(v, "/payload", false));
    }
    for key in ["refs", "refIds", "artifactRefs", "evidenceRefs"] {
        if let Some(v) = r.field_mut(key) {
            dropped.extend(redact::drop_unsafe_refs(v, &format!("/{key}"), true));
        }
    }
    if let Some(Value::String(raw)) = r.field("rawEventRef") {
        if redact::unsafe_ref(raw).is_some() {
            r.take("rawEventRef");
            dropped.push("/rawEventRef".to_string());
        }
    }
    dropped
        .into_iter()
        .map(|p| {
            Issue::new(
                code::SECRET_LEAK_RISK,
                p,
                "a local absolute path or a URL with credentials; the ref was dropped before storage",
            )
        })
        .collect()
}

/// The length of `v` encoded as JSON, counted without keeping the bytes.
fn encoded_len(v: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, v).map_or(0, |()| n.0)
}

/// `large_payload_inline`: a warning over the inline limit, an error over
/// the hard one.
pub(super) fn check_payload_size(
    payload: &Map<String, Value>,
    limits: &Limits,
    errors: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) {
    let len = encoded_len(payload);
    if len > limits.hard_payload_bytes {
        errors.push(Issue::new(
            code::LARGE_PAYLOAD_INLINE,
            "/payload",
            format!(
                "payload is {len} bytes, over the hard limit of {} bytes; send large bodies as refs",
                limits.hard_payload_bytes
            ),
        ));
    } else if len > limits.inline_payload_bytes {
        warnings.push(Issue::new(
            code::LARGE_PAYLOAD_INLINE,
            "/payload",
            format!(
                "payload is {len} bytes, over the inline limit of {} bytes; prefer refs",
                limits.inline_payload_bytes
            ),
        ));
    }
}

fn payload_has(fact: &Fact, key: &str) -> bool {
    fact.payload
        .get(key)
        .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
}

/// `missing_scope_id` rules: a family's facts must carry the id that scopes them.
pub(super) fn missing_scope_ids(f: &Fact) -> Vec<Issue> {
    let ids = &f.ids;
    let source_family = f.source_class.split('.').next().unwrap_or("");
    let has_evidence = ids.evidence_id.is_some() || !f.evidence_refs.is_empty();
    let need = |ok: bool, path: &str, what: &str| -> Option<Issue> {
        (!ok).then(|| {
            Issue::new(
                code::MISSING_SCOPE_ID,
                path,
                format!("`{}` requires {what}", f.source_class),
            )
        })
    };
    let issue = match source_family {
        "tool" if f.class != "tool.catalog.resolved" => {
            need(ids.tool_call_id.is_some(), "/toolCallId", "`toolCallId`")
        }
        "action" => need(ids.action_id.is_some(), "/actionId", "`actionId`"),
        "artifact" => need(
            ids.artifact_id.is_some() || !f.artifact_refs.is_empty(),
            "/artifactId",
            "`artifactId` or `artifactRefs`",
        ),
        "evidence" => need(
            has_evidence,
            "/evidenceId",
            "`evidenceId` or `evidenceRefs`",
        ),
        // Seed 002: a review is scoped by its `reviewId` (top level or
        // `payload.reviewId`); a verdict also names the evidence it rests on.
        "review" => {
            let review = ids.review_id.is_some() || payload_has(f, "reviewId");
            need(review, "/reviewId", "`reviewId` (or `payload.reviewId`)").or_else(|| {
                need(
                    f.source_class != "review.verdict" || has_evidence,
                    "/evidenceRefs",
                    "an evidence ref (`evidenceId` or `evidenceRefs`)",
                )
            })
        }
        "task" => need(ids.task_id.is_some(), "/taskId", "`taskId`"),
        // Seed 002: `subagent.started | completed` carry `subagentId` + `taskId`.
        "subagent" => need(ids.subagent_id.is_some(), "/subagentId", "`subagentId`")
            .or_else(|| need(ids.task_id.is_some(), "/taskId", "`taskId`")),
        "agent" => need(
            ids.agent_id.is_some() || ids.subagent_id.is_some(),
            "/agentId",
            "`agentId` or `subagentId`",
        ),
        "worker" => need(
            ids.worker_id.is_some()
                || ids.subagent_id.is_some()
                || ids.agent_id.is_some()
                || ids.task_id.is_some(),
            "/workerId",
            "`workerId`, `subagentId`, `agentId` or `taskId`",
        ),
        "handoff" => need(
            ids.handoff_id.is_some() || payload_has(f, "handoffId"),
            "/handoffId",
            "`handoffId` (or `payload.handoffId`)",
        ),
        "channel" => need(ids.channel_id.is_some(), "/channelId", "`channelId`"),
        "patch" => need(
            ids.tool_call_id.is_some() || payload_has(f, "patchId"),
            "/toolCallId",
            "`toolCallId` (or `payload.patchId`)",
        ),
        "command" => need(
            ids.tool_call_id.is_some() || payload_has(f, "commandId"),
            "/toolCallId",
            "`toolCallId` (or `payload.commandId`)",
        ),
        "test" => need(
            ids.tool_call_id.is_some() || payload_has(f, "testRunId"),
            "/toolCallId",
            "`toolCallId` (or `payload.testRunId`)",
        ),
        "file" => need(
            ids.tool_call_id.is_some()
                || ids.artifact_id.is_some()
                || !f.artifact_refs.is_empty()
                || payload_has(f, "path"),
            "/artifactId",
            "`artifactId`, `artifactRefs`, `toolCallId` or `payload.path`",
        ),
        _ => None,
    };
    issue.into_iter().collect()
}
