//! What teammates exchange: handoffs (`handoff.*`, `agent.handoff`),
//! reviews (`review.*`, a verdict only from `payload.verdict`), worker
//! notifications (never user messages) and channels (`channel.*`).

use serde_json::{json, Value};

use super::reducer::{merge, nonempty, push_unique, truncate, Reducer};
use super::team::upsert;

impl Reducer<'_> {
    /// `handoff.* | agent.handoff`.
    pub fn on_handoff(&mut self) {
        let hid = nonempty(self.fact.ids.handoff_id.as_deref())
            .or_else(|| self.first_str(&["handoffId"]))
            .unwrap_or_else(|| self.fact.id.clone());
        let status = self.first_str(&["status"]).unwrap_or_else(|| {
            match self.fact.class.as_str() {
                "handoff.requested" => "requested",
                "handoff.accepted" => "accepted",
                "handoff.completed" => "completed",
                _ => "active",
            }
            .into()
        });
        let from = self.first_str(&["from", "fromAgentId"]);
        let to = self.first_str(&["to", "toAgentId"]);
        let patch = json!({
            "status": status,
            "from": from,
            "to": to,
            "reason": self.first_str(&["reason"]).map(|r| truncate(&r, 500)),
            "resumeTarget": self.first_str(&["resumeTarget"]),
            "contextBoundary": self.first_str(&["contextBoundary", "memoryBoundary"]),
            "taskId": self.fact.ids.task_id,
            "agentId": self.agent(),
            "title": self.title(),
            "updatedCursor": self.cursor,
        });
        merge(
            upsert(&mut self.state.team.handoffs, "handoffId", &hid),
            patch,
        );
        if let (Some(from), Some(to)) = (from, to) {
            self.add_edge(from, to, "handoff");
        }
        self.touch("team", format!("handoff:{hid}"));
    }

    /// `review.*`: the review lane; a verdict only from `payload.verdict`.
    pub fn on_review(&mut self) {
        let rid = nonempty(self.fact.ids.review_id.as_deref())
            .or_else(|| self.first_str(&["reviewId"]))
            .or_else(|| nonempty(self.fact.ids.evidence_id.as_deref()))
            .unwrap_or_else(|| self.fact.id.clone());
        let status = if self.fact.class == "review.requested" {
            "requested"
        } else {
            "completed"
        };
        let mut refs: Vec<String> = Vec::new();
        if let Some(e) = nonempty(self.fact.ids.evidence_id.as_deref()) {
            refs.push(e);
        }
        for e in &self.fact.evidence_refs {
            push_unique(&mut refs, e);
        }
        let patch = json!({
            "status": status,
            "verdict": self.first_str(&["verdict"]),
            "reviewer": self.first_str(&["reviewer", "reviewerId"]).or_else(|| self.agent()),
            "target": self.first_str(&["target", "targetId"]),
            "requestedFixes": self.first_value(&["requestedFixes"]),
            "evidenceRefs": if refs.is_empty() { None } else { Some(refs) },
            "title": self.title(),
            "updatedCursor": self.cursor,
        });
        merge(
            upsert(&mut self.state.team.reviews, "reviewId", &rid),
            patch,
        );
        self.touch("team", format!("review:{rid}"));
        if self.fact.class == "review.completed" {
            self.on_evidence_facts();
        }
    }

    /// `worker.notification`: team notifications only, whatever its role.
    pub fn on_worker_notification(&mut self) {
        let nid = self.fact.id.clone();
        let agent = self
            .agent()
            .or_else(|| nonempty(self.fact.ids.worker_id.as_deref()));
        let patch = json!({
            "agentId": agent,
            "taskId": self.fact.ids.task_id,
            "status": self.first_str(&["status"]).or_else(|| self.fact.status.clone()),
            "summary": self.first_str(&["summary", "text", "content", "message"]).map(|s| truncate(&s, 500)),
            "sourceRole": self.first_str(&["role"]),
            "title": self.title(),
            "resultRef": self.first_str(&["resultRef"]),
            "transcriptRef": self.first_str(&["transcriptRef"]),
            "usage": self.first_value(&["usage"]),
            "durationMs": self.first_value(&["durationMs"]),
            "toolCount": self.first_value(&["toolCount"]),
            "refs": self.refs(),
            "cursor": self.cursor,
        });
        merge(
            upsert(&mut self.state.team.notifications, "notificationId", &nid),
            patch,
        );
        self.touch("team", format!("notification:{nid}"));
    }

    /// `channel.*`.
    pub fn on_channel(&mut self) {
        let cid = nonempty(self.fact.ids.channel_id.as_deref())
            .or_else(|| self.first_str(&["channelId"]))
            .unwrap_or_else(|| self.fact.id.clone());
        let list = &self.state.team.channels;
        let prev = list
            .iter()
            .find(|v| v.get("channelId").and_then(Value::as_str) == Some(cid.as_str()))
            .and_then(|v| v.get("messageCount"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let status = match self.fact.class.as_str() {
            "channel.closed" => Some("closed"),
            "channel.opened" => Some("open"),
            _ => None,
        };
        let is_msg = self.fact.class == "channel.message";
        let patch = json!({
            "status": status,
            "channelType": self.first_str(&["channelType"]),
            "agentId": self.agent(),
            "targetThreadId": self.first_str(&["targetThreadId"]),
            "messageCount": if is_msg { Some(prev + 1) } else { None },
            "lastSummary": if is_msg { self.first_str(&["summary", "text"]).map(|s| truncate(&s, 500)) } else { None },
            "updatedCursor": self.cursor,
        });
        merge(
            upsert(&mut self.state.team.channels, "channelId", &cid),
            patch,
        );
        self.touch("team", format!("channel:{cid}"));
    }
}
