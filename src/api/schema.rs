//! Schema overrides for fields whose derived JSON schema would not be structural, or would lose
//! the list semantics Kubernetes needs for server-side apply.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// `[]metav1.Condition` as upstream declares it: a list map keyed by `type`, at most 32 entries.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = Vec::<Condition>::json_schema(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema.insert("maxItems".into(), 32.into());
    schema
}

/// Any JSON value (a ClusterClass variable's value, a JSON patch value): kept as written.
pub fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A free-form object kept as written (an embedded OpenAPI schema).
pub fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}
