//! Field ownership (`metadata.managedFields`) and server-side apply: who set which field,
//! conflicts between appliers, and fields an applier stops applying going away.
//!
//! Field sets use Kubernetes' FieldsV1 form (`{"f:spec": {"f:replicas": {}}}`). Lists follow
//! their schema, as kube-apiserver's structured merge does: a list map (`x-kubernetes-list-type:
//! map`, or a built-in list with a patch merge key) is owned item by item, by key
//! (`k:{"name":"web"}`); a set (`x-kubernetes-list-type: set`) value by value (`v:"a"`); any
//! other list as a whole. So an applier that sets a container's image owns that image, not
//! every container, and applying what another manager created conflicts with nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::object;

/// The object in the API versions other managers wrote in. kube-apiserver compares each
/// manager's fields in that manager's own version: a v1beta1 writer's `spec.x` may be a v1beta2
/// writer's `spec.y`, and a path of one version means nothing in the other.
pub trait Versions {
    /// `object` (in the request's version) in `version`, with that version's schema; None when
    /// it cannot be converted (then that version's managers keep their fields as they are).
    fn convert(&self, object: &Value, version: &str) -> Option<(Value, Option<Arc<Value>>)>;
}

/// One version only: every manager wrote in the request's.
pub struct SameVersion;

impl Versions for SameVersion {
    fn convert(&self, _: &Value, _: &str) -> Option<(Value, Option<Arc<Value>>)> {
        None
    }
}

/// One step of a field path, as FieldsV1 writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// `f:<name>`: a field of an object.
    Field(String),
    /// `k:<json>`: the item of a list map with these key fields (compact JSON, keys sorted).
    Key(String),
    /// `v:<json>`: the item of a set with this value.
    Value(String),
    /// `.`: the list item itself, as opposed to its fields.
    Itself,
}

/// A field path: the steps from the root.
pub type Path = Vec<Step>;

/// How the items of a list merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// The schema a write is merged by: a node of it, and how its `$ref`s resolve (built-in
/// kinds' schemas refer to shared definitions; CRD schemas are inline).
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    node: Option<&'a Value>,
    resolve: fn(&'a Value) -> &'a Value,
    /// Whether this node is an object's root (whose `metadata` is ObjectMeta).
    root: bool,
}

/// ObjectMeta's lists as kube-apiserver merges them (`ownerReferences` by uid, `finalizers`
/// as a set), for schemas that say nothing of `metadata` (a CRD's is just `type: object`):
/// an owner reference another manager added stays when one manager applies its own.
static OBJECT_META: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({"type": "object", "properties": {
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set"},
    }})
});

fn inline(node: &Value) -> &Value {
    node
}

impl<'a> Schema<'a> {
    /// No schema: every list is atomic.
    pub fn none() -> Schema<'a> {
        Schema {
            node: None,
            resolve: inline,
            root: true,
        }
    }

    /// A schema whose nodes are inline (a CRD's `openAPIV3Schema`).
    pub fn inline(root: &'a Value) -> Schema<'a> {
        Schema {
            node: Some(root),
            resolve: inline,
            root: true,
        }
    }

    /// A schema whose `$ref`s `resolve` follows.
    pub fn with_refs(root: &'a Value, resolve: fn(&'a Value) -> &'a Value) -> Schema<'a> {
        Schema {
            node: Some(root),
            resolve,
            root: true,
        }
    }

    fn resolved(&self) -> Option<&'a Value> {
        self.node.map(self.resolve)
    }

    fn at(self, node: Option<&'a Value>) -> Schema<'a> {
        Schema {
            node,
            root: false,
            ..self
        }
    }

    /// The schema of field `name` of the object this node describes.
    pub fn field(self, name: &str) -> Schema<'a> {
        let node = self.resolved().and_then(|n| {
            n.get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
        });
        let described = self
            .at(node)
            .resolved()
            .is_some_and(|m| m.get("properties").is_some());
        if self.root && name == "metadata" && !described {
            return Schema {
                node: Some(&OBJECT_META),
                resolve: inline,
                root: false,
            };
        }
        self.at(node)
    }

    /// The schema of the items of the list this node describes.
    pub fn items(self) -> Schema<'a> {
        self.at(self.resolved().and_then(|n| n.get("items")))
    }

    /// How the list this node describes merges: its `x-kubernetes-list-type`, else (built-in
    /// kinds' older markers) a patch merge key makes it a map and a merge strategy a set.
    pub fn list_type(&self) -> ListType {
        let Some(node) = self.node else {
            return ListType::Atomic;
        };
        // Markers sit beside a `$ref`, on the field, or on the definition it names.
        let marker = |key: &str| {
            node.get(key)
                .or_else(|| self.resolved().and_then(|n| n.get(key)))
                .and_then(Value::as_str)
        };
        let keys = || {
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(|k| k.as_str().map(String::from))
                        .collect()
                })
        };
        match marker("x-kubernetes-list-type") {
            Some("map") => ListType::Map(keys().unwrap_or_default()),
            Some("set") => ListType::Set,
            Some(_) => ListType::Atomic,
            None => match (
                marker("x-kubernetes-patch-merge-key"),
                marker("x-kubernetes-patch-strategy"),
            ) {
                (Some(key), Some(strategy)) if strategy.contains("merge") => {
                    ListType::Map(vec![key.to_string()])
                }
                (None, Some(strategy)) if strategy.contains("merge") => ListType::Set,
                _ => ListType::Atomic,
            },
        }
    }
}

/// Paths the server owns and no manager can.
fn ignored(path: &[Step]) -> bool {
    let field = |i: usize| match path.get(i) {
        Some(Step::Field(f)) => f.as_str(),
        _ => "",
    };
    match path.len() {
        1 => matches!(field(0), "apiVersion" | "kind"),
        n if n >= 2 && field(0) == "metadata" => matches!(
            field(1),
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

/// The key of a list map's item: its key fields as compact JSON, keys sorted.
fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let mut fields = Map::new();
    for key in keys {
        fields.insert(key.clone(), item.get(key)?.clone());
    }
    Some(Value::Object(fields).to_string())
}

/// Fills in the key fields a list map's items leave out with their schema's defaults (a
/// container port's `protocol`), as kube-apiserver defaults an applied configuration: items
/// are found by their whole key.
fn default_keys(value: &mut Value, schema: Schema<'_>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                default_keys(v, schema.field(k));
            }
        }
        Value::Array(items) => {
            let item_schema = schema.items();
            if let ListType::Map(keys) = schema.list_type() {
                for item in items.iter_mut() {
                    let Some(fields) = item.as_object_mut() else {
                        continue;
                    };
                    for key in &keys {
                        if !fields.contains_key(key)
                            && let Some(default) = item_schema
                                .field(key)
                                .resolved()
                                .and_then(|s| s.get("default"))
                        {
                            fields.insert(key.clone(), default.clone());
                        }
                    }
                }
            }
            for item in items {
                default_keys(item, item_schema);
            }
        }
        _ => {}
    }
}

/// The leaf paths of an object: maps and keyed list items are descended into; atomic lists,
/// set values and anything else are leaves.
pub fn leaves(value: &Value, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    collect(value, schema, &mut Vec::new(), &mut out);
    out
}

fn collect(value: &Value, schema: Schema<'_>, path: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() || path.is_empty() => {
            for (k, v) in map {
                path.push(Step::Field(k.clone()));
                if !ignored(path) {
                    collect(v, schema.field(k), path, out);
                }
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match schema.list_type() {
            ListType::Atomic => {
                out.insert(path.clone());
            }
            ListType::Set => {
                for item in items {
                    path.push(Step::Value(item.to_string()));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListType::Map(keys) => {
                let item_schema = schema.items();
                for item in items {
                    let Some(key) = item_key(item, &keys) else {
                        // An item without its keys cannot be told apart: the list is a whole.
                        out.insert(path.clone());
                        continue;
                    };
                    path.push(Step::Key(key));
                    path.push(Step::Itself);
                    out.insert(path.clone());
                    path.pop();
                    collect(item, item_schema, path, out);
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The leaf paths of a written object (as [`leaves`] finds them), and those of them the write
/// changed.
#[derive(Default)]
struct Changes {
    remaining: BTreeSet<Path>,
    changed: BTreeSet<Path>,
}

impl Changes {
    /// What a write from `old` to `new` changed: leaves there before with another value, or
    /// not there at all (a list item's `.` only when the item is new). One walk of both
    /// objects side by side, list items matched by key once per list: this runs on every
    /// write.
    fn of(old: Option<&Value>, new: &Value, schema: Schema<'_>) -> Changes {
        let mut changes = Changes::default();
        changes.walk(old, new, schema, &mut Vec::new());
        changes
    }

    fn leaf(&mut self, path: &Path, differs: bool) {
        if differs {
            self.changed.insert(path.clone());
        }
        self.remaining.insert(path.clone());
    }

    fn walk(&mut self, old: Option<&Value>, new: &Value, schema: Schema<'_>, path: &mut Path) {
        match new {
            Value::Object(map) if !map.is_empty() || path.is_empty() => {
                for (k, v) in map {
                    path.push(Step::Field(k.clone()));
                    if !ignored(path) {
                        self.walk(old.and_then(|o| o.get(k)), v, schema.field(k), path);
                    }
                    path.pop();
                }
            }
            Value::Array(items) if !items.is_empty() => match schema.list_type() {
                ListType::Atomic => self.leaf(path, old != Some(new)),
                ListType::Set => {
                    let before: std::collections::HashSet<String> = old
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(Value::to_string)
                        .collect();
                    for item in items {
                        let value = item.to_string();
                        let differs = !before.contains(&value);
                        path.push(Step::Value(value));
                        self.leaf(path, differs);
                        path.pop();
                    }
                }
                ListType::Map(keys) => {
                    if items.iter().any(|item| item_key(item, &keys).is_none()) {
                        // An item without its keys cannot be told apart: the list is a whole.
                        self.leaf(path, old != Some(new));
                    }
                    let mut before: std::collections::HashMap<String, &Value> =
                        std::collections::HashMap::new();
                    for item in old.and_then(Value::as_array).into_iter().flatten() {
                        if let Some(key) = item_key(item, &keys) {
                            before.entry(key).or_insert(item);
                        }
                    }
                    let item_schema = schema.items();
                    for item in items {
                        let Some(key) = item_key(item, &keys) else {
                            continue;
                        };
                        let was = before.get(&key).copied();
                        path.push(Step::Key(key));
                        path.push(Step::Itself);
                        self.leaf(path, was.is_none());
                        path.pop();
                        self.walk(was, item, item_schema, path);
                        path.pop();
                    }
                }
            },
            _ => self.leaf(path, old != Some(new)),
        }
    }
}

/// The item of list `items` that `step` names.
fn find<'v>(items: &'v [Value], step: &Step) -> Option<(usize, &'v Value)> {
    items.iter().enumerate().find(|(_, item)| match step {
        Step::Key(key) => {
            let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(key) else {
                return false;
            };
            fields.iter().all(|(k, v)| item.get(k) == Some(v))
        }
        Step::Value(value) => item.to_string() == *value,
        _ => false,
    })
}

fn get<'v>(value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Field(k) => v.get(k),
        Step::Itself => Some(v),
        keyed => find(v.as_array()?, keyed).map(|(_, item)| item),
    })
}

fn remove(value: &mut Value, path: &[Step]) {
    // A list item goes as a whole when its `.` (or its set value) goes.
    let path = match path.split_last() {
        Some((Step::Itself, item)) => item,
        _ => path,
    };
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for step in parents {
        let next = match step {
            Step::Field(k) => current.get_mut(k),
            Step::Itself => Some(current),
            keyed => {
                let index = current
                    .as_array()
                    .and_then(|items| find(items, keyed))
                    .map(|(i, _)| i);
                match index {
                    Some(i) => current.get_mut(i),
                    None => None,
                }
            }
        };
        match next {
            Some(v) => current = v,
            None => return,
        }
    }
    match last {
        Step::Field(k) => {
            if let Some(map) = current.as_object_mut() {
                map.remove(k);
            }
        }
        keyed => {
            if let Some(items) = current.as_array_mut()
                && let Some((i, _)) = find(items, keyed)
            {
                items.remove(i);
            }
        }
    }
}

fn step_key(step: &Step) -> String {
    match step {
        Step::Field(k) => format!("f:{k}"),
        Step::Key(k) => format!("k:{k}"),
        Step::Value(v) => format!("v:{v}"),
        Step::Itself => ".".into(),
    }
}

/// FieldsV1 from paths.
fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for step in path {
            node = node
                .entry(step_key(step))
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
        let children: Vec<(Step, &Value)> = node
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                let step = match k.split_at_checked(2) {
                    _ if k == "." => Step::Itself,
                    Some(("f:", name)) => Step::Field(name.to_string()),
                    Some(("k:", key)) => Step::Key(key.to_string()),
                    Some(("v:", value)) => Step::Value(value.to_string()),
                    _ => return None,
                };
                Some((step, v))
            })
            .collect();
        if children.is_empty() {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            return;
        }
        for (step, v) in children {
            path.push(step);
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
    subresource: Option<String>,
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
                    subresource: e["subresource"].as_str().map(String::from),
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
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(sub) = e.subresource {
                entry["subresource"] = json!(sub);
            }
            entry
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

/// A path as kube-apiserver shows it in a conflict: `.spec.containers[name="web"].image`.
fn display(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let shown: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", shown.join(",")));
            }
            Step::Value(v) => out.push_str(&format!("[={v}]")),
            Step::Itself => {}
        }
    }
    out
}

/// Records a non-apply write: `manager` now owns the fields it changed (or, on create, every
/// field), and other managers no longer do, each judged in the version it wrote in. As in
/// kube-apiserver, a write that carries `managedFields` of its own sets them (`clusterctl move`
/// restores the source's this way; `[{}]` clears them); without, the stored object's are kept.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    schema: Schema<'_>,
    versions: &dyn Versions,
) {
    let sent = new["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|list| !list.is_empty());
    let mut entries = if sent {
        read_entries(new)
    } else {
        old.map(read_entries).unwrap_or_default()
    };
    let here = Changes::of(old, new, schema);
    let mut elsewhere: BTreeMap<String, Option<Changes>> = BTreeMap::new();
    // Fields that went away are nobody's; changed ones are the writer's alone.
    for e in &mut entries {
        let changes = if e.api_version == api_version || e.api_version.is_empty() {
            Some(&here)
        } else {
            elsewhere
                .entry(e.api_version.clone())
                .or_insert_with(|| {
                    let (new, schema) = versions.convert(new, &e.api_version)?;
                    let old = match old {
                        Some(o) => Some(versions.convert(o, &e.api_version)?.0),
                        None => None,
                    };
                    let schema = schema.as_deref().map_or(Schema::none(), Schema::inline);
                    Some(Changes::of(old.as_ref(), &new, schema))
                })
                .as_ref()
        };
        if let Some(Changes { remaining, changed }) = changes {
            e.fields
                .retain(|p| remaining.contains(p) && !changed.contains(p));
        }
    }
    let changed = here.changed;
    if !changed.is_empty() {
        let now = object::now();
        // An updater has an entry per version it wrote in, as kube-apiserver keeps them.
        match entries.iter_mut().find(|e| {
            e.manager == manager && e.operation == "Update" && e.api_version == api_version
        }) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now;
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now,
                subresource: None,
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
/// to store, or the conflicts with other managers when `force` is not set. Managers who wrote
/// in another version are compared in theirs.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    schema: Schema<'_>,
    versions: &dyn Versions,
) -> Result<Value, Conflicts> {
    let mut entries = current.map(read_entries).unwrap_or_default();
    let mut applied = applied.clone();
    default_keys(&mut applied, schema);
    let applied = &applied;
    let applied_fields = leaves(applied, schema);
    let base = current.cloned().unwrap_or_else(|| json!({"metadata": {}}));
    let here = |e: &Entry| e.api_version == api_version || e.api_version.is_empty();
    let own_apply = |e: &Entry| e.manager == manager && e.operation == "Apply";

    // Fields other managers own that this apply would change (a list item's `.` only says
    // the item is there: sharing it is no conflict), by entry.
    let mut conflicts: Vec<(usize, Path)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.manager == manager || !here(e) {
            continue;
        }
        for p in e.fields.intersection(&applied_fields) {
            if p.last() != Some(&Step::Itself) && get(&base, p) != get(applied, p) {
                conflicts.push((i, p.clone()));
            }
        }
    }

    // Fields this manager applied before (in this version) and no longer does, and nobody else
    // owns, go.
    let mut result = base.clone();
    let previous: BTreeSet<Path> = entries
        .iter()
        .filter(|e| own_apply(e) && here(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let others: BTreeSet<Path> = entries
        .iter()
        .filter(|e| !own_apply(e) && here(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    // Items first (their fields go with them, and an item is found by its key fields), then
    // fields, deepest first.
    let mut gone: Vec<&Path> = previous.difference(&applied_fields).collect();
    gone.sort_by_key(|p| (p.last() != Some(&Step::Itself), std::cmp::Reverse(p.len())));
    for p in gone {
        if !others.contains(p) {
            remove(&mut result, p);
        }
    }
    merge(&mut result, applied, schema);

    // Managers of other versions: what the apply changed of their fields, in their version.
    let mut converted: BTreeMap<&str, Option<(Value, Value)>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        if e.manager == manager || here(e) {
            continue;
        }
        let in_theirs = converted.entry(&e.api_version).or_insert_with(|| {
            let before = versions.convert(&base, &e.api_version)?.0;
            let after = versions.convert(&result, &e.api_version)?.0;
            Some((before, after))
        });
        let Some((before, after)) = in_theirs else {
            continue;
        };
        for p in &e.fields {
            if p.last() != Some(&Step::Itself) && get(before, p) != get(after, p) {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(Conflicts(
            conflicts
                .into_iter()
                .map(|(i, p)| (entries[i].manager.clone(), display(&p)))
                .collect(),
        ));
    }

    // Ownership: forced fields leave their old owners (fields applied with the value they
    // had are shared); this manager's apply owns what it applied.
    for (i, p) in &conflicts {
        entries[*i].fields.remove(p);
    }
    entries.retain(|e| !own_apply(e));
    entries.push(Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: object::now(),
        subresource: None,
        fields: applied_fields,
    });
    write_entries(&mut result, entries);
    Ok(result)
}

/// Maps merge; list maps merge item by item by key and sets by value; any other applied value
/// replaces what is there.
fn merge(target: &mut Value, applied: &Value, schema: Schema<'_>) {
    match (target, applied) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                if k == "managedFields" {
                    continue;
                }
                match t.get_mut(k) {
                    Some(existing)
                        if (existing.is_object() && v.is_object())
                            || (existing.is_array() && v.is_array()) =>
                    {
                        merge(existing, v, schema.field(k))
                    }
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(a)) => match schema.list_type() {
            ListType::Atomic => *t = a.clone(),
            ListType::Set => {
                for item in a {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            }
            ListType::Map(keys) => {
                let item_schema = schema.items();
                for item in a {
                    let position = item_key(item, &keys)
                        .and_then(|key| find(t, &Step::Key(key)).map(|(i, _)| i));
                    match position {
                        Some(i) => merge(&mut t[i], item, item_schema),
                        None => t.push(item.clone()),
                    }
                }
            }
        },
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

    fn field(path: &[&str]) -> Path {
        path.iter().map(|s| Step::Field(s.to_string())).collect()
    }

    fn apply_as(
        current: Option<&Value>,
        applied: Value,
        manager: &str,
    ) -> Result<Value, Conflicts> {
        apply(
            current,
            &applied,
            manager,
            "v1",
            false,
            Schema::none(),
            &SameVersion,
        )
    }

    /// Two versions of one kind: v2's `spec.size` is v1's `spec.replicas`.
    struct Renamed;

    impl Versions for Renamed {
        fn convert(&self, object: &Value, version: &str) -> Option<(Value, Option<Arc<Value>>)> {
            let mut out = object.clone();
            let spec = out.get_mut("spec").and_then(Value::as_object_mut)?;
            let (from, to) = match version {
                "v2" => ("replicas", "size"),
                _ => ("size", "replicas"),
            };
            if let Some(v) = spec.remove(from) {
                spec.insert(to.into(), v);
            }
            out["apiVersion"] = json!(version);
            Some((out, None))
        }
    }

    #[test]
    fn managers_of_another_version_are_judged_in_theirs() {
        // A v2 applier owns spec.size; in v1 the same field is spec.replicas.
        let v2 = json!({"apiVersion": "v2", "metadata": {"name": "a"}, "spec": {"size": 3}});
        let stored = apply(
            None,
            &v2,
            "controller",
            "v2",
            false,
            Schema::none(),
            &Renamed,
        )
        .unwrap();
        let in_v1 = Renamed.convert(&stored, "v1").unwrap().0;
        // A v1 apply changing it conflicts, named in the owner's terms; the same value is shared.
        let changed =
            json!({"apiVersion": "v1", "metadata": {"name": "a"}, "spec": {"replicas": 5}});
        let err = apply(
            Some(&in_v1),
            &changed,
            "kubectl",
            "v1",
            false,
            Schema::none(),
            &Renamed,
        )
        .unwrap_err();
        assert_eq!(
            err.0,
            [("controller".to_string(), ".spec.size".to_string())]
        );
        let same = json!({"apiVersion": "v1", "metadata": {"name": "a"}, "spec": {"replicas": 3}});
        let shared = apply(
            Some(&in_v1),
            &same,
            "kubectl",
            "v1",
            false,
            Schema::none(),
            &Renamed,
        )
        .unwrap();
        assert_eq!(
            read_entries(&shared)
                .iter()
                .map(|e| (e.manager.as_str(), e.api_version.as_str(), e.fields.len()))
                .collect::<Vec<_>>(),
            [("controller", "v2", 1), ("kubectl", "v1", 1)]
        );
        let owned_by_controller = |object: &Value| {
            read_entries(object)
                .iter()
                .filter(|e| e.manager == "controller")
                .map(|e| e.fields.len())
                .sum::<usize>()
        };
        // Forced, the field leaves its v2 owner.
        let forced = apply(
            Some(&in_v1),
            &changed,
            "kubectl",
            "v1",
            true,
            Schema::none(),
            &Renamed,
        )
        .unwrap();
        assert_eq!(owned_by_controller(&forced), 0);
        // An update in v1 takes the field from its v2 owner too; a v1 write that leaves it
        // alone does not, where comparing v2 paths with v1's object would have dropped it.
        let mut labelled = in_v1.clone();
        labelled["metadata"]["labels"] = json!({"x": "1"});
        record_update(
            Some(&in_v1),
            &mut labelled,
            "kubectl-label",
            "v1",
            Schema::none(),
            &Renamed,
        );
        assert_eq!(owned_by_controller(&labelled), 1, "{labelled}");
        let mut scaled = in_v1.clone();
        scaled["spec"]["replicas"] = json!(4);
        record_update(
            Some(&in_v1),
            &mut scaled,
            "kubectl-scale",
            "v1",
            Schema::none(),
            &Renamed,
        );
        assert_eq!(owned_by_controller(&scaled), 0, "{scaled}");
    }

    #[test]
    fn fields_v1_round_trips() {
        let object = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 3, "list": [1, 2]}});
        let set = leaves(&object, Schema::none());
        assert_eq!(
            set.iter().map(|p| display(p)).collect::<Vec<_>>(),
            [".metadata.labels.x", ".spec.list", ".spec.replicas"]
        );
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn apply_conflicts_with_another_managers_field_unless_forced() {
        let created = apply_as(
            None,
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 1, "image": "x"}}),
            "alice",
        )
        .unwrap();
        // The same value is shared ownership, not a conflict.
        let shared = apply_as(
            Some(&created),
            json!({"metadata": {"name": "a"}, "spec": {"image": "x"}}),
            "bob",
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
        let err = apply_as(
            Some(&shared),
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 5}}),
            "bob",
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
            Schema::none(),
            &SameVersion,
        )
        .unwrap();
        assert_eq!(forced["spec"]["replicas"], 5);
        let alice = read_entries(&forced)
            .into_iter()
            .find(|e| e.manager == "alice")
            .unwrap();
        assert!(!alice.fields.contains(&field(&["spec", "replicas"])));
    }

    #[test]
    fn fields_an_applier_stops_applying_go_away() {
        let first = apply_as(
            None,
            json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}}),
            "alice",
        )
        .unwrap();
        let second = apply_as(
            Some(&first),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}}),
            "alice",
        )
        .unwrap();
        assert_eq!(second["metadata"]["labels"], json!({"x": "1"}));
    }

    #[test]
    fn updates_take_ownership_of_what_they_change() {
        let created = apply_as(
            None,
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}}),
            "alice",
        )
        .unwrap();
        let mut scaled = created.clone();
        scaled["spec"]["replicas"] = json!(3);
        record_update(
            Some(&created),
            &mut scaled,
            "kubectl-scale",
            "v1",
            Schema::none(),
            &SameVersion,
        );
        assert_eq!(
            managers(&scaled),
            [("kubectl-scale".into(), "Update".into())],
            "alice owned only replicas"
        );
        // Alice applying her old value now conflicts with the scaler.
        let err = apply_as(
            Some(&scaled),
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}}),
            "alice",
        )
        .unwrap_err();
        assert!(err.to_string().contains("kubectl-scale"), "{err}");
    }

    /// A CRD's schema says nothing of metadata; its owner references still merge by uid, as
    /// kube-apiserver's: the owner a controller added stays when another manager applies its
    /// own (the topology applying a MachinePool's infrastructure, whose MachinePool adopted it).
    #[test]
    fn owner_references_added_by_another_manager_stay_on_apply() {
        let crd_schema = json!({"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}});
        let schema = Schema::inline(&crd_schema);
        let cluster = json!({"apiVersion": "v1", "kind": "Cluster", "name": "c", "uid": "1"});
        let pool = json!({"apiVersion": "v1", "kind": "MachinePool", "name": "p", "uid": "2"});
        let applied =
            json!({"metadata": {"name": "a", "ownerReferences": [cluster]}, "spec": {"x": 1}});
        let topology = |current: Option<&Value>| {
            apply(
                current,
                &applied,
                "capi-topology",
                "v1",
                true,
                schema,
                &SameVersion,
            )
            .unwrap()
        };
        let created = topology(None);
        let mut adopted = created.clone();
        adopted["metadata"]["ownerReferences"] = json!([cluster, pool]);
        record_update(
            Some(&created),
            &mut adopted,
            "capictl",
            "v1",
            schema,
            &SameVersion,
        );
        let again = topology(Some(&adopted));
        assert_eq!(
            again["metadata"]["ownerReferences"],
            json!([cluster, pool]),
            "{again:#}"
        );
    }

    /// A schema with `containers` a list map keyed by name and `finalizers` a set.
    fn pod_schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            }},
            "spec": {"type": "object", "properties": {
                "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "image": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}}},
            }},
        }})
    }

    /// What a write changed, by definition: the leaves of the new object that the old one
    /// lacks, or holds with another value (a list item's `.` only when the item is new).
    /// `Changes::of` must say the same in its one walk.
    #[test]
    fn one_walk_finds_what_a_write_changed() {
        let schema = pod_schema();
        let schema = Schema::inline(&schema);
        let base = json!({"metadata": {"name": "p", "finalizers": ["a", "b"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "web", "image": "nginx", "args": ["-v"]}, {"name": "log", "image": "busybox"}],
                     "tolerations": [{"key": "k"}], "empty": {}}});
        let writes = [
            // Nothing changed.
            base.clone(),
            // A scalar in a keyed item, an atomic list in it, a label.
            json!({"metadata": {"name": "p", "finalizers": ["a", "b"], "labels": {"x": "2"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:2", "args": ["-v", "-q"]}, {"name": "log", "image": "busybox"}],
                         "tolerations": [{"key": "k"}], "empty": {}}}),
            // Items reordered, one new, one gone; a set value new, one gone.
            json!({"metadata": {"name": "p", "finalizers": ["c", "a"]},
                "spec": {"containers": [{"name": "new", "image": "x"}, {"name": "web", "image": "nginx", "args": ["-v"]}],
                         "tolerations": [{"key": "k"}, {"key": "j"}], "empty": {}}}),
            // An item without its key makes the list a whole; an object becomes a scalar and
            // an empty object gains a field.
            json!({"metadata": {"name": "p", "finalizers": ["a", "b"], "labels": "none"},
                "spec": {"containers": [{"image": "nameless"}, {"name": "web", "image": "nginx", "args": ["-v"]}],
                         "tolerations": [{"key": "k"}], "empty": {"now": true}}}),
            // Types change under the same names.
            json!({"metadata": {"name": "p", "finalizers": "a", "labels": {"x": {"y": 1}}},
                "spec": {"containers": {"name": "web"}, "tolerations": [], "empty": []}}),
        ];
        for old in [None, Some(&base)] {
            for new in &writes {
                let remaining = leaves(new, schema);
                let expected: BTreeSet<Path> = match old {
                    None => remaining.clone(),
                    Some(old) => {
                        let before = leaves(old, schema);
                        remaining
                            .iter()
                            .filter(|p| {
                                !before.contains(*p)
                                    || (p.last() != Some(&Step::Itself)
                                        && get(old, p) != get(new, p))
                            })
                            .cloned()
                            .collect()
                    }
                };
                let show =
                    |set: &BTreeSet<Path>| set.iter().map(|p| display(p)).collect::<Vec<_>>();
                let found = Changes::of(old, new, schema);
                assert_eq!(show(&found.remaining), show(&remaining), "{new}");
                assert_eq!(
                    show(&found.changed),
                    show(&expected),
                    "from {old:?} to {new}"
                );
            }
        }
    }

    #[test]
    fn list_map_items_are_owned_by_key_and_sets_by_value() {
        let schema = pod_schema();
        let schema = Schema::inline(&schema);
        let mut created = json!({"metadata": {"name": "p", "finalizers": ["a/x"]}, "spec": {"containers": [
            {"name": "web", "image": "nginx", "imagePullPolicy": "Always"},
            {"name": "log", "image": "busybox"},
        ]}});
        record_update(None, &mut created, "creator", "v1", schema, &SameVersion);
        let fields = &created["metadata"]["managedFields"][0]["fieldsV1"];
        assert_eq!(
            fields["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"],
            json!({".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}})
        );
        assert_eq!(
            fields["f:metadata"]["f:finalizers"],
            json!({"v:\"a/x\"": {}})
        );

        // Applying what was created (without the defaulted field) conflicts with nothing.
        let applied = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}});
        let shared = apply(
            Some(&created),
            &applied,
            "kubectl",
            "v1",
            false,
            schema,
            &SameVersion,
        )
        .unwrap();
        assert_eq!(
            shared["spec"]["containers"].as_array().unwrap().len(),
            2,
            "the other item stays"
        );
        // Changing one item's field conflicts on that field alone, named by its key.
        let changed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "web", "image": "nginx:2"}]}});
        let err = apply(
            Some(&shared),
            &changed,
            "kubectl",
            "v1",
            false,
            schema,
            &SameVersion,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"creator\": .spec.containers[name=\"web\"].image"
        );
        let forced = apply(
            Some(&shared),
            &changed,
            "kubectl",
            "v1",
            true,
            schema,
            &SameVersion,
        )
        .unwrap();
        assert_eq!(forced["spec"]["containers"][0]["image"], "nginx:2");
        assert_eq!(forced["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(forced["spec"]["containers"][1]["name"], "log");

        // An applier's own item goes when it stops applying it; a set value too.
        let mine = apply(
            None,
            &json!({"metadata": {"name": "q", "finalizers": ["a/x", "b/y"]}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            "me",
            "v1",
            false,
            schema,
            &SameVersion,
        )
        .unwrap();
        let fewer = apply(
            Some(&mine),
            &json!({"metadata": {"name": "q", "finalizers": ["a/x"]}, "spec": {"containers": [{"name": "b"}]}}),
            "me",
            "v1",
            false,
            schema,
            &SameVersion,
        )
        .unwrap();
        assert_eq!(fewer["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(fewer["metadata"]["finalizers"], json!(["a/x"]));
    }
}
