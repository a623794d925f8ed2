//! The writes of a stream: create (and fork), append, delete, and the
//! lifecycle that ties forks to their sources: a source deleted while
//! forks of it live is only marked deleted (410), and goes with its last
//! fork. Each write reads where the log stands, decides with [`model`],
//! and appends at the next cursors; when another write got there first the
//! store refuses it and it decides again.

use bytes::Bytes;

use super::model::{self, ForkOrigin};
use super::records::{data_of, data_records};
use super::{Appended, Config, Created, DsError, Kind, Outcome, State, Streams, View};
use crate::store::StoreError;

/// A create (`PUT`) as asked: what is not given is a new stream's default
/// (`application/octet-stream`, no expiry), or a fork's source's.
#[derive(Debug, Clone, Default)]
pub struct Create {
    pub content_type: Option<String>,
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub closed: bool,
    pub body: Bytes,
    pub fork: Option<ForkRequest>,
}

/// `Stream-Forked-From` and where: the source's offset (default its tail)
/// and how far into the append after it.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    pub source: String,
    pub offset: Option<u64>,
    pub sub: u64,
}

/// A fork's inheritance: the configuration, where it stands in its source,
/// and the records it starts with.
struct Inherited {
    config: Config,
    origin: ForkOrigin,
    /// The source's offset before its first record.
    base: u64,
    records: Vec<(Kind, Bytes, u32)>,
}

impl Streams {
    /// Create a stream, or a fork of one (idempotently: the same
    /// configuration again changes nothing).
    pub async fn create(&self, path: &str, c: Create) -> Result<Created, DsError> {
        loop {
            let inherited = match &c.fork {
                Some(f) => Some(self.inherit(f, &c).await?),
                None => None,
            };
            let config = match &inherited {
                Some(i) => i.config.clone(),
                None => Config {
                    content_type: c
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "application/octet-stream".into()),
                    ttl_secs: c.ttl_secs,
                    expires_at_ms: c.expires_at_ms,
                },
            };
            let messages = if c.body.is_empty() {
                Vec::new()
            } else if config.json() {
                model::json_messages(&c.body).map_err(DsError::Invalid)?
            } else {
                vec![c.body.clone()]
            };
            if let Some(view) = self.view(path).await? {
                if view.state.soft_deleted {
                    return Err(DsError::SoftDeleted);
                }
                // A fork at the source's tail by default matches the fork
                // made before (the tail moves with the source's fork count).
                let origin = inherited.as_ref().map(|i| {
                    let mut o = i.origin.clone();
                    if let (Some(f), Some(made)) = (&c.fork, &view.state.fork) {
                        if f.offset.is_none() {
                            o.offset = made.offset;
                        }
                    }
                    o
                });
                return match model::decide_create(&view.state, &config, origin.as_ref()) {
                    model::Recreate::Same => {
                        self.touch(path, &view);
                        Ok(Created { new: false, view })
                    }
                    model::Recreate::Conflict => Err(DsError::ConfigConflict { head: view.head }),
                };
            }
            let meta = self.log.open(path).await?;
            let mut state = State::new(config.clone());
            state.closed = c.closed;
            let mut records = Vec::new();
            let mut source = None;
            if let Some(i) = inherited {
                // The fork's offsets continue its source's: its log's
                // first record stands at the source's first position.
                state.shift = meta.head as i64 - i.base as i64;
                records = i.records;
                source = Some(i.origin.source.clone());
                state.fork = Some(i.origin);
            }
            records.push((Kind::Created, Bytes::new(), 0));
            records.extend(data_records(&messages, config.json()));
            if c.closed {
                records.push((Kind::Closed, Bytes::new(), 0));
            }
            match self
                .write(path, &meta.epoch, meta.head, records, &state)
                .await
            {
                Ok(view) => {
                    self.touched.remove(path);
                    if let Some(s) = source {
                        self.count_fork(&s, 1).await?;
                    }
                    return Ok(Created { new: true, view });
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// What a fork inherits from its source: the configuration (the
    /// source's content type, and its expiry unless the fork names one),
    /// and copies of the source's records up to the fork point (the first
    /// `sub` bytes or messages of the append after it included).
    async fn inherit(&self, f: &ForkRequest, c: &Create) -> Result<Inherited, DsError> {
        let source = self.view(&f.source).await?.ok_or(DsError::NoSource)?;
        if source.state.soft_deleted {
            return Err(DsError::SourceDeleted);
        }
        let sc = &source.state.config;
        if c.content_type
            .as_deref()
            .is_some_and(|ct| model::essence(ct) != sc.essence())
        {
            return Err(DsError::ConfigConflict { head: source.head });
        }
        let own_expiry = c.ttl_secs.is_some() || c.expires_at_ms.is_some();
        let config = Config {
            content_type: sc.content_type.clone(),
            ttl_secs: if own_expiry { c.ttl_secs } else { sc.ttl_secs },
            expires_at_ms: if own_expiry {
                c.expires_at_ms
            } else {
                sc.expires_at_ms
            },
        };
        let at = f.offset.unwrap_or(source.head);
        if at > source.head || at < source.base {
            return Err(DsError::Invalid(
                "Stream-Fork-Offset is not an offset of the source stream".into(),
            ));
        }
        // The source's records from its beginning up to the fork point.
        let mut records = Vec::new();
        let mut next = source.cursor(source.base);
        let stop = source.cursor(at);
        let mut partial = None;
        'pages: loop {
            let page = self.log.read(&f.source, next, 256).await?;
            if page.is_empty() {
                break;
            }
            for e in page {
                if e.cursor > source.cursor(source.head) {
                    break 'pages;
                }
                if e.cursor > stop {
                    if f.sub == 0 {
                        break 'pages;
                    }
                    if let Some(r) = data_of(&e) {
                        partial = Some(r);
                        break 'pages;
                    }
                }
                // Other records keep their place (offsets continue the
                // source's) as state records.
                let (kind, n) = data_of(&e).map_or((Kind::State, 0), |r| (Kind::Data, r.messages));
                records.push((kind, e.fact.clone(), n));
                next = e.cursor;
            }
        }
        if f.sub > 0 {
            let r = partial.ok_or_else(|| {
                DsError::Invalid("Stream-Fork-Sub-Offset: no append follows the fork offset".into())
            })?;
            let cut = cut(&r.bytes, f.sub, sc.json())?;
            records.push(cut);
        }
        Ok(Inherited {
            config,
            origin: ForkOrigin {
                source: f.source.clone(),
                offset: at,
                sub: f.sub,
            },
            base: source.base,
            records,
        })
    }

    /// Append to (and, with `close`, close) the stream at `path`.
    pub async fn append(&self, path: &str, a: &super::Append) -> Result<Appended, DsError> {
        // Decided on the view this node last wrote, an append that writes is
        // checked by the store; one that writes nothing (a refusal, a
        // duplicate) is decided again on the log as it stands, which another
        // node of a shared store may have moved.
        let shared = self.log.shared();
        let mut fresh = false;
        loop {
            let view = if fresh {
                self.view(path).await?
            } else {
                self.for_write(path).await?
            };
            let view = view.ok_or(DsError::NotFound)?;
            let decided = model::decide_append(&view.state, a);
            let writes = matches!(decided, Ok(Outcome::Write { .. }));
            if shared && !fresh && (!writes || view.state.soft_deleted) {
                fresh = true;
                continue;
            }
            if view.state.soft_deleted {
                return Err(DsError::SoftDeleted);
            }
            let outcome = decided.map_err(|refusal| DsError::Refused {
                refusal,
                view: Box::new(view.clone()),
            })?;
            let state = match &outcome {
                Outcome::Duplicate { .. } => {
                    self.touch(path, &view);
                    return Ok(Appended { outcome, view });
                }
                Outcome::Write { state, .. } => state,
            };
            let mut records: Vec<_> = data_records(&a.messages, view.state.config.json()).collect();
            if state.closed && !view.state.closed {
                records.push((Kind::Closed, Bytes::new(), 0));
            }
            if records.is_empty() {
                // Closing a closed stream again: nothing to write.
                self.touch(path, &view);
                return Ok(Appended { outcome, view });
            }
            let head = view.cursor(view.head);
            match self.write(path, &view.epoch, head, records, state).await {
                Ok(view) => {
                    self.touch(path, &view);
                    return Ok(Appended { outcome, view });
                }
                Err(StoreError::Conflict { .. }) => self.stale(path),
                Err(e) => {
                    self.stale(path);
                    return Err(e.into());
                }
            }
        }
    }

    /// Delete the stream at `path` (false: there was none). One with live
    /// forks is only marked deleted; it goes with its last fork.
    pub async fn delete(&self, path: &str) -> Result<bool, DsError> {
        loop {
            let Some(view) = self.view(path).await? else {
                return Ok(false);
            };
            if view.state.soft_deleted {
                return Err(DsError::SoftDeleted);
            }
            match self.delete_view(path, view).await {
                Ok(()) => return Ok(true),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Delete (or expire) the stream `view` shows: mark it deleted while
    /// forks of it live, else remove it and let its source go if it was the
    /// source's last fork.
    pub(super) async fn delete_view(&self, path: &str, view: View) -> Result<(), StoreError> {
        if view.state.forks > 0 {
            let mut state = view.state.clone();
            state.soft_deleted = true;
            let records = vec![(Kind::State, Bytes::new(), 0)];
            let head = view.cursor(view.head);
            self.write(path, &view.epoch, head, records, &state).await?;
            return Ok(());
        }
        self.remove(path, &view).await?;
        if let Some(origin) = &view.state.fork {
            self.count_fork(&origin.source, -1).await?;
        }
        Ok(())
    }

    /// Count a fork of `source` made (+1) or gone (-1); a source deleted
    /// while forked goes with its last fork (and so on up the chain).
    async fn count_fork(&self, source: &str, delta: i64) -> Result<(), StoreError> {
        let mut source = source.to_string();
        let mut delta = delta;
        loop {
            let Some(view) = self.view(&source).await? else {
                return Ok(());
            };
            let mut state = view.state.clone();
            state.forks = state.forks.saturating_add_signed(delta);
            if state.forks == 0 && state.soft_deleted {
                match self.remove(&source, &view).await {
                    Ok(()) => {}
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
                match view.state.fork {
                    Some(origin) => {
                        source = origin.source;
                        delta = -1;
                        continue;
                    }
                    None => return Ok(()),
                }
            }
            let records = vec![(Kind::State, Bytes::new(), 0)];
            let head = view.cursor(view.head);
            match self
                .write(&source, &view.epoch, head, records, &state)
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The first `sub` bytes (or JSON messages) of a record, as a record.
fn cut(bytes: &Bytes, sub: u64, json: bool) -> Result<(Kind, Bytes, u32), DsError> {
    let over = || DsError::Invalid("Stream-Fork-Sub-Offset is past the end of the append".into());
    if !json {
        let n = usize::try_from(sub).map_err(|_| over())?;
        if n > bytes.len() {
            return Err(over());
        }
        return Ok((Kind::Data, bytes.slice(..n), 1));
    }
    let mut all = Vec::with_capacity(bytes.len() + 2);
    all.push(b'[');
    all.extend_from_slice(bytes);
    all.push(b']');
    let messages = model::json_messages(&all).map_err(DsError::Invalid)?;
    let n = usize::try_from(sub).map_err(|_| over())?;
    if n > messages.len() {
        return Err(over());
    }
    let kept: Vec<Bytes> = messages.into_iter().take(n).collect();
    Ok(data_records(&kept, true)
        .next()
        .unwrap_or((Kind::Data, Bytes::new(), 0)))
}
