//! The conversion rules' machinery: paths into JSON objects (and into their OpenAPI schemas),
//! values moved between them and changed on the way, and the restoring of what one version
//! cannot hold from the other version's copy in `conversion-data`.

use serde_json::{Map, Value, json};

use super::ConversionError;

/// How a value changes between its v1beta1 place and its v1beta2 place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// The same value.
    Same,
    /// A Go duration (`"1m30s"`, `metav1.Duration`) in v1beta1, whole seconds in v1beta2.
    Seconds,
    /// A `corev1.ObjectReference` in v1beta1, `{apiGroup, kind, name}` in v1beta2 (the
    /// contract-versioned reference: its version is the contract's, read from the CRD).
    ContractRef,
    /// A `corev1.ObjectReference` in v1beta1, `{apiVersion, kind, name}` in v1beta2.
    TemplateRef,
    /// A `corev1.ObjectReference` to a Node in v1beta1, `{name}` in v1beta2.
    NodeRef,
    /// A map by name in v1beta1, a list of entries with a `name` in v1beta2 (failure domains).
    NamedMap,
    /// A map of flag to value in v1beta1, a list of `{name, value}` in v1beta2 (`extraArgs`).
    Args,
    /// A bool whose v1beta1 zero value (`false`) means "not said": v1beta2 keeps only `true`.
    TrueOnly,
    /// A v1beta1 field v1beta2 dropped; its v1beta1 schema is given.
    OldOnly(&'static str),
    /// A v1beta2 field v1beta1 never had.
    NewOnly,
}

/// One field's place in each version. Paths are dotted, `[]` stepping into a list's items and
/// `{}` into a map's values; both sides go through the same lists and maps.
#[derive(Clone, Debug)]
pub struct Rule {
    pub old: String,
    pub new: String,
    pub how: How,
    /// Going up, the value is also written here (`timeoutForControlPlane` feeds the init and
    /// the join timeouts); going down it is dropped, the first place speaking for both.
    pub copy: bool,
}

impl Rule {
    pub fn new(old: &str, new: &str, how: How) -> Rule {
        Rule {
            old: old.into(),
            new: new.into(),
            how,
            copy: false,
        }
    }

    /// This rule for objects found under `old` in v1beta1 and `new` in v1beta2.
    pub fn under(&self, old: &str, new: &str) -> Rule {
        let join = |prefix: &str, path: &str| match (prefix.is_empty(), path.is_empty()) {
            (_, true) => String::new(),
            (true, false) => path.to_string(),
            (false, false) => format!("{prefix}.{path}"),
        };
        Rule {
            old: join(old, &self.old),
            new: join(new, &self.new),
            how: self.how,
            copy: self.copy,
        }
    }
}

/// Which way a conversion goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// v1beta1 to v1beta2.
    Up,
    /// v1beta2 to v1beta1.
    Down,
}

/// What a value's change needs from the object around it.
pub struct Context<'a> {
    pub namespace: &'a str,
    pub api_version: &'a dyn Fn(&str, &str) -> String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg<'a> {
    Field(&'a str),
    Items,
    Values,
}

#[derive(Clone, Debug)]
enum Key {
    Index(usize),
    Name(String),
}

/// The values found at a place, each with the list indexes and map keys it was under.
type Found = Vec<(Vec<Key>, Value)>;

fn segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, suffixes) = match part.find(['[', '{']) {
            Some(at) => part.split_at(at),
            None => (part, ""),
        };
        out.push(Seg::Field(name));
        let mut rest = suffixes;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("[]") {
                out.push(Seg::Items);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("{}") {
                out.push(Seg::Values);
                rest = r;
            } else {
                panic!("bad conversion path {path:?}");
            }
        }
    }
    out
}

/// A place as a key: its segments written out.
fn render(segs: &[Seg<'_>]) -> String {
    segs.iter()
        .map(|seg| match seg {
            Seg::Field(f) => format!(".{f}"),
            Seg::Items => "[]".into(),
            Seg::Values => "{}".into(),
        })
        .collect()
}

/// Removes the empty objects on the way to `segs` (not its end) whose place `kept` says the
/// other version lacks; `depth` is the index of `segs[0]` in the whole path.
fn drop_empty(node: &mut Value, segs: &[Seg<'_>], depth: usize, kept: &dyn Fn(usize) -> bool) {
    let Some((first, rest)) = segs.split_first() else {
        return;
    };
    if rest.is_empty() {
        return;
    }
    match first {
        Seg::Field(field) => {
            let Some(object) = node.as_object_mut() else {
                return;
            };
            let Some(child) = object.get_mut(*field) else {
                return;
            };
            drop_empty(child, rest, depth + 1, kept);
            if child.as_object().is_some_and(Map::is_empty) && !kept(depth) {
                object.remove(*field);
            }
        }
        Seg::Items => {
            for item in node.as_array_mut().into_iter().flatten() {
                drop_empty(item, rest, depth + 1, kept);
            }
        }
        Seg::Values => {
            for value in node.as_object_mut().into_iter().flatten().map(|(_, v)| v) {
                drop_empty(value, rest, depth + 1, kept);
            }
        }
    }
}

/// Removes every value at `segs`, with the list indexes and map keys it was found under.
/// An object left empty by a removal goes too (not a list's item).
fn take(node: &mut Value, segs: &[Seg<'_>], keys: &mut Vec<Key>, out: &mut Found) {
    let Some((first, rest)) = segs.split_first() else {
        return;
    };
    match first {
        Seg::Field(field) => {
            let Some(object) = node.as_object_mut() else {
                return;
            };
            if rest.is_empty() {
                if let Some(value) = object.remove(*field) {
                    out.push((keys.clone(), value));
                }
                return;
            }
            let Some(child) = object.get_mut(*field) else {
                return;
            };
            let before = out.len();
            take(child, rest, keys, out);
            if out.len() > before && child.as_object().is_some_and(Map::is_empty) {
                object.remove(*field);
            }
        }
        Seg::Items => {
            for (i, item) in node.as_array_mut().into_iter().flatten().enumerate() {
                keys.push(Key::Index(i));
                take(item, rest, keys, out);
                keys.pop();
            }
        }
        Seg::Values => {
            for (name, value) in node.as_object_mut().into_iter().flatten() {
                keys.push(Key::Name(name.clone()));
                take(value, rest, keys, out);
                keys.pop();
            }
        }
    }
}

/// The values at `segs`, left in place.
fn read(node: &Value, segs: &[Seg<'_>], keys: &mut Vec<Key>, out: &mut Found) {
    let Some((first, rest)) = segs.split_first() else {
        out.push((keys.clone(), node.clone()));
        return;
    };
    match first {
        Seg::Field(field) => {
            if let Some(child) = node.get(*field) {
                read(child, rest, keys, out);
            }
        }
        Seg::Items => {
            for (i, item) in node.as_array().into_iter().flatten().enumerate() {
                keys.push(Key::Index(i));
                read(item, rest, keys, out);
                keys.pop();
            }
        }
        Seg::Values => {
            for (name, value) in node.as_object().into_iter().flatten() {
                keys.push(Key::Name(name.clone()));
                read(value, rest, keys, out);
                keys.pop();
            }
        }
    }
}

/// Writes `value` at `segs`, through the list items and map entries `keys` name, making the
/// objects on the way; an object already there takes the value's fields.
fn put(node: &mut Value, segs: &[Seg<'_>], keys: &[Key], value: Value) {
    let Some((first, rest)) = segs.split_first() else {
        match (node, value) {
            (Value::Object(there), Value::Object(fields)) => there.extend(fields),
            (node, value) => *node = value,
        }
        return;
    };
    match first {
        Seg::Field(field) => {
            if !node.is_object() {
                *node = json!({});
            }
            let object = node.as_object_mut().expect("an object");
            let child = object.entry(field.to_string()).or_insert(Value::Null);
            if child.is_null() && !rest.is_empty() {
                *child = json!({});
            }
            put(child, rest, keys, value);
        }
        Seg::Items => {
            let Some((Key::Index(i), keys)) = keys.split_first() else {
                return;
            };
            if let Some(item) = node.as_array_mut().and_then(|items| items.get_mut(*i)) {
                put(item, rest, keys, value);
            }
        }
        Seg::Values => {
            let Some((Key::Name(name), keys)) = keys.split_first() else {
                return;
            };
            if let Some(object) = node.as_object_mut() {
                let child = object.entry(name.clone()).or_insert_with(|| json!({}));
                put(child, rest, keys, value);
            }
        }
    }
}

/// Applies `rules` to `object` going `direction`: every value taken from its place in the
/// source version (deepest places first, so a field moved on its own leaves its parent before
/// the parent moves), changed, then written at its place in the target version (shallowest
/// first, so a parent lands before a field merged into it). Fields no rule names stay.
pub fn apply(
    rules: &[Rule],
    object: &mut Value,
    direction: Direction,
    context: &Context<'_>,
) -> Result<(), ConversionError> {
    fn from(r: &Rule, direction: Direction) -> &str {
        match direction {
            Direction::Up => &r.old,
            Direction::Down => &r.new,
        }
    }
    fn to(r: &Rule, direction: Direction) -> &str {
        match direction {
            Direction::Up => &r.new,
            Direction::Down => &r.old,
        }
    }
    let from = |r| from(r, direction);
    let to = |r| to(r, direction);
    // An object a source place goes through that the target version does not have at all
    // goes too when nothing is left in it (`deletion: {}` has no v1beta1 place).
    let mut target_places = std::collections::HashSet::new();
    for rule in rules {
        let segs = segments(to(rule));
        for end in 1..=segs.len() {
            target_places.insert(render(&segs[..end]));
        }
    }
    for rule in rules {
        let segs = segments(from(rule));
        drop_empty(object, &segs, 0, &|depth| {
            target_places.contains(&render(&segs[..=depth]))
        });
    }
    // A copied value is read before its first place gives it up.
    let mut taken: Vec<(&Rule, Found)> = Vec::new();
    if direction == Direction::Up {
        for rule in rules.iter().filter(|r| r.copy) {
            let mut found = Vec::new();
            read(object, &segments(&rule.old), &mut Vec::new(), &mut found);
            taken.push((rule, found));
        }
    }
    let mut order: Vec<&Rule> = rules
        .iter()
        .filter(|r| !(r.copy && direction == Direction::Up))
        .filter(|r| !from(r).is_empty())
        .collect();
    // Each path parsed once for the sort, not once per comparison.
    order.sort_by_cached_key(|r| std::cmp::Reverse(segments(from(r)).len()));
    for rule in order {
        let mut found = Vec::new();
        take(object, &segments(from(rule)), &mut Vec::new(), &mut found);
        if !(rule.copy && direction == Direction::Down) {
            taken.push((rule, found));
        }
    }
    taken.sort_by_cached_key(|(r, _)| segments(to(r)).len());
    for (rule, found) in taken {
        let target = to(rule);
        if target.is_empty() {
            continue;
        }
        let segs = segments(target);
        for (keys, value) in found {
            let path = || from(rule).to_string();
            if let Some(changed) = change(rule.how, direction, value, context, &path)? {
                put(object, &segs, &keys, changed);
            }
        }
    }
    Ok(())
}

/// One value's change going `direction`; `None` when the target version has no place for it.
fn change(
    how: How,
    direction: Direction,
    value: Value,
    context: &Context<'_>,
    path: &dyn Fn() -> String,
) -> Result<Option<Value>, ConversionError> {
    let invalid = |message: String| ConversionError::Field {
        path: path(),
        message,
    };
    Ok(match (how, direction) {
        (How::Same, _) => Some(value),
        (How::Seconds, Direction::Up) => match &value {
            Value::String(text) => {
                let seconds = crate::api::parse_duration(text).ok_or_else(|| {
                    invalid(format!(
                        "{text:?} is not a duration (write it as Go does: 90s, 1m30s, 1h)"
                    ))
                })?;
                Some(json!(
                    seconds.trunc().clamp(i32::MIN as f64, i32::MAX as f64) as i64
                ))
            }
            Value::Number(_) => Some(value),
            _ => return Err(invalid("must be a duration such as 1m30s".into())),
        },
        (How::Seconds, Direction::Down) => match value.as_i64() {
            Some(seconds) => Some(json!(go_duration(seconds))),
            None => return Err(invalid("must be a whole number of seconds".into())),
        },
        (How::ContractRef, Direction::Up) => {
            let group = value["apiVersion"]
                .as_str()
                .map(|v| v.rsplit_once('/').map_or("", |(g, _)| g).to_string());
            let mut reference = Map::new();
            if let Some(group) = group {
                reference.insert("apiGroup".into(), json!(group));
            }
            copy_fields(&value, &mut reference, &["kind", "name"]);
            Some(Value::Object(reference))
        }
        (How::ContractRef, Direction::Down) => {
            let mut reference = Map::new();
            let group = value["apiGroup"].as_str().unwrap_or_default();
            let kind = value["kind"].as_str().unwrap_or_default();
            if value.get("apiGroup").is_some() || value.get("kind").is_some() {
                reference.insert(
                    "apiVersion".into(),
                    json!((context.api_version)(group, kind)),
                );
            }
            copy_fields(&value, &mut reference, &["kind", "name"]);
            with_namespace(&mut reference, context);
            Some(Value::Object(reference))
        }
        (How::TemplateRef, Direction::Up) => {
            let mut reference = Map::new();
            copy_fields(&value, &mut reference, &["apiVersion", "kind", "name"]);
            Some(Value::Object(reference))
        }
        (How::TemplateRef, Direction::Down) => {
            let mut reference = Map::new();
            copy_fields(&value, &mut reference, &["apiVersion", "kind", "name"]);
            with_namespace(&mut reference, context);
            Some(Value::Object(reference))
        }
        (How::NodeRef, Direction::Up) => {
            let mut reference = Map::new();
            copy_fields(&value, &mut reference, &["name"]);
            Some(Value::Object(reference))
        }
        (How::NodeRef, Direction::Down) => {
            let mut reference = Map::new();
            reference.insert("apiVersion".into(), json!("v1"));
            reference.insert("kind".into(), json!("Node"));
            copy_fields(&value, &mut reference, &["name"]);
            Some(Value::Object(reference))
        }
        (How::NamedMap, Direction::Up) => {
            let Value::Object(entries) = value else {
                return Err(invalid("must be a map by name".into()));
            };
            let mut names: Vec<&String> = entries.keys().collect();
            names.sort();
            let list = names
                .into_iter()
                .map(|name| {
                    let mut entry = Map::new();
                    entry.insert("name".into(), json!(name));
                    if let Some(fields) = entries[name].as_object() {
                        entry.extend(fields.clone());
                    }
                    Value::Object(entry)
                })
                .collect();
            Some(Value::Array(list))
        }
        (How::NamedMap, Direction::Down) => {
            let Value::Array(list) = value else {
                return Err(invalid("must be a list".into()));
            };
            let mut entries = Map::new();
            for mut entry in list {
                let name = entry
                    .as_object_mut()
                    .and_then(|e| e.remove("name"))
                    .and_then(|n| n.as_str().map(String::from))
                    .unwrap_or_default();
                entries.insert(name, entry);
            }
            Some(Value::Object(entries))
        }
        (How::Args, Direction::Up) => {
            let Value::Object(flags) = value else {
                return Err(invalid("must be a map of flag to value".into()));
            };
            let mut names: Vec<&String> = flags.keys().collect();
            names.sort();
            let list = names
                .into_iter()
                .map(|name| json!({"name": name, "value": flags[name]}))
                .collect();
            Some(Value::Array(list))
        }
        (How::Args, Direction::Down) => {
            let Value::Array(list) = value else {
                return Err(invalid("must be a list of name and value".into()));
            };
            let flags: Map<String, Value> = list
                .into_iter()
                .map(|arg| {
                    let name = arg["name"].as_str().unwrap_or_default().to_string();
                    (name, arg["value"].clone())
                })
                .collect();
            Some(Value::Object(flags))
        }
        (How::TrueOnly, Direction::Up) => (value == json!(true)).then_some(value),
        (How::TrueOnly, Direction::Down) => Some(value),
        (How::OldOnly(_), Direction::Up) | (How::NewOnly, Direction::Down) => None,
        (How::OldOnly(_), Direction::Down) | (How::NewOnly, Direction::Up) => Some(value),
    })
}

fn copy_fields(from: &Value, to: &mut Map<String, Value>, fields: &[&str]) {
    for field in fields {
        if let Some(value) = from.get(*field) {
            to.insert(field.to_string(), value.clone());
        }
    }
}

/// A v1beta1 reference names its object's namespace, which is always the referrer's.
fn with_namespace(reference: &mut Map<String, Value>, context: &Context<'_>) {
    if !context.namespace.is_empty() {
        reference.insert("namespace".into(), json!(context.namespace));
    }
}

/// Seconds as Go's `time.Duration.String()` writes them (`90` is `1m30s`, `3600` is `1h0m0s`).
pub fn go_duration(seconds: i64) -> String {
    if seconds == 0 {
        return "0s".into();
    }
    let sign = if seconds < 0 { "-" } else { "" };
    let total = seconds.unsigned_abs();
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, _) => format!("{sign}{m}m{s}s"),
        _ => format!("{sign}{h}h{m}m{s}s"),
    }
}

/// The v1beta1 schema: the v1beta2 one with every rule's field moved back to its v1beta1
/// place and changed to its v1beta1 type. CEL rules are left out: they are written against
/// v1beta2's fields, and the object is checked against them after converting.
pub fn old_schema(rules: &[Rule], new_schema: &Value) -> Value {
    let mut schema = new_schema.clone();
    let mut moved: Vec<(&Rule, Option<Value>)> = Vec::new();
    let mut order: Vec<&Rule> = rules.iter().filter(|r| !r.copy).collect();
    order.sort_by_key(|r| std::cmp::Reverse(segments(&r.new).len()));
    for rule in order {
        let node = if rule.new.is_empty() {
            None
        } else {
            take_schema(&mut schema, &segments(&rule.new))
        };
        moved.push((rule, node));
    }
    moved.sort_by_key(|(r, _)| segments(&r.old).len());
    for (rule, node) in moved {
        if rule.old.is_empty() {
            continue;
        }
        let description = node.as_ref().and_then(|n| n.get("description")).cloned();
        // A field this kind's v1beta2 schema lacks has no v1beta1 place either (the rules of
        // a spec are shared by kinds that hold only part of it).
        if node.is_none() && !matches!(rule.how, How::OldOnly(_)) {
            continue;
        }
        let mut old = match rule.how {
            How::Same | How::TrueOnly => node.expect("checked above"),
            // kube-apiserver checks the format as Go's time.ParseDuration reads it.
            How::Seconds => json!({"type": "string", "format": "duration"}),
            How::ContractRef | How::TemplateRef | How::NodeRef => object_reference(),
            How::NamedMap => {
                let mut entry = node
                    .as_ref()
                    .map(|n| n["items"].clone())
                    .unwrap_or_else(|| json!({"type": "object"}));
                if let Some(properties) = entry["properties"].as_object_mut() {
                    properties.remove("name");
                }
                if let Some(required) = entry["required"].as_array_mut() {
                    required.retain(|r| r != "name");
                }
                json!({"type": "object", "additionalProperties": entry})
            }
            How::Args => json!({"type": "object", "additionalProperties": {"type": "string"}}),
            How::OldOnly(schema) => serde_json::from_str(schema).expect("a JSON schema"),
            How::NewOnly => continue,
        };
        if let (Some(description), Some(fields)) = (description, old.as_object_mut()) {
            fields.entry("description").or_insert(description);
        }
        put_schema(&mut schema, &segments(&rule.old), old);
    }
    strip_validations(&mut schema);
    schema
}

/// The schema of the field at `segs`, removed with its `required` entry; a parent left with
/// no properties goes too.
fn take_schema(schema: &mut Value, segs: &[Seg<'_>]) -> Option<Value> {
    let (first, rest) = segs.split_first()?;
    match first {
        Seg::Field(field) => {
            if rest.is_empty() {
                if let Some(required) = schema["required"].as_array_mut() {
                    required.retain(|r| r != field);
                }
                return schema["properties"].as_object_mut()?.remove(*field);
            }
            let child = schema["properties"].get_mut(*field)?;
            let taken = take_schema(child, rest);
            let emptied = child["properties"].as_object().is_some_and(Map::is_empty)
                && child.get("additionalProperties").is_none();
            if taken.is_some() && emptied {
                schema["properties"].as_object_mut()?.remove(*field);
                if let Some(required) = schema["required"].as_array_mut() {
                    required.retain(|r| r != field);
                }
            }
            taken
        }
        Seg::Items => take_schema(schema.get_mut("items")?, rest),
        Seg::Values => take_schema(schema.get_mut("additionalProperties")?, rest),
    }
}

fn put_schema(schema: &mut Value, segs: &[Seg<'_>], node: Value) {
    let Some((first, rest)) = segs.split_first() else {
        *schema = node;
        return;
    };
    match first {
        Seg::Field(field) => {
            if schema.get("type").is_none() {
                schema["type"] = json!("object");
            }
            if !schema["properties"].is_object() {
                schema["properties"] = json!({});
            }
            let child = schema["properties"]
                .as_object_mut()
                .expect("properties")
                .entry(field.to_string())
                .or_insert_with(|| json!({"type": "object"}));
            put_schema(child, rest, node);
        }
        Seg::Items => put_schema(&mut schema["items"], rest, node),
        Seg::Values => put_schema(&mut schema["additionalProperties"], rest, node),
    }
}

fn strip_validations(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            fields.remove("x-kubernetes-validations");
            if let Some(Value::Array(required)) = fields.get("required").cloned() {
                let known = |r: &Value| {
                    r.as_str()
                        .is_some_and(|r| fields["properties"].get(r).is_some())
                };
                let kept: Vec<Value> = required.into_iter().filter(known).collect();
                if kept.is_empty() {
                    fields.remove("required");
                } else {
                    fields.insert("required".into(), Value::Array(kept));
                }
            }
            for (key, value) in fields.iter_mut() {
                // Example values and defaults are data, not schema.
                if key != "default" && key != "example" && key != "enum" {
                    strip_validations(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_validations),
        _ => {}
    }
}

/// `corev1.ObjectReference`'s schema, as upstream's v1beta1 CRDs carry it.
fn object_reference() -> Value {
    let string = || json!({"type": "string"});
    json!({
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "apiVersion": string(), "fieldPath": string(), "kind": string(), "name": string(),
            "namespace": string(), "resourceVersion": string(), "uid": string(),
        },
    })
}

/// A v1beta1 JSON path (as printer columns use) for a v1beta2 one: the rule whose v1beta2
/// place is the longest prefix of it names where it lives in v1beta1.
pub fn old_path(rules: &[Rule], new_path: &str) -> String {
    let dotted = new_path.trim_start_matches('.');
    let best = rules
        .iter()
        .filter(|r| !r.new.is_empty() && !r.old.is_empty() && !r.new.contains(['[', '{']))
        .filter(|r| matches!(r.how, How::Same | How::TrueOnly))
        .filter(|r| {
            dotted == r.new
                || dotted.starts_with(&format!("{}.", r.new))
                || dotted.starts_with(&format!("{}[", r.new))
        })
        .max_by_key(|r| r.new.len());
    match best {
        Some(rule) => format!(".{}{}", rule.old, &dotted[rule.new.len()..]),
        None => new_path.to_string(),
    }
}

/// Every place two values differ, as paths of object keys and list indexes, with each side's
/// value there (`None` where a side has nothing). Lists of different lengths differ as wholes.
pub fn differences(a: &Value, b: &Value) -> Vec<(Vec<PathKey>, Option<Value>, Option<Value>)> {
    let mut out = Vec::new();
    diff_into(Some(a), Some(b), &mut Vec::new(), &mut out);
    out
}

/// A step into a JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathKey {
    Field(String),
    Index(usize),
}

#[allow(clippy::type_complexity)]
fn diff_into(
    a: Option<&Value>,
    b: Option<&Value>,
    path: &mut Vec<PathKey>,
    out: &mut Vec<(Vec<PathKey>, Option<Value>, Option<Value>)>,
) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                path.push(PathKey::Field(key.clone()));
                diff_into(x.get(key), y.get(key), path, out);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                path.push(PathKey::Index(i));
                diff_into(Some(p), Some(q), path, out);
                path.pop();
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push((path.clone(), a.cloned(), b.cloned())),
    }
}

/// The value at `path`, if any.
pub fn get<'a>(value: &'a Value, path: &[PathKey]) -> Option<&'a Value> {
    path.iter().try_fold(value, |node, key| match key {
        PathKey::Field(f) => node.as_object()?.get(f),
        PathKey::Index(i) => node.as_array()?.get(*i),
    })
}

/// Sets (or with `None`, removes) the value at `path`, making objects on the way.
pub fn set(value: &mut Value, path: &[PathKey], to: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        if let Some(to) = to {
            *value = to;
        }
        return;
    };
    let mut node = value;
    for key in parents {
        node = match key {
            PathKey::Field(f) => {
                if !node.is_object() {
                    if to.is_none() {
                        return;
                    }
                    *node = json!({});
                }
                node.as_object_mut()
                    .expect("an object")
                    .entry(f.clone())
                    .or_insert(Value::Null)
            }
            PathKey::Index(i) => match node.as_array_mut().and_then(|a| a.get_mut(*i)) {
                Some(item) => item,
                None => return,
            },
        };
    }
    match (last, to) {
        (PathKey::Field(f), Some(to)) => {
            if !node.is_object() {
                *node = json!({});
            }
            node.as_object_mut()
                .expect("an object")
                .insert(f.clone(), to);
        }
        (PathKey::Field(f), None) => {
            if let Some(object) = node.as_object_mut() {
                object.remove(f);
            }
        }
        (PathKey::Index(i), Some(to)) => {
            if let Some(item) = node.as_array_mut().and_then(|a| a.get_mut(*i)) {
                *item = to;
            }
        }
        (PathKey::Index(i), None) => {
            if let Some(items) = node.as_array_mut()
                && *i < items.len()
            {
                items.remove(*i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context<'static> {
        Context {
            namespace: "ns",
            api_version: &|group, _| format!("{group}/v1beta2"),
        }
    }

    #[test]
    fn durations_read_and_write_as_go_does() {
        for (seconds, text) in [
            (0, "0s"),
            (5, "5s"),
            (90, "1m30s"),
            (3600, "1h0m0s"),
            (3725, "1h2m5s"),
        ] {
            assert_eq!(go_duration(seconds), text);
        }
    }

    #[test]
    fn moves_and_swaps_happen_at_once() {
        let rules = vec![
            Rule::new(
                "status.conditions",
                "status.deprecated.v1beta1.conditions",
                How::Same,
            ),
            Rule::new("status.v1beta2.conditions", "status.conditions", How::Same),
            Rule::new(
                "spec.strategy.rollingUpdate.deletePolicy",
                "spec.deletion.order",
                How::Same,
            ),
            Rule::new("spec.strategy", "spec.rollout.strategy", How::Same),
            Rule::new(
                "spec.items[].timeout",
                "spec.items[].timeoutSeconds",
                How::Seconds,
            ),
        ];
        let old = json!({
            "spec": {
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"deletePolicy": "Oldest", "maxSurge": 1}},
                "items": [{"timeout": "1m30s"}, {"other": 1}],
            },
            "status": {"conditions": [{"type": "Ready"}], "v1beta2": {"conditions": [{"type": "Available"}]}},
        });
        let mut new = old.clone();
        apply(&rules, &mut new, Direction::Up, &context()).unwrap();
        assert_eq!(
            new,
            json!({
                "spec": {
                    "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                    "deletion": {"order": "Oldest"},
                    "items": [{"timeoutSeconds": 90}, {"other": 1}],
                },
                "status": {"conditions": [{"type": "Available"}], "deprecated": {"v1beta1": {"conditions": [{"type": "Ready"}]}}},
            })
        );
        apply(&rules, &mut new, Direction::Down, &context()).unwrap();
        assert_eq!(new, old);
    }

    #[test]
    fn a_bad_duration_names_its_field() {
        let rules = vec![Rule::new(
            "spec.nodeDrainTimeout",
            "spec.deletion.nodeDrainTimeoutSeconds",
            How::Seconds,
        )];
        let mut object = json!({"spec": {"nodeDrainTimeout": "soon"}});
        let error = apply(&rules, &mut object, Direction::Up, &context()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "spec.nodeDrainTimeout: \"soon\" is not a duration (write it as Go does: 90s, 1m30s, 1h)"
        );
    }

    #[test]
    fn references_maps_and_flags_change_shape() {
        let rules = vec![
            Rule::new(
                "spec.infrastructureRef",
                "spec.infrastructureRef",
                How::ContractRef,
            ),
            Rule::new(
                "status.failureDomains",
                "status.failureDomains",
                How::NamedMap,
            ),
            Rule::new("spec.extraArgs", "spec.extraArgs", How::Args),
        ];
        let mut object = json!({
            "spec": {
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerCluster", "name": "a", "namespace": "ns"},
                "extraArgs": {"v": "2", "alsologtostderr": "true"},
            },
            "status": {"failureDomains": {"b": {"controlPlane": true}, "a": {}}},
        });
        apply(&rules, &mut object, Direction::Up, &context()).unwrap();
        assert_eq!(
            object,
            json!({
                "spec": {
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "a"},
                    "extraArgs": [{"name": "alsologtostderr", "value": "true"}, {"name": "v", "value": "2"}],
                },
                "status": {"failureDomains": [{"name": "a"}, {"name": "b", "controlPlane": true}]},
            })
        );
        apply(&rules, &mut object, Direction::Down, &context()).unwrap();
        assert_eq!(
            object["spec"]["infrastructureRef"],
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "name": "a", "namespace": "ns"})
        );
        assert_eq!(
            object["status"]["failureDomains"],
            json!({"a": {}, "b": {"controlPlane": true}})
        );
        assert_eq!(
            object["spec"]["extraArgs"],
            json!({"alsologtostderr": "true", "v": "2"})
        );
    }

    #[test]
    fn a_v1beta2_json_path_maps_to_its_v1beta1_place() {
        let rules = vec![
            Rule::new(
                "spec.topology.class",
                "spec.topology.classRef.name",
                How::Same,
            ),
            Rule::new("status.v1beta2.conditions", "status.conditions", How::Same),
        ];
        assert_eq!(
            old_path(&rules, ".spec.topology.classRef.name"),
            ".spec.topology.class"
        );
        assert_eq!(
            old_path(
                &rules,
                ".status.conditions[?(@.type==\"Available\")].status"
            ),
            ".status.v1beta2.conditions[?(@.type==\"Available\")].status"
        );
        assert_eq!(old_path(&rules, ".status.phase"), ".status.phase");
    }
}
