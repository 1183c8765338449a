//! API errors as Kubernetes `Status` objects, with the codes and reasons clients match on.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed request: the HTTP code, the `reason` clients match on, and a message for people.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status: the object the error is about, and field causes.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// An error with a code another server chose (an admission webhook's), and the reason
    /// Kubernetes gives that code.
    pub fn with_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "",
        };
        ApiError::new(code, reason, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 413, as kube-apiserver answers a request body or an object over its limits.
    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(403, "Forbidden", message)
    }

    /// `<resource>[.<group>] "<name>" not found`, as kube-apiserver words it.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(group, resource, name)
    }

    /// A URL that names nothing this server serves.
    pub fn no_route(path: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {what}"),
        )
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        ApiError::new(406, "NotAcceptable", message)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(group, resource, name)
    }

    /// An update based on a stale resourceVersion.
    /// 409 for a precondition the stored object does not meet (a uid of another object).
    pub fn precondition_failed(group: &str, resource: &str, name: &str, detail: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": Precondition failed: {detail}"
            ),
        )
    }

    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, resource, name)
    }

    /// 409 for a write that cannot be made, and why.
    pub fn conflict_because(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(group, resource, name)
    }

    /// A server-side apply that would take fields other managers own.
    pub fn apply_conflict(message: String) -> Self {
        ApiError::new(409, "Conflict", message)
    }

    /// An eviction a PodDisruptionBudget refuses, with why in the causes.
    pub fn disruption_budget(reason: String) -> Self {
        ApiError {
            details: Some(
                serde_json::json!({"causes": [{"reason": "DisruptionBudget", "message": reason}]}),
            ),
            ..ApiError::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
        }
    }

    /// 504, as kube-apiserver's timeout filter answers a request that ran out of time.
    pub fn timeout() -> Self {
        ApiError {
            details: Some(json!({})),
            ..ApiError::new(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            )
        }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// A 422 naming the object and each field that is wrong.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<FieldCause>) -> Self {
        let list: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = format!(
            "{kind}.{} \"{name}\" is invalid: {}",
            group_or_core(group),
            list.join(", ")
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        ApiError {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(json!({"name": name, "group": group, "kind": kind, "causes": causes})),
        }
    }

    /// A patch that does not apply to the object.
    pub fn invalid_patch(message: String) -> Self {
        ApiError::new(422, "Invalid", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }

    pub fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": resource}));
        self
    }

    /// The Status object for this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// One wrong field of an invalid object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl FieldCause {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldCause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: message.into(),
        }
    }

    /// A value the field may not take, given the rest of the object or its old value.
    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldCause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {}", message.into()),
        }
    }

    pub fn too_long(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldCause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: message.into(),
        }
    }

    /// A value outside the set the field takes; the value and the supported ones as they are
    /// to be shown (strings quoted: [`quoted`]).
    pub fn not_supported(
        field: impl Into<String>,
        value: impl std::fmt::Display,
        supported: impl IntoIterator<Item = impl std::fmt::Display>,
    ) -> Self {
        let supported: Vec<String> = supported.into_iter().map(|s| s.to_string()).collect();
        FieldCause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    /// A value another item of the list has already.
    pub fn duplicate(field: impl Into<String>, message: impl std::fmt::Display) -> Self {
        FieldCause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {message}"),
        }
    }

    /// A missing value, and why it is needed.
    pub fn required_because(field: impl Into<String>, why: impl std::fmt::Display) -> Self {
        FieldCause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: format!("Required value: {why}"),
        }
    }

    pub fn required(field: impl Into<String>) -> Self {
        FieldCause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }

    /// The same cause for a value found at `prefix` (a schema checks a value from its root).
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = match self.field.as_str() {
            "" => prefix.to_string(),
            f if f.starts_with('.') || f.starts_with('[') => format!("{prefix}{f}"),
            f => format!("{prefix}.{f}"),
        };
        self
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn group_or_core(group: &str) -> &str {
    if group.is_empty() { "core" } else { group }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&Ordered(&self)).expect("a Status serializes");
        (
            code,
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response()
    }
}

/// A Status with its fields in kube-apiserver's order (Go writes struct fields as declared):
/// clients that compare an error's text, not its parsed fields, see the same bytes.
struct Ordered<'a>(&'a ApiError);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let e = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("kind", "Status")?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("metadata", &json!({}))?;
        map.serialize_entry("status", "Failure")?;
        map.serialize_entry("message", &e.message)?;
        map.serialize_entry("reason", e.reason)?;
        if let Some(details) = &e.details {
            map.serialize_entry("details", &InOrder(details, DETAILS))?;
        }
        map.serialize_entry("code", &e.code)?;
        map.end()
    }
}

/// StatusDetails' fields, and a StatusCause's, in kube-apiserver's order.
const DETAILS: &[&str] = &[
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];
const CAUSE: &[&str] = &["reason", "message", "field"];

/// An object's fields in the given order (an empty `group` left out, as Go's `omitempty`
/// does), causes in theirs.
struct InOrder<'a>(&'a Value, &'static [&'static str]);

impl serde::Serialize for InOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Causes<'a>(&'a [Value]);
        impl serde::Serialize for Causes<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for cause in self.0 {
                    seq.serialize_element(&InOrder(cause, CAUSE))?;
                }
                seq.end()
            }
        }
        let mut map = serializer.serialize_map(None)?;
        for key in self.1 {
            match self.0.get(*key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.is_empty() => {}
                Some(Value::Array(causes)) if *key == "causes" => {
                    map.serialize_entry(key, &Causes(causes))?;
                }
                Some(value) => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

impl From<super::store::StoreError> for ApiError {
    fn from(e: super::store::StoreError) -> Self {
        match e {
            super::store::StoreError::Compacted { .. } => {
                ApiError::gone(format!("too old resource version: {e}"))
            }
            super::store::StoreError::TooNew { .. } => ApiError::new(504, "Timeout", e.to_string()),
            super::store::StoreError::TooLarge { .. } => ApiError::too_large(e.to_string()),
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// Strings as kube-apiserver shows them in a cause: `"a"`.
pub fn quoted<'a>(values: &'a [&'a str]) -> impl Iterator<Item = String> + 'a {
    values.iter().map(|v| format!("{v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(e: ApiError) -> String {
        let response = e.into_response();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_status_is_written_in_kube_apiservers_field_order() {
        assert_eq!(
            body(ApiError::already_exists("", "configmaps", "settings")).await,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"settings\" already exists","reason":"AlreadyExists","details":{"name":"settings","kind":"configmaps"},"code":409}"#
        );
        let invalid = ApiError::invalid(
            "Deployment",
            "apps",
            "web",
            vec![FieldCause::required("spec.selector")],
        );
        assert_eq!(
            body(invalid).await,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Deployment.apps \"web\" is invalid: spec.selector: Required value","reason":"Invalid","details":{"name":"web","group":"apps","kind":"Deployment","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.selector"}]},"code":422}"#
        );
    }
}
