//! Watches: a stream of newline-delimited watch events, resumable from a resourceVersion, with
//! bookmarks, the initial-events protocol, 410 Gone for a revision too old, and a timeout.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use rand::Rng;
use serde_json::{Value, json};
use tokio::time::Sleep;

use super::handlers::{Call, Representation, partial};
use super::object;
use super::registry::Resource;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Event, EventKind, Live, LiveError, Record, StoreError, WatchStart};
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
    fn translate<'e>(&mut self, event: &'e Event) -> Option<Line<'e>> {
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
                record: Cow::Borrowed(&event.record),
                revision: event.revision,
                managed_fields: self.managed_fields,
            });
        }
        let object = object::present(&self.resource, &event.record, event.revision);
        Some(Line::Own(line(
            &json!({"type": kind, "object": self.render(object)}),
        )))
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
/// event and copied only into each watcher's chunk, around its type.
enum Line<'e> {
    /// An object as stored, written straight into the chunk: the event's record, borrowed
    /// (each watcher taking a reference count of the same record costs contended atomics on
    /// the hot path), or kept for a held line.
    Stored {
        kind: &'static str,
        record: Cow<'e, Arc<Record>>,
        revision: u64,
        managed_fields: bool,
    },
    Own(Bytes),
}

impl Line<'_> {
    /// At least the line's length when it is written as stored: the object's JSON with the
    /// resourceVersion spliced in (at most 41 bytes) and perhaps without its managedFields,
    /// inside the event's type (at most 31). An object converted to another version on the way
    /// out may come out a little longer.
    fn size_bound(&self) -> usize {
        match self {
            Line::Stored { record, .. } => record.json().len() + 80,
            Line::Own(line) => line.len(),
        }
    }

    /// The line, kept after the event it came from.
    fn into_owned(self) -> Line<'static> {
        match self {
            Line::Stored {
                kind,
                record,
                revision,
                managed_fields,
            } => Line::Stored {
                kind,
                record: Cow::Owned(record.into_owned()),
                revision,
                managed_fields,
            },
            Line::Own(line) => Line::Own(line),
        }
    }
}

fn line(value: &Value) -> Bytes {
    let mut out = serde_json::to_vec(value).expect("JSON values serialize");
    out.push(b'\n');
    out.into()
}

/// How much a watcher sends in one write when events come faster than it writes them, and
/// the most its buffer holds (a single larger event aside).
const CHUNK: usize = 64 * 1024;

/// A watch between two writes to its client. The connection polls it for the next chunk only
/// when it can write one, so the events go from the store's channel straight into the
/// response (no task or queue of its own in between), a watcher keeping up with a burst of
/// writes makes one write per burst, and a slow client holds one chunk: beyond that it falls
/// behind the store's channel, catches up from its history, or is told to list again.
struct WatchStream {
    live: Live,
    /// Events from before the watch started, not yet sent.
    backlog: std::vec::IntoIter<Arc<Event>>,
    /// The initial-events bookmark, until the backlog has been sent.
    initial_bookmark: Option<Bytes>,
    /// The watch's end. Both timers stay registered for the whole watch (moving one later is
    /// an atomic store), not registered and removed again for every chunk.
    deadline: Pin<Box<Sleep>>,
    /// When an idle watch gets a bookmark (if it allows them): pushed back by every chunk.
    bookmark_due: Pin<Box<Sleep>>,
    bookmarks: bool,
    /// A field of its own so that it can take an event the live channel lends.
    chunk: Chunk,
}

/// The chunk being made, and what this watcher has been sent.
struct Chunk {
    watcher: Watcher,
    /// The revision sent up to: live events at or below it were in the backlog.
    revision: u64,
    /// The chunk's bytes. Its buffer is reused once the connection has written the chunk
    /// before, and grows by powers of two up to `CHUNK`: grown by a vector's doubling from the
    /// first line's size, a chunk and the line that ended it took up to 128 KiB per watcher,
    /// memory touched for the first time while the writes went on.
    pending: BytesMut,
    /// A line that did not fit in the last chunk: the first of the next.
    held: Option<Line<'static>>,
    /// The watch ends after this chunk.
    last: bool,
}

impl WatchStream {
    /// A watch from `start`, which brings the watcher up to `revision`; the initial-events
    /// bookmark (if asked for) follows the backlog.
    fn new(
        watcher: Watcher,
        start: WatchStart,
        revision: u64,
        initial_bookmark: Option<Bytes>,
        timeout: Duration,
        bookmarks: bool,
    ) -> WatchStream {
        WatchStream {
            live: start.live,
            backlog: start.backlog.into_iter(),
            initial_bookmark,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            bookmark_due: Box::pin(tokio::time::sleep(BOOKMARK_INTERVAL)),
            bookmarks,
            chunk: Chunk {
                watcher,
                revision,
                pending: BytesMut::new(),
                held: None,
                last: false,
            },
        }
    }

    /// The next chunk to write, or None when the watch is over (its timeout, the store closed,
    /// or after the chunk that says it fell behind).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let chunk = &mut self.chunk;
        if chunk.last {
            return None;
        }
        let mut full = chunk.held.take().is_some_and(|line| chunk.add_line(line));
        while !full && let Some(event) = self.backlog.next() {
            if let Some(line) = chunk.watcher.translate(&event) {
                full = chunk.add_line(line);
            }
        }
        if full {
            return Some(chunk.split());
        }
        if let Some(bookmark) = self.initial_bookmark.take() {
            chunk.pending.extend_from_slice(&bookmark);
            return Some(chunk.split());
        }
        if !chunk.pending.is_empty() {
            // The backlog's last lines, or the live line held back from the last chunk: what
            // else has arrived joins them.
            self.fill();
            return Some(self.chunk.split());
        }
        loop {
            let received = tokio::select! {
                biased;
                received = self.live.recv() => Some(received),
                _ = self.deadline.as_mut() => return None,
                _ = self.bookmark_due.as_mut(), if self.bookmarks => None,
            };
            let bytes = match received {
                None => Some(line(&self.chunk.bookmark())),
                // The chunk for a live event and whatever else has already arrived, if any of
                // it is for this watcher.
                Some(received) => {
                    if !self.chunk.receive(received) {
                        self.fill();
                    }
                    (!self.chunk.pending.is_empty()).then(|| self.chunk.split())
                }
            };
            if let Some(bytes) = bytes {
                let due = tokio::time::Instant::now() + BOOKMARK_INTERVAL;
                self.bookmark_due.as_mut().reset(due);
                return Some(bytes);
            }
            if self.chunk.last {
                return None;
            }
        }
    }

    /// Adds the live events that have already arrived, as many as fit in the chunk: they go in
    /// the same write.
    fn fill(&mut self) {
        while let Some(received) = self.live.try_recv().transpose() {
            if self.chunk.receive(received) {
                break;
            }
        }
    }
}

impl Chunk {
    /// Adds a watch event's line, or holds it for the next chunk if it would take this one
    /// past `CHUNK`. Whether the chunk is full.
    fn add_line(&mut self, line: Line<'_>) -> bool {
        let bound = line.size_bound();
        let len = self.pending.len();
        let need = len + bound;
        if len > 0 && need > CHUNK {
            self.held = Some(line.into_owned());
            return true;
        }
        if need > self.pending.capacity() && !self.pending.try_reclaim(bound) {
            // The chunk before is still being written, or the buffer is too small: a new one
            // a power of two in size, so at most CHUNK (or just the size of a larger line).
            let size = if need <= CHUNK {
                need.next_power_of_two()
            } else {
                need
            };
            let mut grown = BytesMut::with_capacity(size);
            grown.extend_from_slice(&self.pending);
            self.pending = grown;
        }
        self.push_line(line);
        self.pending.len() >= CHUNK
    }

    fn push_line(&mut self, line: Line<'_>) {
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
                let resource = &self.watcher.resource;
                object::write_presented(
                    resource,
                    &record,
                    revision,
                    managed_fields,
                    &mut self.pending,
                );
                self.pending.extend_from_slice(b"}\n");
            }
            Line::Own(line) => self.pending.extend_from_slice(&line),
        }
    }

    /// Adds what the live channel gave. Whether the chunk is done: full, or the last.
    fn receive(&mut self, received: Result<&Arc<Event>, LiveError>) -> bool {
        match received {
            Ok(event) => {
                // Live events at or below the revision sent were in the backlog.
                if event.revision <= self.revision {
                    return false;
                }
                self.revision = event.revision;
                self.watcher
                    .translate(event)
                    .is_some_and(|line| self.add_line(line))
            }
            Err(LiveError::FellBehind) => {
                self.fell_behind();
                true
            }
            Err(LiveError::Closed) => {
                self.last = true;
                true
            }
        }
    }

    /// The chunk made so far, to be written. A chunk larger than `CHUNK` is a single larger
    /// object's line in a buffer of its own, which goes once it is written instead of staying
    /// with the watcher.
    fn split(&mut self) -> Bytes {
        let chunk = self.pending.split().freeze();
        if chunk.len() > CHUNK {
            self.pending = BytesMut::new();
        }
        chunk
    }

    /// Ends a watch that fell further behind than the store keeps events for.
    fn fell_behind(&mut self) {
        let gone = line(&gone_event(
            "the watch fell too far behind; list again and watch from the new resourceVersion"
                .into(),
        ));
        self.pending.extend_from_slice(&gone);
        self.last = true;
    }

    /// An idle watch's bookmark at the revision sent.
    fn bookmark(&self) -> Value {
        self.watcher.bookmark(self.revision, false)
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
    let watcher = Watcher {
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
    let start = start.expect("handled above");
    // The backlog brings the watcher up to the store's revision at subscription.
    let revision = from.unwrap_or(0).max(start.revision);
    let initial_bookmark = send_initial.then(|| line(&watcher.bookmark(revision, true)));
    let stream = WatchStream::new(
        watcher,
        start,
        revision,
        initial_bookmark,
        timeout,
        bookmarks,
    );
    let chunks = futures::stream::unfold(stream, |mut stream| async move {
        let chunk = stream.next_chunk().await?;
        Some((Ok::<_, std::io::Error>(chunk), stream))
    });
    let body = Body::from_stream(chunks);
    Ok((StatusCode::OK, [("content-type", "application/json")], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::store::Store;

    /// A burst bigger than a chunk, from the backlog and from the live channel, leaves in
    /// writes of at most `CHUNK` bytes (an object larger than that in a write of its own),
    /// every event once and in order, and the watcher never keeps a buffer larger than `CHUNK`.
    #[tokio::test]
    async fn a_burst_leaves_in_chunks_of_at_most_64_kib_every_event_once_in_order() {
        let store = Store::in_memory();
        let configmaps = crate::apiserver::builtin::registry()
            .get("", "v1", "configmaps")
            .unwrap();
        let create = async |i: usize, payload: usize| {
            let name = format!("cm-{i:03}");
            let object = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"payload": "x".repeat(payload)},
            });
            let key = configmaps.key(Some("default"), &name);
            store.create(key, object).await.unwrap();
        };
        for i in 0..100 {
            create(i, 1000).await;
        }
        let prefix = configmaps.namespace_prefix(Some("default"));
        let start = store.watch(&prefix, None).unwrap();
        for i in 100..300 {
            create(i, 1000).await;
        }
        // One object larger than a chunk, then small ones again.
        create(300, 100_000).await;
        for i in 301..310 {
            create(i, 1000).await;
        }
        let watcher = Watcher {
            resource: configmaps.clone(),
            prefix,
            labels: Default::default(),
            fields: Default::default(),
            representation: Representation::Object,
            managed_fields: false,
            include: IncludeObject::parse(None),
            sent_columns: false,
        };
        let revision = start.revision;
        let timeout = Duration::from_secs(60);
        let mut stream = WatchStream::new(watcher, start, revision, None, timeout, false);
        let (mut names, mut chunks) = (Vec::new(), 0);
        while names.len() < 310 {
            let chunk = stream.next_chunk().await.expect("a chunk");
            chunks += 1;
            let big = chunk.windows(8).any(|w| w == b"\"cm-300\"");
            assert!(
                chunk.len() <= CHUNK || big,
                "a chunk of {} bytes",
                chunk.len()
            );
            assert!(stream.chunk.pending.capacity() <= CHUNK);
            for line in chunk.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let event: Value = serde_json::from_slice(line).unwrap();
                assert_eq!(event["type"], "ADDED");
                names.push(
                    event["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
        let expected: Vec<String> = (0..310).map(|i| format!("cm-{i:03}")).collect();
        assert_eq!(names, expected);
        assert!(chunks >= 5, "300 KiB of events in {chunks} chunks");
    }
}
