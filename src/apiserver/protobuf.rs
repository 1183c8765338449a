//! Kubernetes' protobuf encoding, read for the built-in kinds current kubectl sends that way
//! (`kubectl create namespace|secret|configmap|serviceaccount|role|clusterrole|rolebinding|
//! clusterrolebinding`, and the reviews of `kubectl auth can-i|whoami`). Objects are decoded
//! to the same JSON every other request carries; the server answers in JSON, which clients
//! accept.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Kind {
    String,
    Int,
    Bool,
    Time,
    Message(&'static [Field]),
    StringMap,
    BytesMap,
}

/// One field of a message: number, JSON name, type, and whether it repeats.
struct Field(u64, &'static str, Kind, bool);

const OWNER_REFERENCE: &[Field] = &[
    Field(1, "kind", Kind::String, false),
    Field(3, "name", Kind::String, false),
    Field(4, "uid", Kind::String, false),
    Field(5, "apiVersion", Kind::String, false),
    Field(6, "controller", Kind::Bool, false),
    Field(7, "blockOwnerDeletion", Kind::Bool, false),
];

const OBJECT_META: &[Field] = &[
    Field(1, "name", Kind::String, false),
    Field(2, "generateName", Kind::String, false),
    Field(3, "namespace", Kind::String, false),
    Field(5, "uid", Kind::String, false),
    Field(6, "resourceVersion", Kind::String, false),
    Field(7, "generation", Kind::Int, false),
    Field(8, "creationTimestamp", Kind::Time, false),
    Field(9, "deletionTimestamp", Kind::Time, false),
    Field(10, "deletionGracePeriodSeconds", Kind::Int, false),
    Field(11, "labels", Kind::StringMap, false),
    Field(12, "annotations", Kind::StringMap, false),
    Field(13, "ownerReferences", Kind::Message(OWNER_REFERENCE), true),
    Field(14, "finalizers", Kind::String, true),
];

const OBJECT_REFERENCE: &[Field] = &[
    Field(1, "kind", Kind::String, false),
    Field(2, "namespace", Kind::String, false),
    Field(3, "name", Kind::String, false),
    Field(4, "uid", Kind::String, false),
    Field(5, "apiVersion", Kind::String, false),
    Field(6, "resourceVersion", Kind::String, false),
    Field(7, "fieldPath", Kind::String, false),
];

const LOCAL_OBJECT_REFERENCE: &[Field] = &[Field(1, "name", Kind::String, false)];

const NAMESPACE: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(
        2,
        "spec",
        Kind::Message(&[Field(1, "finalizers", Kind::String, true)]),
        false,
    ),
    Field(
        3,
        "status",
        Kind::Message(&[Field(1, "phase", Kind::String, false)]),
        false,
    ),
];

const SECRET: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(2, "data", Kind::BytesMap, false),
    Field(3, "type", Kind::String, false),
    Field(4, "stringData", Kind::StringMap, false),
    Field(5, "immutable", Kind::Bool, false),
];

const CONFIG_MAP: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(2, "data", Kind::StringMap, false),
    Field(3, "binaryData", Kind::BytesMap, false),
    Field(4, "immutable", Kind::Bool, false),
];

const SERVICE_ACCOUNT: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(2, "secrets", Kind::Message(OBJECT_REFERENCE), true),
    Field(
        3,
        "imagePullSecrets",
        Kind::Message(LOCAL_OBJECT_REFERENCE),
        true,
    ),
    Field(4, "automountServiceAccountToken", Kind::Bool, false),
];

const DELETE_OPTIONS: &[Field] = &[
    Field(1, "gracePeriodSeconds", Kind::Int, false),
    Field(
        2,
        "preconditions",
        Kind::Message(&[
            Field(1, "uid", Kind::String, false),
            Field(2, "resourceVersion", Kind::String, false),
        ]),
        false,
    ),
    Field(3, "orphanDependents", Kind::Bool, false),
    Field(4, "propagationPolicy", Kind::String, false),
    Field(5, "dryRun", Kind::String, true),
];

const POLICY_RULE: &[Field] = &[
    Field(1, "verbs", Kind::String, true),
    Field(2, "apiGroups", Kind::String, true),
    Field(3, "resources", Kind::String, true),
    Field(4, "resourceNames", Kind::String, true),
    Field(5, "nonResourceURLs", Kind::String, true),
];

const LABEL_SELECTOR: &[Field] = &[
    Field(1, "matchLabels", Kind::StringMap, false),
    Field(
        2,
        "matchExpressions",
        Kind::Message(&[
            Field(1, "key", Kind::String, false),
            Field(2, "operator", Kind::String, false),
            Field(3, "values", Kind::String, true),
        ]),
        true,
    ),
];

const ROLE: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(2, "rules", Kind::Message(POLICY_RULE), true),
];

const CLUSTER_ROLE: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(2, "rules", Kind::Message(POLICY_RULE), true),
    Field(
        3,
        "aggregationRule",
        Kind::Message(&[Field(
            1,
            "clusterRoleSelectors",
            Kind::Message(LABEL_SELECTOR),
            true,
        )]),
        false,
    ),
];

const ROLE_BINDING: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(
        2,
        "subjects",
        Kind::Message(&[
            Field(1, "kind", Kind::String, false),
            Field(2, "apiGroup", Kind::String, false),
            Field(3, "name", Kind::String, false),
            Field(4, "namespace", Kind::String, false),
        ]),
        true,
    ),
    Field(
        3,
        "roleRef",
        Kind::Message(&[
            Field(1, "apiGroup", Kind::String, false),
            Field(2, "kind", Kind::String, false),
            Field(3, "name", Kind::String, false),
        ]),
        false,
    ),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    Field(1, "namespace", Kind::String, false),
    Field(2, "verb", Kind::String, false),
    Field(3, "group", Kind::String, false),
    Field(4, "version", Kind::String, false),
    Field(5, "resource", Kind::String, false),
    Field(6, "subresource", Kind::String, false),
    Field(7, "name", Kind::String, false),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[
    Field(1, "path", Kind::String, false),
    Field(2, "verb", Kind::String, false),
];

/// SubjectAccessReview and LocalSubjectAccessReview (the spec names whom it asks about).
const SUBJECT_ACCESS_REVIEW: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(
        2,
        "spec",
        Kind::Message(&[
            Field(
                1,
                "resourceAttributes",
                Kind::Message(RESOURCE_ATTRIBUTES),
                false,
            ),
            Field(
                2,
                "nonResourceAttributes",
                Kind::Message(NON_RESOURCE_ATTRIBUTES),
                false,
            ),
            Field(3, "user", Kind::String, false),
            Field(4, "groups", Kind::String, true),
            Field(6, "uid", Kind::String, false),
        ]),
        false,
    ),
];

const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(
        2,
        "spec",
        Kind::Message(&[
            Field(
                1,
                "resourceAttributes",
                Kind::Message(RESOURCE_ATTRIBUTES),
                false,
            ),
            Field(
                2,
                "nonResourceAttributes",
                Kind::Message(NON_RESOURCE_ATTRIBUTES),
                false,
            ),
        ]),
        false,
    ),
];

const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    Field(1, "metadata", Kind::Message(OBJECT_META), false),
    Field(
        2,
        "spec",
        Kind::Message(&[Field(1, "namespace", Kind::String, false)]),
        false,
    ),
];

const SELF_SUBJECT_REVIEW: &[Field] = &[Field(1, "metadata", Kind::Message(OBJECT_META), false)];

fn schema(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("rbac.authorization.k8s.io/v1", "Role") => Some(ROLE),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => Some(CLUSTER_ROLE),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            Some(ROLE_BINDING)
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            Some(SUBJECT_ACCESS_REVIEW)
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(SELF_SUBJECT_ACCESS_REVIEW),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Some(SELF_SUBJECT_RULES_REVIEW),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => Some(SELF_SUBJECT_REVIEW),
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "Secret") => Some(SECRET),
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        (_, "DeleteOptions") => Some(DELETE_OPTIONS),
        _ => None,
    }
}

/// A protobuf value as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.data.split_first().ok_or("truncated varint")?;
            self.data = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                if self.data.len() < n {
                    return Err("truncated fixed field".into());
                }
                self.data = &self.data[n..];
                Wire::Fixed
            }
            2 => {
                let len = self.varint()? as usize;
                if self.data.len() < len {
                    return Err("truncated field".into());
                }
                let (bytes, rest) = self.data.split_at(len);
                self.data = rest;
                Wire::Bytes(bytes)
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((key >> 3, wire)))
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".into())
}

fn decode_time(bytes: &[u8]) -> Result<Value, String> {
    let mut seconds = 0i64;
    let mut reader = Reader { data: bytes };
    while let Some((number, wire)) = reader.next()? {
        if let (1, Wire::Varint(v)) = (number, wire) {
            seconds = v as i64;
        }
    }
    let t = k8s_openapi::jiff::Timestamp::from_second(seconds).map_err(|e| e.to_string())?;
    Ok(json!(t.to_string()))
}

fn decode_map(bytes: &[u8], binary: bool) -> Result<(String, Value), String> {
    let mut reader = Reader { data: bytes };
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    while let Some((number, wire)) = reader.next()? {
        match (number, wire) {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) if binary => {
                value = json!(base64::engine::general_purpose::STANDARD.encode(b))
            }
            (2, Wire::Bytes(b)) => value = json!(text(b)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn decode_message(bytes: &[u8], fields: &[Field]) -> Result<Value, String> {
    let mut out = Map::new();
    let mut reader = Reader { data: bytes };
    while let Some((number, wire)) = reader.next()? {
        // Fields this decoder does not know are skipped, as protobuf readers do.
        let Some(Field(_, name, kind, repeated)) = fields.iter().find(|f| f.0 == number) else {
            continue;
        };
        let value = match (kind, wire) {
            (Kind::String, Wire::Bytes(b)) => json!(text(b)?),
            (Kind::Int, Wire::Varint(v)) => json!(v as i64),
            (Kind::Bool, Wire::Varint(v)) => json!(v != 0),
            (Kind::Time, Wire::Bytes(b)) => decode_time(b)?,
            (Kind::Message(inner), Wire::Bytes(b)) => decode_message(b, inner)?,
            (Kind::StringMap | Kind::BytesMap, Wire::Bytes(b)) => {
                let (k, v) = decode_map(b, matches!(kind, Kind::BytesMap))?;
                let map = out.entry(name.to_string()).or_insert_with(|| json!({}));
                map[k] = v;
                continue;
            }
            _ => return Err(format!("field {name} has an unexpected wire type")),
        };
        if *repeated {
            let list = out.entry(name.to_string()).or_insert_with(|| json!([]));
            list.as_array_mut().expect("a list").push(value);
        } else {
            out.insert(name.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf prefix")?;
    let mut reader = Reader { data: envelope };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while let Some((number, wire)) = reader.next()? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                let mut r = Reader { data: type_meta };
                while let Some((n, w)) = r.next()? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let fields = schema(&api_version, &kind).ok_or_else(|| {
        format!("{kind} ({api_version}) cannot be sent as protobuf to this server; send it as JSON or YAML (e.g. kubectl apply -f)")
    })?;
    let mut object = decode_message(raw, fields)?;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn decodes_a_secret() {
        let mut meta = field(1, b"creds");
        meta.extend(field(11, &[field(1, b"app"), field(2, b"web")].concat()));
        let mut secret = field(1, &meta);
        secret.extend(field(
            2,
            &[field(1, b"password"), field(2, b"s3cret")].concat(),
        ));
        secret.extend(field(3, b"Opaque"));
        let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &secret)].concat();
        let object = decode(&body).unwrap();
        assert_eq!(
            object,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "labels": {"app": "web"}},
                "data": {"password": "czNjcmV0"},
                "type": "Opaque",
            })
        );
    }

    #[test]
    fn unknown_kinds_are_refused_with_advice() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta)].concat();
        assert!(decode(&body).unwrap_err().contains("kubectl apply"));
        assert!(decode(b"{}").is_err());
    }
}
