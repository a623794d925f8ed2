//! The request headers of the Durable Streams door, parsed strictly: a
//! create's configuration and fork, an append's producer and closure.

use axum::http::{HeaderMap, HeaderName};
use bytes::Bytes;

use super::{stream_path, CLOSED, EXPIRES_AT, FORKED_FROM, FORK_OFFSET, FORK_SUB_OFFSET, TTL};
use super::{PRODUCER_EPOCH, PRODUCER_ID, PRODUCER_SEQ};
use crate::ds::model::{self, ProducerClaim};
use crate::ds::{parse_offset, Create, ForkRequest, Offset};
use crate::http::error::Problem;

pub(super) fn header<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a str>, Problem> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map_err(|_| Problem::bad_request("invalid_header", format!("{name} is not text")))
        })
        .transpose()
}

/// `Stream-Closed: true`?
pub(super) fn closes(headers: &HeaderMap) -> Result<bool, Problem> {
    Ok(header(headers, &CLOSED)?.is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
}

/// What a `PUT` asks for: the configuration's headers (what is not given
/// is the default, or a fork's source's), closure, and a fork.
pub(super) fn asked(headers: &HeaderMap, body: Bytes) -> Result<Create, Problem> {
    let content_type = header(headers, &axum::http::header::CONTENT_TYPE)?
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let ttl = header(headers, &TTL)?;
    let expires = header(headers, &EXPIRES_AT)?;
    if ttl.is_some() && expires.is_some() {
        return Err(Problem::bad_request(
            "ttl_and_expiry",
            "Stream-TTL and Stream-Expires-At are exclusive",
        ));
    }
    let ttl_secs = ttl
        .map(|v| {
            model::parse_ttl(v.trim()).ok_or_else(|| {
                Problem::bad_request(
                    "invalid_ttl",
                    "Stream-TTL is a non-negative integer of seconds",
                )
            })
        })
        .transpose()?;
    let expires_at_ms = expires
        .map(|v| {
            parse_rfc3339(v.trim()).ok_or_else(|| {
                Problem::bad_request(
                    "invalid_expires_at",
                    "Stream-Expires-At is an RFC 3339 timestamp",
                )
            })
        })
        .transpose()?;
    Ok(Create {
        content_type,
        ttl_secs,
        expires_at_ms,
        closed: closes(headers)?,
        body,
        fork: fork(headers)?,
    })
}

/// `Stream-Forked-From` (a stream path as this server names it,
/// `/v1/stream/<path>`), `Stream-Fork-Offset`, `Stream-Fork-Sub-Offset`.
fn fork(headers: &HeaderMap) -> Result<Option<ForkRequest>, Problem> {
    let bad = |d: &str| Problem::bad_request("invalid_fork", d.to_string());
    let from = header(headers, &FORKED_FROM)?;
    let offset = header(headers, &FORK_OFFSET)?;
    let sub = header(headers, &FORK_SUB_OFFSET)?;
    let Some(from) = from else {
        if offset.is_some() || sub.is_some() {
            return Err(bad(
                "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From",
            ));
        }
        return Ok(None);
    };
    let source = from
        .trim()
        .trim_start_matches("/ds")
        .strip_prefix("/v1/stream/")
        .ok_or_else(|| bad("Stream-Forked-From is a stream path, /v1/stream/<path>"))?;
    let source = stream_path(source)?.to_string();
    let offset = offset
        .map(|o| match parse_offset(o.trim()) {
            Some(Offset::After(c)) => Ok(c),
            _ => Err(bad("Stream-Fork-Offset is an offset of the source stream")),
        })
        .transpose()?;
    let sub = sub
        .map(|v| {
            model::parse_producer_int(v.trim())
                .ok_or_else(|| bad("Stream-Fork-Sub-Offset is a non-negative integer"))
        })
        .transpose()?
        .unwrap_or(0);
    if sub > 0 && offset.is_none() {
        return Err(bad("Stream-Fork-Sub-Offset needs Stream-Fork-Offset"));
    }
    Ok(Some(ForkRequest {
        source,
        offset,
        sub,
    }))
}

fn parse_rfc3339(v: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

pub(super) fn format_rfc3339(ms: u64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// The producer headers: all three or none, integers within 2^53 - 1.
pub(super) fn producer(headers: &HeaderMap) -> Result<Option<ProducerClaim>, Problem> {
    let (id, epoch, seq) = (
        header(headers, &PRODUCER_ID)?,
        header(headers, &PRODUCER_EPOCH)?,
        header(headers, &PRODUCER_SEQ)?,
    );
    let bad = |d: &str| Problem::bad_request("invalid_producer", d.to_string());
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.trim().is_empty() {
                return Err(bad("Producer-Id is empty"));
            }
            let epoch = model::parse_producer_int(epoch.trim())
                .ok_or_else(|| bad("Producer-Epoch is an integer from 0 to 2^53 - 1"))?;
            let seq = model::parse_producer_int(seq.trim())
                .ok_or_else(|| bad("Producer-Seq is an integer from 0 to 2^53 - 1"))?;
            Ok(Some(ProducerClaim {
                id: id.to_string(),
                epoch,
                seq,
            }))
        }
        _ => Err(bad(
            "Producer-Id, Producer-Epoch and Producer-Seq go together",
        )),
    }
}
