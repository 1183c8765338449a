//! The PATCH content types: JSON merge patch, JSON patch, strategic merge patch (for built-in
//! kinds, as kubectl sends it). Server-side apply is in [`super::managed`].

use serde_json::{Map, Value};

use super::status::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Result<PatchType, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml (got {other:?})"
            ))),
        }
    }
}

/// Applies a patch document to an object.
pub fn apply_patch(kind: PatchType, mut out: Value, body: &[u8]) -> Result<Value, ApiError> {
    match kind {
        PatchType::Merge => json_patch::merge(&mut out, &parse_json(body)?),
        PatchType::Strategic => strategic_merge(&mut out, &parse_json(body)?),
        PatchType::Apply => {
            return Err(ApiError::internal(
                "server-side apply is not a patch document; managed::apply applies it",
            ));
        }
        PatchType::Json => {
            let ops: Vec<Value> = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the JSON patch is not a list of operations: {e}"))
            })?;
            // Kubernetes accepts `test` of a missing path against null (kube-rs's finalizer
            // helper sends it); RFC 6902 does not. Such tests hold, so they are dropped.
            let ops: Vec<Value> = ops
                .into_iter()
                .filter(|op| {
                    let is_null_test =
                        op["op"] == "test" && op.get("value").is_none_or(Value::is_null);
                    let missing = op["path"].as_str().is_none_or(|p| out.pointer(p).is_none());
                    !(is_null_test && missing)
                })
                .collect();
            let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &patch).map_err(|e| {
                if e.to_string().contains("test") {
                    ApiError::invalid_patch(format!("the test operation failed: {e}"))
                } else {
                    ApiError::invalid_patch(format!("the JSON patch could not be applied: {e}"))
                }
            })?;
        }
    }
    Ok(out)
}

pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// JSON, or YAML (which `kubectl apply --server-side` and some clients send).
pub fn parse_json_or_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
    crate::yaml::from_str(text).map_err(|e| {
        ApiError::bad_request(format!("the request body is neither JSON nor YAML: {e}"))
    })
}

/// A request body as JSON (or YAML), with the paths of the keys a JSON object repeats (the
/// last value is kept, as Go's decoder keeps it; `fieldValidation` warns about or refuses them).
pub fn parse_with_duplicates(body: &[u8]) -> Result<(Value, Vec<String>), ApiError> {
    let mut json = serde_json::Deserializer::from_slice(body);
    if let Ok(Tracked(value, duplicates)) = serde::Deserialize::deserialize(&mut json)
        && json.end().is_ok()
    {
        return Ok((value, duplicates));
    }
    parse_json_or_yaml(body).map(|v| (v, Vec::new()))
}

/// A JSON value and the paths of the keys its objects repeat. Building the paths only where
/// there are duplicates keeps the common case as cheap as decoding a `Value`.
struct Tracked(Value, Vec<String>);

impl<'de> serde::Deserialize<'de> for Tracked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TrackedVisitor)
    }
}

struct TrackedVisitor;

/// The path `inner` below `outer`: `spec.replicas`, `containers[0].name`.
fn nested(outer: &str, inner: &str) -> String {
    if inner.starts_with('[') {
        format!("{outer}{inner}")
    } else {
        format!("{outer}.{inner}")
    }
}

impl<'de> serde::de::Visitor<'de> for TrackedVisitor {
    type Value = Tracked;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Tracked, E> {
        Ok(Tracked(Value::Bool(v), Vec::new()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Tracked, E> {
        Ok(Tracked(Value::from(v), Vec::new()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Tracked, E> {
        Ok(Tracked(Value::from(v), Vec::new()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Tracked, E> {
        Ok(Tracked(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
            Vec::new(),
        ))
    }

    fn visit_str<E>(self, v: &str) -> Result<Tracked, E> {
        Ok(Tracked(Value::String(v.to_string()), Vec::new()))
    }

    fn visit_string<E>(self, v: String) -> Result<Tracked, E> {
        Ok(Tracked(Value::String(v), Vec::new()))
    }

    fn visit_unit<E>(self) -> Result<Tracked, E> {
        Ok(Tracked(Value::Null, Vec::new()))
    }

    fn visit_none<E>(self) -> Result<Tracked, E> {
        Ok(Tracked(Value::Null, Vec::new()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Tracked, A::Error> {
        let mut items = Vec::new();
        let mut duplicates = Vec::new();
        while let Some(Tracked(item, inner)) = seq.next_element()? {
            let i = items.len();
            duplicates.extend(inner.iter().map(|d| nested(&format!("[{i}]"), d)));
            items.push(item);
        }
        Ok(Tracked(Value::Array(items), duplicates))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Tracked, A::Error> {
        let mut object = serde_json::Map::new();
        let mut duplicates = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let Tracked(value, inner) = map.next_value()?;
            duplicates.extend(inner.iter().map(|d| nested(&key, d)));
            if let Some(slot) = object.get_mut(&key) {
                *slot = value;
                duplicates.push(key);
            } else {
                object.insert(key, value);
            }
        }
        Ok(Tracked(Value::Object(object), duplicates))
    }
}

/// The merge key of list fields that strategic merge patch merges item by item.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "volumeMounts"
        | "imagePullSecrets" => Some("name"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" => Some("containerPort"),
        _ => None,
    }
}

/// A strategic merge patch: a merge patch whose lists of keyed items merge by key, with
/// kubectl's `$patch` and `$setElementOrder` directives understood.
fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = p.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("made an object above");
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(inner)
                if inner.get("$patch").and_then(Value::as_str) == Some("delete") =>
            {
                t.remove(k);
            }
            Value::Object(_) => strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => match (merge_key(k), t.get_mut(k)) {
                (Some(key), Some(Value::Array(existing))) => merge_list(existing, items, key),
                _ => {
                    let kept: Vec<Value> = items
                        .iter()
                        .filter(|i| i.get("$patch").is_none())
                        .cloned()
                        .collect();
                    t.insert(k.clone(), Value::Array(kept));
                }
            },
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

fn merge_list(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key);
        let position = id.and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (Some(i), false) => strategic_merge(&mut existing[i], item),
            (None, false) => existing.push(item.clone()),
            (None, true) => {}
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn repeated_keys_are_found_with_their_paths_and_the_last_value_kept() {
        let body = br#"{"spec": {"replicas": 1, "replicas": 3, "template": {"spec": {"containers": [{"name": "a", "name": "b"}]}}}, "kind": "Deployment"}"#;
        let (value, duplicates) = parse_with_duplicates(body).unwrap();
        assert_eq!(value["spec"]["replicas"], 3);
        assert_eq!(
            value["spec"]["template"]["spec"]["containers"][0]["name"],
            "b"
        );
        assert_eq!(
            duplicates,
            ["spec.replicas", "spec.template.spec.containers[0].name"]
        );
        let (_, none) = parse_with_duplicates(br#"{"a": [[{"b": 1}]], "c": {}}"#).unwrap();
        assert!(none.is_empty());
        let (yaml, _) = parse_with_duplicates(b"kind: ConfigMap\ndata: {a: b}\n").unwrap();
        assert_eq!(yaml["data"]["a"], "b");
    }

    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_sets_and_removes() {
        let current = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}});
        let out = apply_patch(
            PatchType::Merge,
            current,
            br#"{"metadata":{"labels":{"a":null,"c":"3"}}}"#,
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["spec"], json!({"x": 1}));
    }

    #[test]
    fn json_patch_accepts_kubes_null_test_on_a_missing_path() {
        let current = json!({"metadata": {"name": "a"}});
        let body = br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
        let out = apply_patch(PatchType::Json, current.clone(), body).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        // A failing test refuses the whole patch.
        let body = br#"[{"op":"test","path":"/metadata/name","value":"b"},{"op":"remove","path":"/metadata/name"}]"#;
        let err = apply_patch(PatchType::Json, current, body).unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn strategic_merge_merges_keyed_lists_and_drops_directives() {
        let current = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}});
        let patch = json!({
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "spec": {"containers": [{"name": "a", "image": "x:2"}, {"name": "b", "$patch": "delete"}]}
        });
        let out = apply_patch(PatchType::Strategic, current, patch.to_string().as_bytes()).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "x:2"}])
        );
        assert!(out.get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn unknown_patch_types_are_415() {
        assert_eq!(
            PatchType::from_content_type("text/plain").unwrap_err().code,
            415
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
    }
}
