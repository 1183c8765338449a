//! Schema overrides for fields whose derived JSON schema would not be structural, or would lose
//! the list semantics Kubernetes needs for server-side apply.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::json;

use super::kubeadm_config::Arg;

/// `[]metav1.Condition` as upstream declares it: a list map keyed by `type`, at most 32 entries.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = Vec::<Condition>::json_schema(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema.insert("maxItems".into(), 32.into());
    if let Some(condition) = schema
        .get_mut("items")
        .and_then(|items| items.get_mut("properties"))
    {
        condition["observedGeneration"]["minimum"] = json!(0);
        condition["status"]["enum"] = json!(["True", "False", "Unknown"]);
    }
    schema
}

/// A list of command-line flags (`extraArgs` of a control-plane component): 1 to 100 name/value
/// pairs, each name at most once — upstream's CEL rule, so the API server refuses a duplicate
/// instead of a component starting with the flag twice.
pub fn extra_args(generator: &mut SchemaGenerator) -> Schema {
    args("extraArgs", generator)
}

/// The kubelet's flags, as [`extra_args`].
pub fn kubelet_extra_args(generator: &mut SchemaGenerator) -> Schema {
    args("kubeletExtraArgs", generator)
}

fn args(field: &str, generator: &mut SchemaGenerator) -> Schema {
    let mut schema = Vec::<Arg>::json_schema(generator);
    schema.insert("minItems".into(), 1.into());
    schema.insert("maxItems".into(), 100.into());
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        json!(["name", "value"]),
    );
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([{
            "rule": "self.all(x, self.exists_one(y, x.name == y.name))",
            "message": format!("{field} name must be unique"),
        }]),
    );
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
