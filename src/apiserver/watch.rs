//! Watches: a stream of newline-delimited watch events, resumable from a resourceVersion, with
//! bookmarks, the initial-events protocol, 410 Gone for a revision too old, and a timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::handlers::{Call, Representation, partial};
use super::object;
use super::registry::Resource;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Event, EventKind, StoreError};
use super::table::{self, IncludeObject};

/// How often an idle watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(15);

struct Watcher {
    resource: Arc<Resource>,
    prefix: String,
    labels: LabelSelector,
    fields: FieldSelector,
    representation: Representation,
    include: IncludeObject,
    sent_columns: bool,
}

impl Watcher {
    fn matches(&self, value: &Value) -> bool {
        self.labels.matches_object(value) && self.fields.matches(value)
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

    /// The watch event (if any) this watcher sends for a store event: objects that start or
    /// stop matching the selectors are ADDED or DELETED.
    fn translate(&mut self, event: &Event) -> Option<Value> {
        if !event.record.key.starts_with(&self.prefix) {
            return None;
        }
        let now = self.matches(&event.record.value);
        let before = event.prev.as_ref().is_some_and(|p| self.matches(&p.value));
        let kind = match event.kind {
            EventKind::Created if now => "ADDED",
            EventKind::Updated if now && before => "MODIFIED",
            EventKind::Updated if now => "ADDED",
            EventKind::Updated if before => "DELETED",
            EventKind::Deleted if now => "DELETED",
            _ => return None,
        };
        let object = object::present(&self.resource, &event.record, event.revision);
        Some(json!({"type": kind, "object": self.render(object)}))
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

fn line(value: &Value) -> Result<axum::body::Bytes, std::io::Error> {
    let mut out = serde_json::to_vec(value).expect("JSON values serialize");
    out.push(b'\n');
    Ok(out.into())
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
            )))
            .expect("serializes");
            return Ok(
                (StatusCode::OK, [("content-type", "application/json")], body).into_response(),
            );
        }
        Err(e) => return Err(e.into()),
    };
    let mut start = start.expect("handled above");
    let (tx, rx) = mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(256);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        for event in &start.backlog {
            if let Some(e) = watcher.translate(event)
                && tx.send(line(&e)).await.is_err()
            {
                return;
            }
        }
        // The backlog brought the watcher up to the store's revision at subscription.
        let mut revision = from.unwrap_or(0).max(start.revision);
        if send_initial
            && tx
                .send(line(&watcher.bookmark(revision, true)))
                .await
                .is_err()
        {
            return;
        }
        loop {
            let next = tokio::time::timeout(BOOKMARK_INTERVAL, start.live.recv());
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tx.closed() => return,
                received = next => match received {
                    Err(_) if bookmarks => {
                        if tx.send(line(&watcher.bookmark(revision, false))).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => {}
                    Ok(Ok(event)) => {
                        if event.revision <= revision {
                            continue;
                        }
                        revision = event.revision;
                        if let Some(e) = watcher.translate(&event)
                            && tx.send(line(&e)).await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(Err(RecvError::Lagged(_))) => {
                        let _ = tx.send(line(&gone_event(
                            "the watch fell too far behind; list again and watch from the new resourceVersion".into(),
                        ))).await;
                        return;
                    }
                    Ok(Err(RecvError::Closed)) => return,
                },
            }
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx));
    Ok((StatusCode::OK, [("content-type", "application/json")], body).into_response())
}
