//! Field ownership (`metadata.managedFields`) and server-side apply: who set which field,
//! conflicts between appliers, and fields an applier stops applying going away.
//!
//! Field sets use Kubernetes' FieldsV1 form (`{"f:spec": {"f:replicas": {}}}`). Lists are owned
//! as a whole.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::object;

/// A field path: the keys from the root.
type Path = Vec<String>;

/// Paths the server owns and no manager can.
fn ignored(path: &[String]) -> bool {
    match path {
        [first] => matches!(first.as_str(), "apiVersion" | "kind"),
        [meta, field, ..] if meta == "metadata" => matches!(
            field.as_str(),
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "managedFields"
                | "selfLink"
        ),
        _ => false,
    }
}

/// The leaf paths of an object (maps are descended into; anything else is a leaf).
pub fn leaves(value: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    collect(value, &mut Vec::new(), &mut out);
    out
}

fn collect(value: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() || path.is_empty() => {
            for (k, v) in map {
                path.push(k.clone());
                if !ignored(path) {
                    collect(v, path, out);
                }
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(k))
}

fn remove(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for k in parents {
        match current.get_mut(k) {
            Some(v) => current = v,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(last);
    }
}

/// FieldsV1 from paths.
fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for k in path {
            node = node
                .entry(format!("f:{k}"))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("field sets are maps");
        }
    }
    Value::Object(root)
}

/// Paths from FieldsV1.
fn from_fields_v1(fields: &Value) -> BTreeSet<Path> {
    fn walk(node: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        let children: Vec<(&String, &Value)> = node
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        if children.is_empty() {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            return;
        }
        for (k, v) in children {
            path.push(k[2..].to_string());
            walk(v, path, out);
            path.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    fields: BTreeSet<Path>,
}

fn read_entries(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_entries(object: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            })
        })
        .collect();
    let meta = object["metadata"]
        .as_object_mut()
        .expect("objects have metadata");
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

fn display(path: &[String]) -> String {
    format!(".{}", path.join("."))
}

/// Records a non-apply write: `manager` now owns the fields it changed (or, on create, every
/// field), and other managers no longer do. As in kube-apiserver, a write that carries
/// `managedFields` of its own sets them (`clusterctl move` restores the source's this way;
/// `[{}]` clears them); without, the stored object's are kept.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, api_version: &str) {
    let sent = new["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|list| !list.is_empty());
    let mut entries = if sent {
        read_entries(new)
    } else {
        old.map(read_entries).unwrap_or_default()
    };
    let remaining = leaves(new);
    let changed: BTreeSet<Path> = match old {
        None => remaining.clone(),
        Some(old) => {
            let before = leaves(old);
            remaining
                .iter()
                .filter(|p| get(old, p) != get(new, p) || !before.contains(*p))
                .cloned()
                .collect()
        }
    };
    // Fields that went away are nobody's.
    for e in &mut entries {
        e.fields
            .retain(|p| remaining.contains(p) && !changed.contains(p));
    }
    if !changed.is_empty() {
        let now = object::now();
        match entries
            .iter_mut()
            .find(|e| e.manager == manager && e.operation == "Update")
        {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now;
                e.api_version = api_version.to_string();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now,
                fields: changed,
            }),
        }
    }
    write_entries(new, entries);
}

/// A server-side apply that other managers' fields stand in the way of.
#[derive(Debug)]
pub struct Conflicts(pub Vec<(String, String)>);

impl std::fmt::Display for Conflicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "Apply failed with {n} conflict{}: ",
            if n == 1 { "" } else { "s" }
        )?;
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|(manager, path)| format!("conflict with \"{manager}\": {path}"))
            .collect();
        write!(f, "{}", lines.join("\n"))
    }
}

/// Server-side apply of `applied` by `manager` onto `current` (None when creating): the result
/// to store, or the conflicts with other managers when `force` is not set.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
) -> Result<Value, Conflicts> {
    let mut entries = current.map(read_entries).unwrap_or_default();
    let applied_fields = leaves(applied);
    let base = current.cloned().unwrap_or_else(|| json!({"metadata": {}}));

    // Fields other managers own that this apply would change.
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in entries.iter().filter(|e| e.manager != manager) {
        for p in e.fields.intersection(&applied_fields) {
            if get(&base, p) != get(applied, p) {
                conflicts.push((e.manager.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(Conflicts(
            conflicts
                .into_iter()
                .map(|(m, p)| (m, display(&p)))
                .collect(),
        ));
    }

    // Fields this manager applied before and no longer does, and nobody else owns, go.
    let mut result = base;
    let previous: BTreeSet<Path> = entries
        .iter()
        .filter(|e| e.manager == manager && e.operation == "Apply")
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let others: BTreeSet<Path> = entries
        .iter()
        .filter(|e| !(e.manager == manager && e.operation == "Apply"))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    for p in previous.difference(&applied_fields) {
        if !others.contains(p) {
            remove(&mut result, p);
        }
    }
    merge(&mut result, applied);

    // Ownership: forced fields leave their old owners (fields applied with the value they
    // had are shared); this manager's apply owns what it applied.
    for e in entries.iter_mut().filter(|e| e.manager != manager) {
        e.fields
            .retain(|p| !conflicts.iter().any(|(m, c)| *m == e.manager && c == p));
    }
    entries.retain(|e| !(e.manager == manager && e.operation == "Apply"));
    entries.push(Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: object::now(),
        fields: applied_fields,
    });
    write_entries(&mut result, entries);
    Ok(result)
}

/// Maps merge; any other applied value replaces what is there.
fn merge(target: &mut Value, applied: &Value) {
    match (target, applied) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                if k == "managedFields" {
                    continue;
                }
                match t.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, a) => *t = a.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managers(object: &Value) -> Vec<(String, String)> {
        read_entries(object)
            .into_iter()
            .map(|e| (e.manager, e.operation))
            .collect()
    }

    #[test]
    fn fields_v1_round_trips() {
        let object = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 3, "list": [1, 2]}});
        let set = leaves(&object);
        assert_eq!(
            set.iter().map(|p| display(p)).collect::<Vec<_>>(),
            [".metadata.labels.x", ".spec.list", ".spec.replicas"]
        );
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn apply_conflicts_with_another_managers_field_unless_forced() {
        let created = apply(
            None,
            &json!({"metadata": {"name": "a"}, "spec": {"replicas": 1, "image": "x"}}),
            "alice",
            "v1",
            false,
        )
        .unwrap();
        // The same value is shared ownership, not a conflict.
        let shared = apply(
            Some(&created),
            &json!({"metadata": {"name": "a"}, "spec": {"image": "x"}}),
            "bob",
            "v1",
            false,
        )
        .unwrap();
        assert_eq!(
            managers(&shared),
            [
                ("alice".into(), "Apply".into()),
                ("bob".into(), "Apply".into())
            ]
        );
        // A different value is a conflict...
        let err = apply(
            Some(&shared),
            &json!({"metadata": {"name": "a"}, "spec": {"replicas": 5}}),
            "bob",
            "v1",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
        );
        // ...that force takes over.
        let forced = apply(
            Some(&shared),
            &json!({"metadata": {"name": "a"}, "spec": {"replicas": 5}}),
            "bob",
            "v1",
            true,
        )
        .unwrap();
        assert_eq!(forced["spec"]["replicas"], 5);
        let alice = read_entries(&forced)
            .into_iter()
            .find(|e| e.manager == "alice")
            .unwrap();
        assert!(
            !alice
                .fields
                .contains(&vec!["spec".to_string(), "replicas".to_string()])
        );
    }

    #[test]
    fn fields_an_applier_stops_applying_go_away() {
        let first = apply(
            None,
            &json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}}),
            "alice",
            "v1",
            false,
        )
        .unwrap();
        let second = apply(
            Some(&first),
            &json!({"metadata": {"name": "a", "labels": {"x": "1"}}}),
            "alice",
            "v1",
            false,
        )
        .unwrap();
        assert_eq!(second["metadata"]["labels"], json!({"x": "1"}));
    }

    #[test]
    fn updates_take_ownership_of_what_they_change() {
        let created = apply(
            None,
            &json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}}),
            "alice",
            "v1",
            false,
        )
        .unwrap();
        let mut scaled = created.clone();
        scaled["spec"]["replicas"] = json!(3);
        record_update(Some(&created), &mut scaled, "kubectl-scale", "v1");
        assert_eq!(
            managers(&scaled),
            [("kubectl-scale".into(), "Update".into())],
            "alice owned only replicas"
        );
        // Alice applying her old value now conflicts with the scaler.
        let err = apply(
            Some(&scaled),
            &json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}}),
            "alice",
            "v1",
            false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("kubectl-scale"), "{err}");
    }
}
