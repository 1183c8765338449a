//! Watches: a stream of newline-delimited watch events, resumable from a resourceVersion, with
//! bookmarks, the initial-events protocol, 410 Gone for a revision too old, and a timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::handlers::{Call, Representation, partial};
use super::object;
use super::registry::Resource;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Event, EventKind, Live, LiveError, Record, StoreError};
use super::table::{self, IncludeObject};

/// How often an idle watch that allows bookmarks gets one: kube-apiserver's frequency (a
/// fleet's thousand Node watches each woke every 15 s).
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

struct Watcher {
    resource: Arc<Resource>,
    prefix: String,
    labels: LabelSelector,
    fields: FieldSelector,
    representation: Representation,
    /// Whether events carry `managedFields` (see `CachingCaller`).
    managed_fields: bool,
    include: IncludeObject,
    sent_columns: bool,
}

impl Watcher {
    fn matches(&self, record: &Record) -> bool {
        self.labels.matches_meta(record.meta()) && self.fields.matches_record(record)
    }

    fn render(&mut self, object: Value) -> Value {
        match self.representation {
            Representation::Object => object,
            Representation::PartialMetadata => partial(&object),
            Representation::Table => {
                let rv = object["metadata"]["resourceVersion"].clone();
                let first = !self.sent_columns;
                self.sent_columns = true;
                table::table(
                    &self.resource,
                    &[object],
                    json!({"resourceVersion": rv}),
                    self.include,
                    first,
                )
            }
        }
    }

    /// The line (if any) this watcher sends for a store event: objects that start or stop
    /// matching the selectors are ADDED or DELETED. A plain object is written from the
    /// encoding every watcher of the event shares.
    fn translate(&mut self, event: &Event) -> Option<Line> {
        if !event.record.key.starts_with(&self.prefix) {
            return None;
        }
        let now = self.matches(&event.record);
        let before = event.prev.as_ref().is_some_and(|p| self.matches(p));
        let kind = match event.kind {
            EventKind::Created if now => "ADDED",
            EventKind::Updated if now && before => "MODIFIED",
            EventKind::Updated if now => "ADDED",
            EventKind::Updated if before => "DELETED",
            EventKind::Deleted if now => "DELETED",
            _ => return None,
        };
        if self.representation == Representation::Object {
            return Some(Line::Stored {
                kind,
                record: event.record.clone(),
                revision: event.revision,
                managed_fields: self.managed_fields,
            });
        }
        let object = object::present(&self.resource, &event.record, event.revision);
        Some(Line::Own(line(
            &json!({"type": kind, "object": self.render(object)}),
        )))
    }

    /// Adds what a live event means to this watcher to its outbox, once: an event at or below
    /// the revision the watcher has reached was in its backlog. False once the client has gone.
    async fn deliver(&mut self, outbox: &mut Outbox, revision: &mut u64, event: &Event) -> bool {
        if event.revision <= *revision {
            return true;
        }
        *revision = event.revision;
        match self.translate(event) {
            Some(line) => outbox.push_line(&self.resource, line).await,
            None => true,
        }
    }

    /// Sends `first` and whatever else has arrived meanwhile in one write. False when the watch
    /// ends: the client has gone, the watcher fell behind the store's history, or the store closed.
    async fn send_ready(
        &mut self,
        outbox: &mut Outbox,
        revision: &mut u64,
        live: &mut Live,
        first: &Event,
    ) -> bool {
        if !self.deliver(outbox, revision, first).await {
            return false;
        }
        loop {
            match live.try_recv() {
                Ok(Some(event)) => {
                    if !self.deliver(outbox, revision, &event).await {
                        return false;
                    }
                }
                Ok(None) => return outbox.flush().await,
                Err(LiveError::FellBehind) => {
                    outbox.fell_behind().await;
                    return false;
                }
                Err(LiveError::Closed) => {
                    outbox.flush().await;
                    return false;
                }
            }
        }
    }

    fn bookmark(&self, revision: u64, initial_events_end: bool) -> Value {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({
            "type": "BOOKMARK",
            "object": {"kind": self.resource.kind, "apiVersion": self.resource.api_version(), "metadata": metadata},
        })
    }
}

/// A watch event's line: most are a plain object's encoding, shared by every watcher of the
/// event and copied only into each watcher's outbox, around its type.
enum Line {
    /// An object as stored, written straight into the outbox.
    Stored {
        kind: &'static str,
        record: Arc<Record>,
        revision: u64,
        managed_fields: bool,
    },
    Own(Bytes),
}

fn line(value: &Value) -> Bytes {
    let mut out = serde_json::to_vec(value).expect("JSON values serialize");
    out.push(b'\n');
    out.into()
}

/// How much a watcher sends in one write when events come faster than it writes them.
const CHUNK: usize = 64 * 1024;

/// A watch's lines on their way to the client: gathered while more are ready, so that a
/// watcher keeping up with a burst of writes makes one write per burst, not one per event.
struct Outbox {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    pending: BytesMut,
}

impl Outbox {
    /// Adds a line; false once the client has gone.
    async fn push(&mut self, line: &[u8]) -> bool {
        self.pending.extend_from_slice(line);
        self.pending.len() < CHUNK || self.flush().await
    }

    /// Adds a watch event's line; false once the client has gone.
    async fn push_line(&mut self, resource: &Resource, line: Line) -> bool {
        match line {
            Line::Stored {
                kind,
                record,
                revision,
                managed_fields,
            } => {
                for part in [&b"{\"type\":\""[..], kind.as_bytes(), b"\",\"object\":"] {
                    self.pending.extend_from_slice(part);
                }
                let out = &mut self.pending;
                object::write_presented(resource, &record, revision, managed_fields, out);
                self.pending.extend_from_slice(b"}\n");
                self.pending.len() < CHUNK || self.flush().await
            }
            Line::Own(line) => self.push(&line).await,
        }
    }

    /// Sends what is gathered; false once the client has gone.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let chunk = self.pending.split().freeze();
        self.tx.send(Ok(chunk)).await.is_ok()
    }

    /// Ends a watch that fell further behind than the store keeps events for.
    async fn fell_behind(&mut self) {
        let gone = line(&gone_event(
            "the watch fell too far behind; list again and watch from the new resourceVersion"
                .into(),
        ));
        let _ = self.push(&gone).await && self.flush().await;
    }
}

fn gone_event(message: String) -> Value {
    json!({"type": "ERROR", "object": ApiError::gone(message).status()})
}

pub async fn watch(call: Call<'_>) -> Result<Response, ApiError> {
    let (labels, fields) = call.selectors()?;
    let query = &call.query;
    let from = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let send_initial = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    let bookmarks = matches!(
        query.get("allowWatchBookmarks").map(String::as_str),
        Some("true" | "1")
    );
    let timeout = match query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
    {
        Some(t) => Duration::from_secs(t),
        // kube-apiserver ends watches after a random 30 to 60 minutes.
        None => Duration::from_secs(rand::rng().random_range(1800..3600)),
    };
    let resource = call.resource.clone();
    let prefix = resource.namespace_prefix(if resource.namespaced {
        call.path.namespace.as_deref()
    } else {
        None
    });
    let mut watcher = Watcher {
        resource,
        prefix: prefix.clone(),
        labels,
        fields,
        representation: call.representation,
        managed_fields: call.managed_fields,
        include: IncludeObject::parse(query.get("includeObject").map(String::as_str)),
        sent_columns: false,
    };
    let start = match call
        .server
        .store
        .watch(&prefix, if send_initial { None } else { from })
    {
        Ok(start) => Some(start),
        Err(StoreError::Compacted { requested, oldest }) => {
            // Kubernetes answers 200 and an ERROR event; clients then list again.
            let body = line(&gone_event(format!(
                "too old resource version: {requested} ({oldest})"
            )));
            return Ok(
                (StatusCode::OK, [("content-type", "application/json")], body).into_response(),
            );
        }
        Err(e) => return Err(e.into()),
    };
    let mut start = start.expect("handled above");
    // At most this many chunks wait for a slow client: a watcher holds a bounded amount of memory.
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut outbox = Outbox {
            tx,
            pending: BytesMut::new(),
        };
        for event in &start.backlog {
            if let Some(line) = watcher.translate(event)
                && !outbox.push_line(&watcher.resource, line).await
            {
                return;
            }
        }
        // The backlog brought the watcher up to the store's revision at subscription.
        let mut revision = from.unwrap_or(0).max(start.revision);
        if send_initial && !outbox.push(&line(&watcher.bookmark(revision, true))).await {
            return;
        }
        if !outbox.flush().await {
            return;
        }
        loop {
            let next = tokio::time::timeout(BOOKMARK_INTERVAL, start.live.recv());
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = outbox.tx.closed() => return,
                received = next => match received {
                    Err(_) if bookmarks => {
                        let bookmark = line(&watcher.bookmark(revision, false));
                        if !outbox.push(&bookmark).await || !outbox.flush().await {
                            return;
                        }
                    }
                    Err(_) => {}
                    Ok(Ok(event)) => {
                        let live = &mut start.live;
                        if !watcher.send_ready(&mut outbox, &mut revision, live, &event).await {
                            return;
                        }
                    }
                    Ok(Err(LiveError::FellBehind)) => {
                        outbox.fell_behind().await;
                        return;
                    }
                    Ok(Err(LiveError::Closed)) => return,
                },
            }
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx));
    Ok((StatusCode::OK, [("content-type", "application/json")], body).into_response())
}
