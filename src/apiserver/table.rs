//! `Accept: application/json;as=Table`: the rows `kubectl get` prints, with a CRD's printer
//! columns evaluated by the server as kube-apiserver does.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::registry::{Cell, Column, Resource};

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `.a['b.c']`, `.a[0]`, and
/// filters `.a[?(@.type=="Ready")].status`. Returns every match.
pub fn json_path<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut current = vec![object];
    let mut rest = path.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let field = &after[..end];
            current = current.iter().filter_map(|v| v.get(field)).collect();
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = find_closing_bracket(after) else {
                return Vec::new();
            };
            let inner = &after[..end];
            rest = &after[end + 1..];
            current = step(current, inner);
        } else {
            return Vec::new();
        }
    }
    current.into_iter().filter(|v| !v.is_null()).collect()
}

fn find_closing_bracket(text: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

fn step<'a>(current: Vec<&'a Value>, inner: &str) -> Vec<&'a Value> {
    let inner = inner.trim();
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        let Some((field, want)) = filter.split_once("==") else {
            return Vec::new();
        };
        let field = field.trim().trim_start_matches('@').trim_start_matches('.');
        let want = want.trim().trim_matches(['"', '\'']);
        return current
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter(|item| match item.get(field) {
                Some(Value::String(s)) => s == want,
                Some(other) => *other == want,
                None => false,
            })
            .collect();
    }
    if inner == "*" {
        return current
            .into_iter()
            .flat_map(|v| match v {
                Value::Array(a) => a.iter().collect::<Vec<_>>(),
                Value::Object(o) => o.values().collect(),
                _ => Vec::new(),
            })
            .collect();
    }
    if let Ok(index) = inner.parse::<usize>() {
        return current.into_iter().filter_map(|v| v.get(index)).collect();
    }
    // ['a.b'] with escaped dots as kubectl writes them.
    let key = inner.trim_matches(['"', '\'']).replace("\\.", ".");
    current
        .into_iter()
        .filter_map(|v| v.get(key.as_str()))
        .collect()
}

/// Kubernetes' human-readable duration (`HumanDuration`): 45s, 5m3s, 3h4m, 5d, 2y…
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        return if s % 60 == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{}s", s % 60)
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = s / 3600;
    if hours < 8 {
        return if minutes % 60 == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{}m", minutes % 60)
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return if hours % 24 == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, hours % 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    let years = hours / 24 / 365;
    let days = (hours / 24) % 365;
    if hours < 24 * 365 * 8 && days != 0 {
        format!("{years}y{days}d")
    } else {
        format!("{years}y")
    }
}

fn age(object: &Value, path: &str, now: Timestamp) -> Value {
    match json_path(object, path)
        .first()
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse::<Timestamp>().ok())
    {
        Some(t) => Value::String(human_duration(now.as_second() - t.as_second())),
        None => Value::String("<unknown>".into()),
    }
}

fn cell(column: &Column, object: &Value, now: Timestamp) -> Value {
    match &column.cell {
        Cell::Path(path) => match json_path(object, path).first() {
            Some(v) if column.type_ == "date" => {
                match v.as_str().and_then(|s| s.parse::<Timestamp>().ok()) {
                    Some(t) => Value::String(human_duration(now.as_second() - t.as_second())),
                    None => (*v).clone(),
                }
            }
            Some(v) => (*v).clone(),
            None => Value::Null,
        },
        Cell::Age(path) => age(object, path, now),
        Cell::Count(path) => {
            let n = json_path(object, path).first().map_or(0, |v| match v {
                Value::Object(o) => o.len(),
                Value::Array(a) => a.len(),
                _ => 0,
            });
            json!(n)
        }
        Cell::Computed(f) => f(object),
    }
}

/// What a row carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(value: Option<&str>) -> IncludeObject {
        match value {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

fn row(columns: &[Column], object: &Value, include: IncludeObject, now: Timestamp) -> Value {
    let cells: Vec<Value> = columns.iter().map(|c| cell(c, object, now)).collect();
    let mut row = json!({ "cells": cells });
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = object.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object["metadata"],
            });
        }
    }
    row
}

/// A Table of objects of one resource.
pub fn table(
    resource: &Resource,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
    with_column_definitions: bool,
) -> Value {
    let columns = resource.table_columns();
    let now = Timestamp::now();
    let definitions: Vec<Value> = if with_column_definitions {
        columns
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": if c.type_ == "date" { "string" } else { c.type_.as_str() },
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| row(&columns, o, include, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_table() {
        let o = json!({
            "metadata": {"name": "m", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Paused", "status": "False"}
                ],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "replicas": 3
            }
        });
        for (path, want) in [
            (".metadata.name", json!("m")),
            (
                r".metadata.labels['cluster\.x-k8s\.io/cluster-name']",
                json!("c1"),
            ),
            (
                r#".status.conditions[?(@.type=="Ready")].status"#,
                json!("True"),
            ),
            (
                r#".status.conditions[?(@.type=="Paused")].status"#,
                json!("False"),
            ),
            (
                r#".status.addresses[?(@.type=="InternalIP")].address"#,
                json!("10.0.0.1"),
            ),
            (".status.conditions[1].type", json!("Paused")),
            (".status.replicas", json!(3)),
            ("{.status.replicas}", json!(3)),
        ] {
            assert_eq!(json_path(&o, path).first().copied(), Some(&want), "{path}");
        }
        assert!(json_path(&o, ".status.missing").is_empty());
        assert!(json_path(&o, r#".status.conditions[?(@.type=="Nope")].status"#).is_empty());
    }

    #[test]
    fn human_duration_table() {
        for (s, want) in [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (183, "3m3s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 240, "3h4m"),
            (9 * 3600, "9h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }
}
