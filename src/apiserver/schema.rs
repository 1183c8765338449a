//! A CRD's OpenAPI v3 schema applied to the objects written to it, in kube-apiserver's order:
//! unknown fields found (for `fieldValidation`) and pruned, defaults applied, then validation
//! answered with 422 and the path of every field that is wrong, CEL rules
//! (`x-kubernetes-validations`, [`super::cel`]) included.

use serde_json::{Map, Value};

use super::cel::Rule;
use super::status::FieldCause;

/// What `fieldValidation` asks for unknown and duplicate fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    /// The query parameter's value; absent means Warn, as in kube-apiserver.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, String> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(format!(
                "fieldValidation {other:?} is not supported; use Strict, Warn or Ignore"
            )),
        }
    }
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Removes the fields the schema does not declare; returns their paths.
pub fn prune(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_at(schema, value, "", true, &mut unknown);
    unknown
}

fn prune_at(schema: &Value, value: &mut Value, path: &str, root: bool, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
            let embedded = is_true(schema, "x-kubernetes-embedded-resource");
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    // apiVersion, kind and metadata are the server's to check at the root and
                    // in embedded resources.
                    let meta = (root || embedded)
                        && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
                    match props.get(&key) {
                        Some(sub) if !meta => prune_at(
                            sub,
                            map.get_mut(&key).expect("a key of the map"),
                            &join(path, &key),
                            false,
                            unknown,
                        ),
                        Some(_) => {}
                        None if meta || preserve => {}
                        None => {
                            map.remove(&key);
                            unknown.push(join(path, &key));
                        }
                    }
                }
            } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (key, v) in map.iter_mut() {
                    prune_at(extra, v, &join(path, key), false, unknown);
                }
            } else if !preserve
                && schema.get("type").and_then(Value::as_str) == Some("object")
                && !root
            {
                // An object without declared fields keeps nothing, unless it preserves them.
                for key in map.keys() {
                    unknown.push(join(path, key));
                }
                map.clear();
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_at(item_schema, item, &format!("{path}[{i}]"), false, unknown);
                }
            }
        }
        _ => {}
    }
}

/// Fills in the schema's defaults for missing fields, at every level.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, sub) in props {
                    if !map.contains_key(key)
                        && let Some(default) = sub.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                    if let Some(v) = map.get_mut(key) {
                        apply_defaults(sub, v);
                    }
                }
            } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for v in map.values_mut() {
                    apply_defaults(extra, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Checks a value against the schema; returns every problem with its field path. `old` is the
/// stored object on updates: transition rules (those naming `oldSelf`) run only where it has
/// a value to compare with.
pub fn validate(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    validate_at(schema, value, old, "", &mut causes);
    causes
}

fn invalid(causes: &mut Vec<FieldCause>, path: &str, value: &Value, message: String) {
    causes.push(FieldCause::invalid(
        path,
        format!("Invalid value: {}: {message}", shown(value)),
    ));
}

fn validate_at(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    if value.is_null() {
        if !is_true(schema, "nullable") && schema.get("type").is_some() && !path.is_empty() {
            let want = schema["type"].as_str().unwrap_or_default();
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type {want}: \"null\""),
            );
        }
        return;
    }
    let actual = type_name(value);
    if is_true(schema, "x-kubernetes-int-or-string") {
        if !matches!(actual, "integer" | "string") {
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type integer or string: {actual:?}"),
            );
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let fits = want == actual || (want == "number" && actual == "integer");
        if !fits {
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type {want}: {actual:?}"),
            );
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        causes.push(FieldCause::not_supported(
            path,
            shown(value),
            options.iter().map(shown),
        ));
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or_default();
            let format = schema.get("format").and_then(Value::as_str);
            let fits_format = match format {
                Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                Some("int64") => n.is_i64(),
                _ => true,
            };
            if !fits_format {
                let format = format.unwrap_or_default();
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body must be of type {format}: \"{n}\""),
                );
            }
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let exclusive = is_true(schema, "exclusiveMinimum");
                if x < min || (exclusive && x == min) {
                    let op = if exclusive {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    invalid(
                        causes,
                        path,
                        value,
                        format!("{path} in body should be {op} {min}"),
                    );
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let exclusive = is_true(schema, "exclusiveMaximum");
                if x > max || (exclusive && x == max) {
                    let op = if exclusive {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    invalid(
                        causes,
                        path,
                        value,
                        format!("{path} in body should be {op} {max}"),
                    );
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body should be at least {min} chars long"),
                );
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                causes.push(FieldCause {
                    reason: "FieldValueTooLong",
                    field: path.to_string(),
                    message: format!("Too long: may not be more than {max} bytes"),
                });
            }
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
                && let Some(re) = compiled(pattern)
                && !re.is_match(s)
            {
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                );
            }
            if schema.get("format").and_then(Value::as_str) == Some("date-time")
                && s.parse::<k8s_openapi::jiff::Timestamp>().is_err()
            {
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body must be of type date-time: {s:?}"),
                );
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                causes.push(FieldCause {
                    reason: "FieldValueTooMany",
                    field: path.to_string(),
                    message: format!("Too many: {n}: must have at most {max} items"),
                });
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|old| old_list_item(schema, old, item));
                    validate_at(item_schema, item, old_item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => validate_object(schema, map, value, old, path, causes),
        _ => {}
    }
    check_rules(schema, value, old, path, causes);
}

/// The stored item a new list item is compared with: the one with the same keys in a list
/// map; items of other lists have no identity to correlate by.
fn old_list_item<'a>(schema: &Value, old: &'a Value, item: &Value) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys = schema.get("x-kubernetes-list-map-keys")?.as_array()?;
    old.as_array()?.iter().find(|candidate| {
        keys.iter()
            .filter_map(Value::as_str)
            .all(|key| candidate.get(key) == item.get(key))
    })
}

/// Runs the node's CEL rules: a failure names the node (or the rule's `fieldPath` below it)
/// and shows the node's type, as kube-apiserver does.
fn check_rules(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    for rule in Rule::all(schema) {
        let Err(message) = rule.check(value, old) else {
            continue;
        };
        let field = match rule.field_path {
            Some(sub) => format!("{path}{}", sub),
            None => path.to_string(),
        };
        causes.push(match rule.reason() {
            "FieldValueForbidden" => FieldCause::forbidden(field, message),
            "FieldValueRequired" => FieldCause::required_because(field, message),
            "FieldValueDuplicate" => FieldCause::duplicate(field, message),
            _ => FieldCause::invalid(
                field,
                format!("Invalid value: {:?}: {message}", type_name(value)),
            ),
        });
    }
}

fn validate_object(
    schema: &Value,
    map: &Map<String, Value>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(field) {
                causes.push(FieldCause::required(join(path, field)));
            }
        }
    }
    let n = map.len() as u64;
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && n < min
    {
        invalid(
            causes,
            path,
            value,
            format!("{path} in body should have at least {min} properties"),
        );
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && n > max
    {
        invalid(
            causes,
            path,
            value,
            format!("{path} in body should have at most {max} properties"),
        );
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, v) in map {
            if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(sub) = props.get(key) {
                let old_v = old.and_then(|o| o.get(key));
                validate_at(sub, v, old_v, &join(path, key), causes);
            }
        }
    } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        for (key, v) in map {
            let old_v = old.and_then(|o| o.get(key));
            validate_at(extra, v, old_v, &join(path, key), causes);
        }
    }
}

/// Where a CRD schema breaks Kubernetes' structural-schema rules, which kube-apiserver enforces
/// before it serves a CRD: every node has a type (unless it is int-or-string or preserves
/// unknown fields), logical junctors carry no types, properties or defaults, there are no
/// `$ref`s, and `properties` and `additionalProperties` are not mixed.
pub fn structural_problems(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    structural_at(schema, "", &mut out);
    out
}

fn structural_at(schema: &Value, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    let Some(node) = schema.as_object() else {
        out.push(format!("{at}: not an object"));
        return;
    };
    let typed = node.contains_key("type")
        || is_true(schema, "x-kubernetes-int-or-string")
        || is_true(schema, "x-kubernetes-preserve-unknown-fields");
    if !typed {
        out.push(format!(
            "{at}: type: Required value: must not be empty for specified object fields"
        ));
    }
    if node.contains_key("$ref") {
        out.push(format!("{at}: $ref: Forbidden: $ref is not supported"));
    }
    if node.contains_key("properties")
        && node
            .get("additionalProperties")
            .is_some_and(Value::is_object)
    {
        out.push(format!(
            "{at}: additionalProperties and properties are mutually exclusive"
        ));
    }
    for junctor in ["allOf", "anyOf", "oneOf", "not"] {
        let branches = match node.get(junctor) {
            Some(Value::Array(b)) => b.clone(),
            Some(v) => vec![v.clone()],
            None => continue,
        };
        // The one exception: int-or-string fields may spell out their two types.
        let int_or_string = is_true(schema, "x-kubernetes-int-or-string");
        for b in branches {
            for forbidden in [
                "type",
                "properties",
                "additionalProperties",
                "items",
                "default",
                "description",
                "nullable",
            ] {
                if b.get(forbidden).is_some() && !(int_or_string && forbidden == "type") {
                    out.push(format!("{at}.{junctor}.{forbidden}: Forbidden: must not be specified in a logical junctor"));
                }
            }
        }
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            structural_at(v, &join(path, k), out);
        }
    }
    if let Some(extra) = node.get("additionalProperties").filter(|a| a.is_object()) {
        structural_at(extra, &format!("{path}.additionalProperties"), out);
    }
    if let Some(items) = node.get("items") {
        structural_at(items, &format!("{path}.items"), out);
    }
}

/// The schemas' `pattern`s, compiled once: a validation of every write compiled them anew, a
/// fiftieth of a busy management cluster's CPU. The patterns come from installed CRDs, so
/// they are few. None for a pattern that does not compile (it is not enforced).
fn compiled(pattern: &str) -> Option<regex::Regex> {
    static COMPILED: std::sync::LazyLock<
        std::sync::RwLock<std::collections::HashMap<String, Option<regex::Regex>>>,
    > = std::sync::LazyLock::new(Default::default);
    if let Some(re) = COMPILED.read().unwrap().get(pattern) {
        return re.clone();
    }
    let re = regex::Regex::new(pattern).ok();
    COMPILED
        .write()
        .unwrap()
        .insert(pattern.to_string(), re.clone());
    re
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 9, "default": 1},
                        "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Fast"},
                        "ports": {"type": "array", "maxItems": 2, "items": {"type": "integer"}},
                        "surge": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "after": {"type": "string", "format": "date-time"},
                        "port": {"type": "integer", "format": "int32"},
                        "args": {
                            "type": "array",
                            "maxItems": 10,
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "value": {"type": "string", "x-kubernetes-validations": [
                                    {"rule": "self == oldSelf", "message": "value is immutable"}
                                ]}
                            }},
                            "x-kubernetes-validations": [{
                                "rule": "self.all(x, self.exists_one(y, x.name == y.name))",
                                "message": "names must be unique"
                            }]
                        },
                        "strategy": {
                            "type": "object",
                            "default": {},
                            "properties": {"type": {"type": "string", "default": "RollingUpdate"}}
                        }
                    }
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
            }
        })
    }

    #[test]
    fn unknown_fields_are_pruned_except_where_preserved() {
        let mut v = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"name": "a", "bogus": 1, "labels": {"x": "y"}, "free": {"anything": {"goes": true}}},
            "extra": true
        });
        let unknown = prune(&schema(), &mut v);
        assert_eq!(unknown, ["extra", "spec.bogus"]);
        assert_eq!(v["spec"]["free"], json!({"anything": {"goes": true}}));
        assert_eq!(v["metadata"], json!({"name": "a"}));
    }

    #[test]
    fn defaults_fill_missing_fields_at_every_level() {
        let mut v = json!({"spec": {"name": "a", "mode": "Slow"}});
        apply_defaults(&schema(), &mut v);
        assert_eq!(v["spec"]["replicas"], 1);
        assert_eq!(v["spec"]["mode"], "Slow", "a value that is there stays");
        assert_eq!(v["spec"]["strategy"], json!({"type": "RollingUpdate"}));
    }

    #[test]
    fn non_structural_schemas_are_named() {
        assert!(structural_problems(&schema()).is_empty());
        let bad = json!({"type": "object", "properties": {
            "untyped": {"description": "no type"},
            "junctor": {"type": "string", "anyOf": [{"type": "integer"}]},
            "surge": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        }});
        let problems = structural_problems(&bad);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("junctor.anyOf.type"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("untyped: type: Required"),
            "{problems:?}"
        );
    }

    #[test]
    fn validation_table() {
        for (spec, field, fragment) in [
            (json!({}), "spec.name", "Required value"),
            (json!({"name": ""}), "spec.name", "at least 1 chars long"),
            (json!({"name": "abcdef"}), "spec.name", "Too long"),
            (json!({"name": "AB"}), "spec.name", "should match"),
            (
                json!({"name": "a", "replicas": "3"}),
                "spec.replicas",
                "must be of type integer",
            ),
            (
                json!({"name": "a", "replicas": 10}),
                "spec.replicas",
                "less than or equal to 9",
            ),
            (
                json!({"name": "a", "replicas": -1}),
                "spec.replicas",
                "greater than or equal to 0",
            ),
            (
                json!({"name": "a", "mode": "Medium"}),
                "spec.mode",
                "supported values: \"Fast\", \"Slow\"",
            ),
            (
                json!({"name": "a", "ports": [1, 2, 3]}),
                "spec.ports",
                "must have at most 2 items",
            ),
            (
                json!({"name": "a", "ports": ["x"]}),
                "spec.ports[0]",
                "must be of type integer",
            ),
            (
                json!({"name": "a", "surge": true}),
                "spec.surge",
                "integer or string",
            ),
            (
                json!({"name": "a", "labels": {"k": 1}}),
                "spec.labels.k",
                "must be of type string",
            ),
            (
                json!({"name": "a", "after": "yesterday"}),
                "spec.after",
                "date-time",
            ),
            (
                json!({"name": "a", "port": 4_294_967_296_i64}),
                "spec.port",
                "must be of type int32",
            ),
            (
                json!({"name": "a", "args": [{"name": "v", "value": "1"}, {"name": "v", "value": "2"}]}),
                "spec.args",
                "Invalid value: \"array\": names must be unique",
            ),
        ] {
            let causes = validate(&schema(), &json!({"spec": spec}), None);
            assert!(
                causes
                    .iter()
                    .any(|c| c.field == field && c.message.contains(fragment)),
                "{spec}: expected {field}: {fragment}, got {causes:?}"
            );
        }
        let ok = json!({"spec": {"name": "ab", "replicas": 3, "surge": "25%", "ports": [80], "after": "2024-05-01T10:00:00Z", "port": -2_147_483_648_i64}});
        assert!(validate(&schema(), &ok, None).is_empty());
    }

    #[test]
    fn transition_rules_compare_with_the_stored_item_of_the_same_key() {
        let old = json!({"spec": {"name": "a", "args": [{"name": "v", "value": "1"}]}});
        let changed = json!({"spec": {"name": "a", "args": [{"name": "w", "value": "9"}, {"name": "v", "value": "2"}]}});
        let causes = validate(&schema(), &changed, Some(&old));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.args[1].value");
        assert!(causes[0].message.contains("value is immutable"));
        // On create, and for an item new in the list, there is nothing to compare with.
        assert!(validate(&schema(), &changed, None).is_empty());
    }
}
