//! Custom resources served in several versions and stored in one, as kube-apiserver serves a
//! CRD whose `spec.conversion.strategy` is `Webhook`: a request in another version is
//! converted to the storage version before it is admitted and stored, and every object read
//! (get, list, watch, the answers to writes) is converted to the version asked for. The server
//! knows nothing of what the versions mean: a [`Converter`] registered for the group does, in
//! process here, and the same converter answers `apiextensions.k8s.io/v1` ConversionReviews
//! ([`webhook_router`]) for a real kube-apiserver.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Converts a group's objects between the versions its CRDs serve.
pub trait Converter: Send + Sync + std::fmt::Debug {
    /// Whether this converter knows the kind (a group may hold other providers' kinds too).
    fn converts(&self, kind: &str) -> bool;

    /// `object` (whose `apiVersion` says what it is) in `to_version` of its group; the error
    /// says which field could not be converted and why.
    fn convert(&self, object: Value, to_version: &str) -> Result<Value, String>;
}

/// The converters by group.
pub type Converters = HashMap<String, Arc<dyn Converter>>;

/// The ConversionReview webhook: `POST /convert`, for every group in `converters`.
pub fn webhook_router(converters: Arc<Converters>) -> Router {
    Router::new()
        .route("/convert", axum::routing::post(convert))
        .with_state(converters)
}

async fn convert(State(converters): State<Arc<Converters>>, body: axum::body::Bytes) -> Response {
    let review: Value = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                format!("the body is not a ConversionReview: {e}"),
            )
                .into_response();
        }
    };
    axum::Json(review_response(&converters, &review)).into_response()
}

/// The answer to a ConversionReview: every object converted, or a failure naming the first
/// that could not be (kube-apiserver then fails the request with that message).
pub fn review_response(converters: &Converters, review: &Value) -> Value {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let (group, version) = desired.rsplit_once('/').unwrap_or(("", desired));
    let converted: Result<Vec<Value>, String> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|object| {
            let kind = object["kind"].as_str().unwrap_or_default();
            let converter = converters
                .get(group)
                .filter(|c| c.converts(kind))
                .ok_or_else(|| format!("this webhook does not convert {kind}.{group} objects"))?;
            converter.convert(object.clone(), version)
        })
        .collect();
    let response = match converted {
        Ok(objects) => json!({
            "uid": request["uid"],
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": request["uid"],
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": response,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renames a field between v1 and v2, refusing objects that lack it.
    #[derive(Debug)]
    struct Renaming;

    impl Converter for Renaming {
        fn converts(&self, kind: &str) -> bool {
            kind == "Widget"
        }

        fn convert(&self, mut object: Value, to_version: &str) -> Result<Value, String> {
            let (from, to) = match to_version {
                "v2" => ("old", "new"),
                _ => ("new", "old"),
            };
            let value = object
                .as_object_mut()
                .and_then(|o| o.remove(from))
                .ok_or(format!("{from}: required"))?;
            object[to] = value;
            object["apiVersion"] = json!(format!("example.com/{to_version}"));
            Ok(object)
        }
    }

    fn converters() -> Converters {
        HashMap::from([(
            "example.com".to_string(),
            Arc::new(Renaming) as Arc<dyn Converter>,
        )])
    }

    #[test]
    fn a_review_converts_every_object_or_names_the_failure() {
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "desiredAPIVersion": "example.com/v2",
                "objects": [{"apiVersion": "example.com/v1", "kind": "Widget", "old": 1}],
            },
        });
        let answer = review_response(&converters(), &review);
        assert_eq!(
            answer["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(answer["response"]["result"]["status"], "Success");
        assert_eq!(
            answer["response"]["convertedObjects"],
            json!([{"apiVersion": "example.com/v2", "kind": "Widget", "new": 1}])
        );

        let mut bad = review.clone();
        bad["request"]["objects"][0] = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        let answer = review_response(&converters(), &bad);
        assert_eq!(answer["response"]["result"]["status"], "Failure");
        assert_eq!(answer["response"]["result"]["message"], "old: required");

        let mut other = review;
        other["request"]["desiredAPIVersion"] = json!("other.io/v2");
        let answer = review_response(&converters(), &other);
        assert_eq!(
            answer["response"]["result"]["message"],
            "this webhook does not convert Widget.other.io objects"
        );
    }
}
