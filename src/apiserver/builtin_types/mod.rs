//! What the built-in kinds' Go types accept, so that nothing malformed is stored: a Deployment
//! whose `replicas` is `"three"`, a Role whose `rules` is a string, an owner reference whose
//! `kind` is a number. Typed clients decode every object of a list; one bad object stored breaks
//! every list of its kind, cluster-wide.
//!
//! The schemas are k8s-openapi's (generated from Kubernetes' OpenAPI document), with what it
//! leaves out put back: the list, map and struct markers of each field (`builtin.lists`, from
//! the .proto files' comments) and the enumerations kube-apiserver's validation checks. They
//! are made by a test ([`generate`]) and stored in `schemas.json`, read on first use.
//!
//! A write is checked in two steps, as kube-apiserver does it:
//! 1. [`Schemas::decode`], as the JSON decoder into the Go types: a value of the wrong type is
//!    refused naming its field and the type it takes (a 422, as kube-apiserver answers for
//!    custom resources; its decoder's 400 for built-in kinds names neither a base64 value's
//!    field nor a map's key), and fields the types do not have are dropped and named, for
//!    `fieldValidation` to warn about or refuse;
//! 2. [`Schemas::validate`], after defaulting: required fields and enumerations, as field causes
//!    for a 422.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::status::FieldCause;

#[cfg(test)]
mod generate;

const REF: &str = "#/components/schemas/";

/// What `schemas.json` holds: each kind's definition, by group and kind, and the definitions.
#[derive(serde::Deserialize, serde::Serialize)]
struct Stored {
    /// Group, kind, definition.
    kinds: Vec<(String, String, String)>,
    definitions: HashMap<String, Value>,
}

/// The schemas of every built-in kind the server serves, by definition name.
pub struct Schemas {
    /// Hashed, not ordered: every node with a `$ref` is looked up here on every write.
    definitions: HashMap<String, Value>,
    /// The definition of each kind, by kind, then group.
    kinds: HashMap<String, Vec<(String, String)>>,
}

/// Made on first use, shared by every server in the process (a fleet's workload API servers
/// too).
pub static SCHEMAS: LazyLock<Schemas> = LazyLock::new(Schemas::load);

/// What [`Schemas::decode`] found.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Fields the types do not have (removed), by path.
    pub unknown: Vec<String>,
    /// Values the types cannot hold, each naming its field and the type it takes (never the
    /// value: it may be a Secret's).
    pub errors: Vec<FieldCause>,
}

/// The JSON type of a value, as a field cause shows it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Where a value sits in the object being checked. Written out only when a cause names it:
/// every field of every write is walked, and almost none has anything wrong.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    /// `outer.field`, or `field` at the root.
    Field(&'a Path<'a>, &'a str),
    /// `outer[i]`.
    Index(&'a Path<'a>, usize),
    /// `outer[key]`: an entry of a map.
    Key(&'a Path<'a>, &'a str),
}

impl Path<'_> {
    fn is_root(&self) -> bool {
        matches!(self, Path::Root)
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(Path::Root, field) => f.write_str(field),
            Path::Field(outer, field) => write!(f, "{outer}.{field}"),
            Path::Index(outer, i) => write!(f, "{outer}[{i}]"),
            Path::Key(outer, key) => write!(f, "{outer}[{key}]"),
        }
    }
}

/// A value of the wrong type, as kube-apiserver's schema validation words it: the field, the
/// type it takes, and the type it was given.
fn wrong_type(path: &Path, want: &str, given: &str) -> FieldCause {
    FieldCause::invalid(
        path.to_string(),
        format!("Invalid value: {given:?}: {path} in body must be of type {want}: {given:?}"),
    )
}

impl Schemas {
    /// The schemas `schemas.json` holds (see [`generate`]).
    fn load() -> Schemas {
        let stored: Stored =
            serde_json::from_str(include_str!("schemas.json")).expect("schemas.json is JSON");
        let mut kinds: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for (group, kind, definition) in stored.kinds {
            kinds.entry(kind).or_default().push((group, definition));
        }
        Schemas {
            definitions: stored.definitions,
            kinds,
        }
    }

    /// The definition of what a built-in resource stores (`events.k8s.io` Events are stored as
    /// core Events); None for resources checked otherwise (CRDs, reviews).
    pub fn of(&self, resource: &super::registry::Resource) -> Option<&str> {
        if resource.crd_name.is_some() {
            return None;
        }
        self.kind(
            resource.storage_group.as_deref().unwrap_or(&resource.group),
            &resource.kind,
        )
    }

    /// The definition name of a built-in kind.
    pub fn kind(&self, group: &str, kind: &str) -> Option<&str> {
        self.kinds
            .get(kind)?
            .iter()
            .find(|(g, _)| *g == group)
            .map(|(_, definition)| definition.as_str())
    }

    /// A definition by name.
    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.definitions.get(name)
    }

    /// `schema` with a `$ref` followed, and the definition's name when it had one.
    fn resolve<'s>(&'s self, schema: &'s Value) -> (&'s Value, Option<&'s str>) {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference.strip_prefix(REF).unwrap_or(reference);
                match self.definitions.get_key_value(name) {
                    Some((name, definition)) => (definition, Some(name.as_str())),
                    None => (schema, None),
                }
            }
            None => (schema, None),
        }
    }

    /// Decodes `object` of the kind defined as `definition` as the Go types would: fields they
    /// do not have are removed and named, and values they cannot hold are field causes.
    pub fn decode(&self, definition: &str, object: &mut Value) -> Decoded {
        let mut decoded = Decoded::default();
        if let Some(schema) = self.definitions.get(definition) {
            self.decode_at(schema, object, &Path::Root, &mut decoded);
        }
        decoded
    }

    fn decode_at(&self, schema: &Value, value: &mut Value, path: &Path, out: &mut Decoded) {
        if value.is_null() {
            return;
        }
        let (schema, _) = self.resolve(schema);
        let given = json_type(value);
        if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            if !matches!(value, Value::Number(_) | Value::String(_)) {
                out.errors
                    .push(wrong_type(path, "integer or string", given));
            }
            return;
        }
        let format = schema.get("format").and_then(Value::as_str);
        match (schema.get("type").and_then(Value::as_str), value) {
            (Some("string"), Value::String(text)) => {
                use base64::Engine;
                if format == Some("byte")
                    && let Err(e) =
                        base64::engine::general_purpose::STANDARD.decode(text.as_bytes())
                {
                    out.errors.push(FieldCause::invalid(
                        path.to_string(),
                        format!("Invalid value: \"<secret contents redacted>\": must be base64-encoded ({e})"),
                    ));
                } else if format == Some("date-time")
                    && text.parse::<k8s_openapi::jiff::Timestamp>().is_err()
                {
                    out.errors.push(wrong_type(path, "date-time", given));
                }
            }
            (Some("integer"), Value::Number(n)) => {
                let fits = match format {
                    Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => n.is_i64() || n.is_u64(),
                };
                if !fits {
                    let want = if given == "integer" {
                        format.unwrap_or("int64")
                    } else {
                        "integer"
                    };
                    out.errors.push(wrong_type(path, want, given));
                }
            }
            (Some("number"), Value::Number(_)) | (Some("boolean"), Value::Bool(_)) => {}
            (Some("array"), Value::Array(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.decode_at(&schema["items"], item, &Path::Index(path, i), out);
                }
            }
            (Some("object") | None, Value::Object(map)) => {
                self.decode_object(schema, map, path, out)
            }
            // A schema without a type takes anything.
            (None, _) => {}
            (Some(want), _) => out.errors.push(wrong_type(path, want, given)),
        }
    }

    fn decode_object(
        &self,
        schema: &Value,
        map: &mut Map<String, Value>,
        path: &Path,
        out: &mut Decoded,
    ) {
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            let preserve =
                schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            map.retain(|key, _| {
                let known = properties.contains_key(key) || preserve;
                if !known {
                    out.unknown.push(Path::Field(path, key).to_string());
                }
                known
            });
            for (key, v) in map.iter_mut() {
                if let Some(property) = properties.get(key) {
                    self.decode_at(property, v, &Path::Field(path, key), out);
                }
            }
        } else if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            for (key, v) in map.iter_mut() {
                self.decode_at(values, v, &Path::Key(path, key), out);
            }
        }
    }

    /// Required fields and enumerations of `object` (defaulted), as field causes. The status
    /// is its writers' to keep complete; only its values' types are checked ([`Schemas::decode`]).
    pub fn validate(&self, definition: &str, object: &Value) -> Vec<FieldCause> {
        let mut causes = Vec::new();
        if let Some(schema) = self.definitions.get(definition) {
            self.validate_at(schema, object, &Path::Root, &mut causes);
        }
        causes
    }

    fn validate_at(
        &self,
        schema: &Value,
        value: &Value,
        path: &Path,
        causes: &mut Vec<FieldCause>,
    ) {
        let (schema, _) = self.resolve(schema);
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && let Some(text) = value.as_str()
            && !text.is_empty()
            && !options.contains(value)
        {
            causes.push(FieldCause::not_supported(
                path.to_string(),
                format!("{text:?}"),
                options.iter().map(|o| o.to_string()),
            ));
        }
        match value {
            Value::Array(items) => {
                if let Some(item) = schema.get("items") {
                    for (i, v) in items.iter().enumerate() {
                        self.validate_at(item, v, &Path::Index(path, i), causes);
                    }
                }
            }
            Value::Object(map) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for required in schema["required"].as_array().into_iter().flatten() {
                        let Some(key) = required.as_str() else {
                            continue;
                        };
                        if map.get(key).is_none_or(Value::is_null) {
                            causes.push(FieldCause::required(Path::Field(path, key).to_string()));
                        }
                    }
                    for (key, v) in map {
                        if path.is_root() && key == "status" {
                            continue;
                        }
                        if let Some(property) = properties.get(key) {
                            self.validate_at(property, v, &Path::Field(path, key), causes);
                        }
                    }
                } else if let Some(values) =
                    schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    for (key, v) in map {
                        self.validate_at(values, v, &Path::Key(path, key), causes);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A node of a built-in kind's schema with its `$ref` followed.
pub fn resolve(node: &Value) -> &Value {
    let schemas: &'static Schemas = &SCHEMAS;
    node.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| schemas.definitions.get(r.strip_prefix(REF).unwrap_or(r)))
        .unwrap_or(node)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(group: &str, kind: &str, mut object: Value) -> Decoded {
        let definition = SCHEMAS.kind(group, kind).unwrap().to_string();
        SCHEMAS.decode(&definition, &mut object)
    }

    /// The field causes of values a kind's types cannot hold, as `field: message`.
    fn errors(group: &str, kind: &str, object: Value) -> Vec<String> {
        decode(group, kind, object)
            .errors
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn values_the_types_cannot_hold_name_their_field_and_type_but_not_their_value() {
        let deployment = |replicas: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": replicas}});
        for (replicas, expected) in [
            (
                json!("three"),
                r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ),
            (
                json!(1u64 << 40),
                r#"Invalid value: "integer": spec.replicas in body must be of type int32: "integer""#,
            ),
            (
                json!(1.5),
                r#"Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
            ),
        ] {
            assert_eq!(
                errors("apps", "Deployment", deployment(replicas)),
                [format!("spec.replicas: {expected}")]
            );
        }
        assert!(errors("apps", "Deployment", deployment(json!(3))).is_empty());
        assert_eq!(
            errors(
                "rbac.authorization.k8s.io",
                "Role",
                json!({"metadata": {"name": "r"}, "rules": "x"})
            ),
            [r#"rules: Invalid value: "string": rules in body must be of type array: "string""#]
        );
        assert_eq!(
            errors(
                "",
                "ConfigMap",
                json!({"metadata": {"name": "c", "ownerReferences": [{"kind": 1}]}})
            ),
            [
                r#"metadata.ownerReferences[0].kind: Invalid value: "integer": metadata.ownerReferences[0].kind in body must be of type string: "integer""#
            ]
        );
        assert_eq!(
            errors(
                "",
                "Secret",
                json!({"metadata": {"name": "s"}, "stringData": {"n": 42}})
            ),
            [
                r#"stringData[n]: Invalid value: "integer": stringData[n] in body must be of type string: "integer""#
            ]
        );
        let bad = errors(
            "",
            "Secret",
            json!({"metadata": {"name": "s"}, "data": {"password": "hunter2!"}}),
        );
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].starts_with("data[password]: Invalid value: \"<secret contents redacted>\""),
            "{bad:?}"
        );
        assert!(!bad[0].contains("hunter2"));
        assert!(
            errors(
                "",
                "Secret",
                json!({"metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}})
            )
            .is_empty()
        );
        assert_eq!(
            errors(
                "",
                "Service",
                json!({"spec": {"ports": [{"port": 80, "targetPort": true}]}})
            ),
            [
                r#"spec.ports[0].targetPort: Invalid value: "boolean": spec.ports[0].targetPort in body must be of type integer or string: "boolean""#
            ]
        );
    }

    #[test]
    fn unknown_fields_are_removed_and_named_with_their_path() {
        let mut pod = json!({"metadata": {"name": "p", "colour": "blue"}, "spec": {"containers": [{"name": "c", "image": "i", "imagee": "typo"}]}});
        let definition = SCHEMAS.kind("", "Pod").unwrap().to_string();
        let decoded = SCHEMAS.decode(&definition, &mut pod);
        assert!(decoded.errors.is_empty());
        assert_eq!(
            decoded.unknown,
            ["metadata.colour", "spec.containers[0].imagee"]
        );
        assert_eq!(
            pod["spec"]["containers"][0],
            json!({"name": "c", "image": "i"})
        );
        // Free-form maps keep their keys.
        let mut cm = json!({"metadata": {"name": "c", "labels": {"any": "x"}}, "data": {"k": "v"}});
        let definition = SCHEMAS.kind("", "ConfigMap").unwrap().to_string();
        let decoded = SCHEMAS.decode(&definition, &mut cm);
        assert!(decoded.unknown.is_empty() && decoded.errors.is_empty());
    }

    #[test]
    fn required_fields_and_enumerations_are_causes_with_their_path() {
        let definition = SCHEMAS.kind("apps", "Deployment").unwrap();
        let causes = SCHEMAS.validate(
            definition,
            &json!({"metadata": {"name": "d"}, "spec": {"strategy": {"type": "Bogus"}, "template": {"spec": {"containers": [{"image": "i"}]}}}}),
        );
        let shown: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            shown,
            [
                "spec.selector: Required value",
                "spec.strategy.type: Unsupported value: \"Bogus\": supported values: \"Recreate\", \"RollingUpdate\"",
                "spec.template.spec.containers[0].name: Required value",
            ]
        );
    }

    #[test]
    fn a_field_named_description_is_a_field() {
        let mut class = json!({"metadata": {"name": "p"}, "value": 1, "description": "first"});
        let definition = SCHEMAS
            .kind("scheduling.k8s.io", "PriorityClass")
            .unwrap()
            .to_string();
        let decoded = SCHEMAS.decode(&definition, &mut class);
        assert!(decoded.unknown.is_empty() && decoded.errors.is_empty());
        assert_eq!(class["description"], "first");
    }

    #[test]
    fn list_markers_come_from_the_proto_comments() {
        let pod_spec = SCHEMAS.definition("io.k8s.api.core.v1.PodSpec").unwrap();
        let containers = &pod_spec["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let http_get = SCHEMAS
            .definition("io.k8s.api.core.v1.HTTPGetAction")
            .unwrap();
        assert_eq!(
            http_get["properties"]["httpHeaders"]["x-kubernetes-list-type"],
            "atomic"
        );
    }
}
