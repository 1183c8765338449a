//! `describe cluster`: a Cluster's objects as a tree with their state, laid out as clusterctl
//! lays it out (rows `Kind namespace/name, version`, the columns REPLICAS … MESSAGE, `├─`/`└─`
//! glyphs, messages wrapped at 100 columns, sibling Machines in the same state folded into one
//! row, infrastructure and bootstrap objects shown only when they say something new), plus the
//! MachineHealthChecks that upstream leaves out.
//!
//! Everything here is pure: [`Objects`] is what was read from the management cluster and
//! [`render`] the text, so the layout is tested with fixed inputs and a fixed clock.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api;
use crate::conditions::{Polarity, polarity};

/// What a Cluster's tree is made of, as read from the management cluster.
#[derive(Debug, Default)]
pub struct Objects {
    pub cluster: Value,
    /// For a Cluster with a managed topology: its ClusterClass, as [`cluster_class_row`] makes it.
    pub cluster_class: Option<Value>,
    pub infrastructure: Option<Value>,
    pub control_plane: Option<Value>,
    pub machine_deployments: Vec<Value>,
    pub machine_sets: Vec<Value>,
    pub machine_pools: Vec<Value>,
    pub machines: Vec<Value>,
    pub machine_health_checks: Vec<Value>,
    /// With `--show-resourcesets`: the ClusterResourceSets the Cluster's binding names.
    pub cluster_resource_sets: Vec<Value>,
    /// Infrastructure machines, bootstrap configs and (with `--show-templates`) the templates,
    /// by `(kind, name)`.
    pub referenced: BTreeMap<(String, String), Value>,
}

/// Which objects get a row per condition: `all`, `Kind` or `Kind/name`; `+` keeps only the
/// conditions that say something (Available and Ready always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionFilter {
    kind: String,
    name: Option<String>,
    non_zero_only: bool,
}

impl ConditionFilter {
    /// Parses `--show-conditions`.
    pub fn parse_list(value: &str) -> Result<Vec<ConditionFilter>, String> {
        if value.chars().any(char::is_whitespace) {
            return Err(format!(
                "invalid --show-conditions value {value:?}: whitespace is not allowed"
            ));
        }
        value
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|item| {
                let (item, non_zero_only) = match item.strip_suffix('+') {
                    Some(i) => (i, true),
                    None => (item, false),
                };
                let (kind, name) = match item.split_once('/') {
                    Some((k, n)) if !k.is_empty() && !n.is_empty() => (k, Some(n.to_string())),
                    Some(_) => {
                        return Err(format!(
                            "invalid --show-conditions value {item:?}: use all, KIND or KIND/NAME"
                        ));
                    }
                    None => (item, None),
                };
                Ok(ConditionFilter {
                    kind: kind.to_lowercase(),
                    name,
                    non_zero_only,
                })
            })
            .collect()
    }

    fn matches(&self, kind: &str, name: &str) -> bool {
        (self.kind == "all" || self.kind == kind.to_lowercase())
            && self.name.as_deref().is_none_or(|n| n == name)
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub show_conditions: Vec<ConditionFilter>,
    pub show_machine_sets: bool,
    /// Show the machine templates and bootstrap config templates the control plane and the
    /// MachineDeployments make their Machines from.
    pub show_templates: bool,
    pub echo: bool,
    pub grouping: bool,
    /// The time SINCE counts from.
    pub now: Timestamp,
    /// Colour STATUS by the condition's polarity (green when good, red when bad, yellow when
    /// unknown) and condition names in cyan.
    pub color: bool,
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

fn paint(text: &str, color: &str, on: bool) -> String {
    if on && !text.is_empty() {
        format!("{color}{text}{RESET}")
    } else {
        text.to_string()
    }
}

/// A condition's status, coloured by whether it is good news for its polarity.
fn status_cell(condition: &Value, on: bool) -> String {
    let t = condition["type"].as_str().unwrap_or_default();
    let status = condition["status"].as_str().unwrap_or_default();
    let good = match polarity(t) {
        Polarity::Positive => "True",
        Polarity::Negative => "False",
    };
    let color = match status {
        "Unknown" => YELLOW,
        s if s == good => GREEN,
        _ => RED,
    };
    paint(status, color, on)
}

/// The width a cell takes on screen, colour codes left out.
fn visible_len(text: &str) -> usize {
    let mut len = 0;
    let mut escape = false;
    for c in text.chars() {
        match (escape, c) {
            (false, '\x1b') => escape = true,
            (true, 'm') => escape = false,
            (true, _) => {}
            (false, _) => len += 1,
        }
    }
    len
}

/// One row of the tree: a real object, a group of alike Machines, or a heading (`Workers`).
#[derive(Debug, Clone)]
struct Node<'a> {
    object: Option<&'a Value>,
    heading: Option<String>,
    group: Vec<&'a Value>,
    children: Vec<Node<'a>>,
    /// Said after the object's name (the control plane's first certificate expiry).
    remark: Option<String>,
}

impl<'a> Node<'a> {
    fn object(object: &'a Value) -> Node<'a> {
        Node {
            object: Some(object),
            heading: None,
            group: Vec::new(),
            children: Vec::new(),
            remark: None,
        }
    }

    fn heading(name: &str, children: Vec<Node<'a>>) -> Node<'a> {
        Node {
            object: None,
            heading: Some(name.into()),
            group: Vec::new(),
            children,
            remark: None,
        }
    }

    /// A heading over a row per object, or nothing when there are none.
    fn listing(name: &str, objects: &'a [Value]) -> Option<Node<'a>> {
        (!objects.is_empty())
            .then(|| Node::heading(name, objects.iter().map(Node::object).collect()))
    }
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn kind_of(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn condition<'a>(o: &'a Value, t: &str) -> Option<&'a Value> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// Status and reason of a condition, for comparing objects' states.
fn state(o: &Value, t: &str) -> (Option<String>, Option<String>) {
    let c = condition(o, t);
    (
        c.and_then(|c| c["status"].as_str()).map(String::from),
        c.and_then(|c| c["reason"].as_str()).map(String::from),
    )
}

fn alike(a: &Value, b: &Value) -> bool {
    ["Available", "Ready", "UpToDate"]
        .iter()
        .all(|t| state(a, t) == state(b, t))
}

/// Machines under a grouping object, folded into groups of the same state.
fn grouped<'a>(machines: Vec<&'a Value>, options: &Options) -> Vec<Node<'a>> {
    let mut nodes: Vec<Node> = Vec::new();
    for m in machines {
        if options.grouping
            && let Some(n) = nodes.iter_mut().find(|n| {
                let first = n.group.first().copied().or(n.object);
                first.is_some_and(|f| alike(f, m))
            })
        {
            if let Some(single) = n.object.take() {
                n.group.push(single);
            }
            n.group.push(m);
            n.children.clear();
            continue;
        }
        nodes.push(Node::object(m));
    }
    nodes
}

/// Adds each visible Machine's infrastructure machine and bootstrap config, unless they only
/// repeat what the Machine says (`--echo` shows them always).
fn echo_children<'a>(node: &mut Node<'a>, objects: &'a Objects, options: &Options) {
    let Some(m) = node.object else {
        for c in &mut node.children {
            echo_children(c, objects, options);
        }
        return;
    };
    let spec = match kind_of(m) {
        "Machine" => Some(&m["spec"]),
        "MachinePool" => Some(&m["spec"]["template"]["spec"]),
        _ => None,
    };
    if let Some(spec) = spec {
        let refs = [&spec["infrastructureRef"], &spec["bootstrap"]["configRef"]];
        for r in refs {
            let key = (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["name"].as_str().unwrap_or_default().to_string(),
            );
            let Some(child) = objects.referenced.get(&key) else {
                continue;
            };
            let ready = state(child, "Ready");
            let silent = ready.0.as_deref() == Some("True") || ready == state(m, "Ready");
            if options.echo || !silent {
                node.children.push(Node::object(child));
            }
        }
    }
    for c in &mut node.children {
        echo_children(c, objects, options);
    }
}

fn owned_by(o: &Value, kind: &str, name: &str) -> bool {
    o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["kind"] == kind && r["name"] == name))
}

fn is_control_plane(m: &Value) -> bool {
    m["metadata"]["labels"]
        .get(api::CONTROL_PLANE_LABEL)
        .is_some()
}

/// Where a control plane or a MachineDeployment names the templates its Machines are made
/// from (bootstrap config template, then infrastructure machine template).
pub fn template_refs(o: &Value) -> Vec<&Value> {
    let spec = match kind_of(o) {
        "MachineDeployment" | "MachineSet" | "MachinePool" => &o["spec"]["template"]["spec"],
        _ => &o["spec"]["machineTemplate"]["spec"],
    };
    [&spec["bootstrap"]["configRef"], &spec["infrastructureRef"]]
        .into_iter()
        .filter(|r| r["kind"].is_string())
        .collect()
}

/// The templates of a control plane or MachineDeployment that could be read.
fn templates<'a>(o: &Value, objects: &'a Objects) -> Vec<&'a Value> {
    template_refs(o)
        .into_iter()
        .filter_map(|r| {
            let key = (
                r["kind"].as_str().unwrap_or_default().to_string(),
                r["name"].as_str().unwrap_or_default().to_string(),
            );
            objects.referenced.get(&key)
        })
        .collect()
}

/// The row of a managed topology's ClusterClass: the class, with how the Cluster's topology
/// stands (its TopologyReconciled condition) as the row's condition. A class that is missing
/// still gets its row, saying so.
pub fn cluster_class_row(
    cluster: &Value,
    class: Option<&Value>,
    namespace: &str,
    name: &str,
) -> Value {
    let topology = condition(cluster, api::cluster_class::topology::TOPOLOGY_RECONCILED).cloned();
    let mut row = serde_json::json!({
        "kind": "ClusterClass",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": topology.into_iter().collect::<Vec<_>>()},
    });
    if let Some(class) = class {
        row["metadata"] = class["metadata"].clone();
    }
    row
}

/// The tree of a Cluster's objects.
fn tree<'a>(objects: &'a Objects, options: &Options) -> Node<'a> {
    let mut root = Node::object(&objects.cluster);
    if let Some(class) = &objects.cluster_class {
        root.children.push(Node::object(class));
    }
    if let Some(infra) = &objects.infrastructure {
        root.children.push(Node::object(infra));
    }
    root.children.extend(Node::listing(
        "ClusterResourceSets",
        &objects.cluster_resource_sets,
    ));
    let mut placed: HashSet<&str> = HashSet::new();
    if let Some(cp) = &objects.control_plane {
        let machines: Vec<&Value> = objects
            .machines
            .iter()
            .filter(|m| is_control_plane(m))
            .collect();
        placed.extend(machines.iter().map(|m| name_of(m)));
        let mut node = Node::object(cp);
        // RFC 3339 times of one zone order as text: the smallest is the earliest.
        node.remark = machines
            .iter()
            .filter_map(|m| m["status"]["certificatesExpiryDate"].as_str())
            .min()
            .map(|at| format!("certificates expire {}", at.get(..10).unwrap_or(at)));
        if options.show_templates {
            node.children
                .extend(templates(cp, objects).into_iter().map(Node::object));
        }
        node.children.extend(grouped(machines, options));
        root.children.push(node);
    }
    let mut workers = Vec::new();
    for md in &objects.machine_deployments {
        let sets: Vec<&Value> = objects
            .machine_sets
            .iter()
            .filter(|s| owned_by(s, "MachineDeployment", name_of(md)))
            .collect();
        let mut node = Node::object(md);
        for set in sets {
            let machines: Vec<&Value> = objects
                .machines
                .iter()
                .filter(|m| owned_by(m, "MachineSet", name_of(set)))
                .collect();
            placed.extend(machines.iter().map(|m| name_of(m)));
            if options.show_machine_sets {
                let mut set_node = Node::object(set);
                set_node.children = grouped(machines, options);
                node.children.push(set_node);
            } else {
                node.children.extend(grouped(machines, options));
            }
        }
        if !options.show_machine_sets {
            // Fold alike Machines across the MachineSets of one MachineDeployment too.
            let machines: Vec<&Value> = node
                .children
                .drain(..)
                .flat_map(|n| {
                    if n.group.is_empty() {
                        n.object.into_iter().collect()
                    } else {
                        n.group
                    }
                })
                .collect();
            node.children = grouped(machines, options);
        }
        if options.show_templates {
            let templates = templates(md, objects);
            if !templates.is_empty() {
                let heading = Node::heading(
                    "Templates",
                    templates.into_iter().map(Node::object).collect(),
                );
                node.children.insert(0, heading);
            }
        }
        workers.push(node);
    }
    for mp in &objects.machine_pools {
        let machines: Vec<&Value> = objects
            .machines
            .iter()
            .filter(|m| owned_by(m, "MachinePool", name_of(mp)))
            .collect();
        placed.extend(machines.iter().map(|m| name_of(m)));
        let mut node = Node::object(mp);
        node.children = grouped(machines, options);
        workers.push(node);
    }
    let others: Vec<&Value> = objects
        .machines
        .iter()
        .filter(|m| !placed.contains(&name_of(m)))
        .collect();
    if !others.is_empty() {
        workers.push(Node::heading(
            "Other",
            others.into_iter().map(Node::object).collect(),
        ));
    }
    if !workers.is_empty() {
        root.children.push(Node::heading("Workers", workers));
    }
    root.children.extend(Node::listing(
        "MachineHealthChecks",
        &objects.machine_health_checks,
    ));
    echo_children(&mut root, objects, options);
    root
}

/// Kubernetes' human duration (`2m3s`, `46m`, `3d4h`), as kubectl and clusterctl print ages.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{}y", d / 365)
    }
}

/// Splits a message into lines of fewer than `width` characters: its own lines keep their
/// indentation, and a `* ` item continues two spaces further in.
pub fn wrap(message: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in message.split('\n') {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let continuation = if trimmed.starts_with("* ") {
            format!("{indent}  ")
        } else {
            indent.to_string()
        };
        let mut current = indent.to_string();
        let mut empty = true;
        for word in trimmed.split(' ').filter(|w| !w.is_empty()) {
            if !empty && current.len() + word.len() + 1 >= width {
                out.push(current);
                current = continuation.clone();
                empty = true;
            }
            if !empty {
                current.push(' ');
            }
            current.push_str(word);
            empty = false;
        }
        out.push(current);
    }
    out
}

/// The cells of one row after NAME.
#[derive(Default)]
struct Cells {
    replicas: String,
    available: String,
    ready: String,
    up_to_date: String,
    condition: Option<Value>,
}

fn count(v: &Value) -> String {
    v.as_i64().map(|n| n.to_string()).unwrap_or_default()
}

fn cells(node: &Node) -> Cells {
    if !node.group.is_empty() {
        let n = |t: &str| {
            node.group
                .iter()
                .filter(|m| state(m, t).0.as_deref() == Some("True"))
                .count()
                .to_string()
        };
        let mut ready = condition(node.group[0], "Ready").cloned();
        if let Some(r) = ready.as_mut() {
            let mut names: Vec<&str> = node.group.iter().map(|m| name_of(m)).collect();
            names.sort();
            let more = if names.len() > 2 { ", ..." } else { "" };
            r["message"] = Value::String(format!(
                "See {}{more}",
                names[..names.len().min(2)].join(", ")
            ));
            let oldest = node
                .group
                .iter()
                .filter_map(|m| condition(m, "Ready")?["lastTransitionTime"].as_str())
                .min();
            if let Some(t) = oldest {
                r["lastTransitionTime"] = Value::String(t.into());
            }
        }
        return Cells {
            replicas: String::new(),
            available: n("Available"),
            ready: n("Ready"),
            up_to_date: n("UpToDate"),
            condition: ready,
        };
    }
    let Some(o) = &node.object else {
        return Cells::default();
    };
    let status = &o["status"];
    let counters = |replicas: String, s: &Value, condition_type: &str| Cells {
        replicas,
        available: count(&s["availableReplicas"]),
        ready: count(&s["readyReplicas"]),
        up_to_date: count(&s["upToDateReplicas"]),
        condition: condition(o, condition_type).cloned(),
    };
    let fraction = |have: &Value, want: &Value| match (have.as_i64(), want.as_i64()) {
        (None, None) => String::new(),
        (h, w) => format!("{}/{}", h.unwrap_or(0), w.unwrap_or(0)),
    };
    match kind_of(o) {
        "Cluster" => {
            let (cp, w) = (&status["controlPlane"], &status["workers"]);
            let sum = |f: &str| match (cp[f].as_i64(), w[f].as_i64()) {
                (None, None) => Value::Null,
                (a, b) => Value::from(a.unwrap_or(0) + b.unwrap_or(0)),
            };
            let totals = serde_json::json!({
                "availableReplicas": sum("availableReplicas"),
                "readyReplicas": sum("readyReplicas"),
                "upToDateReplicas": sum("upToDateReplicas"),
            });
            counters(
                fraction(&sum("replicas"), &sum("desiredReplicas")),
                &totals,
                "Available",
            )
        }
        "MachineDeployment" | "MachinePool" => counters(
            fraction(&status["replicas"], &o["spec"]["replicas"]),
            status,
            "Available",
        ),
        "MachineSet" => Cells {
            condition: None,
            ..counters(
                fraction(&status["replicas"], &o["spec"]["replicas"]),
                status,
                "",
            )
        },
        "Machine" => {
            let one = |t: &str| {
                if state(o, t).0.as_deref() == Some("True") {
                    "1".to_string()
                } else {
                    "0".to_string()
                }
            };
            Cells {
                replicas: "1".into(),
                available: one("Available"),
                ready: one("Ready"),
                up_to_date: one("UpToDate"),
                condition: condition(o, "Ready").cloned(),
            }
        }
        "ClusterClass" => Cells {
            condition: condition(o, api::cluster_class::topology::TOPOLOGY_RECONCILED).cloned(),
            ..Default::default()
        },
        "ClusterResourceSet" => Cells {
            condition: condition(o, api::cluster_resource_set::conditions::RESOURCES_APPLIED)
                .cloned(),
            ..Default::default()
        },
        "MachineHealthCheck" => Cells {
            replicas: fraction(&status["currentHealthy"], &status["expectedMachines"]),
            condition: condition(
                o,
                api::machine_health_check::conditions::REMEDIATION_ALLOWED,
            )
            .cloned(),
            ..Default::default()
        },
        _ if o["spec"].get("version").is_some() && o["spec"].get("machineTemplate").is_some() => {
            // A control plane, by its contract.
            counters(
                fraction(&status["replicas"], &o["spec"]["replicas"]),
                status,
                "Available",
            )
        }
        _ => Cells {
            condition: condition(o, "Ready").cloned(),
            ..Default::default()
        },
    }
}

fn version_of(o: &Value) -> Option<&str> {
    match kind_of(o) {
        "Cluster" => o["spec"]["topology"]["version"].as_str(),
        "MachineDeployment" | "MachineSet" | "MachinePool" => {
            o["spec"]["template"]["spec"]["version"].as_str()
        }
        _ => o["spec"]["version"].as_str(),
    }
}

fn row_name(node: &Node) -> String {
    if let Some(h) = &node.heading {
        return h.clone();
    }
    if !node.group.is_empty() {
        let kind = kind_of(node.group[0]);
        return format!("{} {kind}s...", node.group.len());
    }
    let o = node
        .object
        .as_ref()
        .expect("a row is an object, a group or a heading");
    let mut name = format!(
        "{} {}/{}",
        kind_of(o),
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        name_of(o)
    );
    if let Some(v) = version_of(o) {
        name.push_str(&format!(", {v}"));
    }
    if o["metadata"].get("deletionTimestamp").is_some() {
        name = format!("!! DELETED !! {name}");
    }
    if let Some(remark) = &node.remark {
        name.push_str(&format!(", {remark}"));
    }
    if o["metadata"]["annotations"][crate::api::DELETION_PROTECTION_ANNOTATION] == "true" {
        name.push_str(" (deletion protected)");
    }
    name
}

struct Row([String; 9]);

fn since(condition: &Value, now: Timestamp) -> String {
    condition["lastTransitionTime"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(|t| human_duration(now.as_second() - t.as_second()))
        .unwrap_or_default()
}

/// Rows for a condition's STATUS … MESSAGE, with the message's extra lines as rows of their own.
fn condition_rows(
    name: String,
    counters: [String; 4],
    condition: Option<&Value>,
    continuation: &str,
    options: &Options,
    rows: &mut Vec<Row>,
) {
    let Some(c) = condition else {
        let [a, b, c2, d] = counters;
        rows.push(Row([
            name,
            a,
            b,
            c2,
            d,
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]));
        return;
    };
    let message = c["message"].as_str().unwrap_or_default();
    let lines = wrap(message, 100);
    let [a, b, c2, d] = counters;
    rows.push(Row([
        name,
        a,
        b,
        c2,
        d,
        status_cell(c, options.color),
        c["reason"].as_str().unwrap_or_default().into(),
        since(c, options.now),
        lines.first().cloned().unwrap_or_default(),
    ]));
    for line in lines.iter().skip(1) {
        let mut row: [String; 9] = Default::default();
        row[0] = continuation.trim_end().to_string();
        row[8] = line.clone();
        rows.push(Row(row));
    }
}

/// Whether a condition says nothing worth a row under `+`.
fn zero(c: &Value) -> bool {
    let t = c["type"].as_str().unwrap_or_default();
    if t == "Available" || t == "Ready" {
        return false;
    }
    let status = c["status"].as_str().unwrap_or_default();
    let expected = match polarity(t) {
        Polarity::Positive => "True",
        Polarity::Negative => "False",
    };
    status == expected && c["message"].as_str().unwrap_or_default().is_empty()
}

fn walk(
    node: &Node,
    prefix: &str,
    glyph: &str,
    last_overall: bool,
    options: &Options,
    rows: &mut Vec<Row>,
) {
    let mut children: Vec<&Node> = node.children.iter().collect();
    children.sort_by_key(|c| row_name(c));
    let child_prefix = format!(
        "{prefix}{}",
        match glyph {
            "├─" => "│ ",
            "└─" => "  ",
            _ => "",
        }
    );
    let name = format!("{prefix}{glyph}{}", row_name(node));
    let cells = cells(node);
    let counters = [
        cells.replicas,
        cells.available,
        cells.ready,
        cells.up_to_date,
    ];
    let filter = node.object.as_ref().and_then(|o| {
        options
            .show_conditions
            .iter()
            .find(|f| f.matches(kind_of(o), name_of(o)))
    });
    let continuation = if children.is_empty() {
        if last_overall {
            String::new()
        } else {
            format!("{child_prefix}  ")
        }
    } else {
        format!("{child_prefix}│ ")
    };
    match (filter, &node.object) {
        (Some(filter), Some(o)) => {
            condition_rows(name, counters, None, "", options, rows);
            let list: Vec<&Value> = o["status"]["conditions"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter(|c| !filter.non_zero_only || !zero(c))
                        .collect()
                })
                .unwrap_or_default();
            let base = format!(
                "{child_prefix}{}          ",
                if children.is_empty() { "  " } else { "│ " }
            );
            for (i, c) in list.iter().enumerate() {
                let last = i + 1 == list.len();
                let glyph = if last { "└─" } else { "├─" };
                let more = format!("{base}{}", if last { "  " } else { "│ " });
                let type_ = paint(c["type"].as_str().unwrap_or_default(), CYAN, options.color);
                condition_rows(
                    format!("{base}{glyph}{type_}"),
                    Default::default(),
                    Some(c),
                    &more,
                    options,
                    rows,
                );
            }
        }
        _ => condition_rows(
            name,
            counters,
            cells.condition.as_ref(),
            &continuation,
            options,
            rows,
        ),
    }
    for (i, child) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        walk(
            child,
            &child_prefix,
            if last { "└─" } else { "├─" },
            last_overall && last,
            options,
            rows,
        );
    }
}

/// The tree as data (`-o json|yaml`): each node with the columns of its row, its conditions
/// and its children, in the order the text shows them.
pub fn data(objects: &Objects, options: &Options) -> Value {
    fn node_data(node: &Node) -> Value {
        let cells = cells(node);
        let mut children: Vec<&Node> = node.children.iter().collect();
        children.sort_by_key(|c| row_name(c));
        let mut v = serde_json::json!({
            "name": row_name(node),
            "replicas": cells.replicas,
            "available": cells.available,
            "ready": cells.ready,
            "upToDate": cells.up_to_date,
            "condition": cells.condition,
            "children": children.iter().map(|c| node_data(c)).collect::<Vec<_>>(),
        });
        if let Some(o) = &node.object {
            v["object"] = serde_json::json!({"kind": kind_of(o), "namespace": o["metadata"]["namespace"], "name": name_of(o)});
            v["conditions"] = o["status"]["conditions"].clone();
        }
        if !node.group.is_empty() {
            let mut names: Vec<&str> = node.group.iter().map(|m| name_of(m)).collect();
            names.sort();
            v["members"] = serde_json::json!(names);
        }
        v
    }
    node_data(&tree(objects, options))
}

/// The tree as text: a header and one row per object, columns two spaces apart.
pub fn render(objects: &Objects, options: &Options) -> String {
    let root = tree(objects, options);
    let mut rows = vec![Row([
        "NAME",
        "REPLICAS",
        "AVAILABLE",
        "READY",
        "UP TO DATE",
        "STATUS",
        "REASON",
        "SINCE",
        "MESSAGE",
    ]
    .map(String::from))];
    walk(&root, "", "", true, options, &mut rows);
    let mut widths = [0usize; 9];
    for Row(cells) in &rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(visible_len(c));
        }
    }
    let mut out = String::new();
    for Row(cells) in &rows {
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            line.push_str(c);
            if i + 1 < cells.len() {
                line.push_str(&" ".repeat(widths[i] - visible_len(c) + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    const NOW: &str = "2026-11-29T12:00:00Z";

    fn cond(t: &str, status: &str, reason: &str, ago_s: i64, message: &str) -> Value {
        let at =
            Timestamp::from_second(NOW.parse::<Timestamp>().unwrap().as_second() - ago_s).unwrap();
        json!({"type": t, "status": status, "reason": reason, "lastTransitionTime": at.to_string(), "message": message})
    }

    fn machine(name: &str, owner: (&str, &str), cp: bool, ready: bool) -> Value {
        let labels = if cp {
            json!({"cluster.x-k8s.io/control-plane": ""})
        } else {
            json!({})
        };
        let conditions = if ready {
            json!([
                cond("Available", "True", "Available", 100, ""),
                cond("Ready", "True", "Ready", 180, ""),
                cond("UpToDate", "True", "UpToDate", 200, "")
            ])
        } else {
            json!([
                cond("Available", "False", "NotReady", 100, ""),
                cond(
                    "Ready",
                    "False",
                    "NotReady",
                    120,
                    "* NodeHealthy: Waiting for InMemoryMachine to report spec.providerID"
                ),
                cond("UpToDate", "True", "UpToDate", 200, "")
            ])
        };
        json!({
            "kind": "Machine", "metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": [{"kind": owner.0, "name": owner.1}]},
            "spec": {"version": "v1.30.4", "infrastructureRef": {"kind": "InMemoryMachine", "name": name}, "bootstrap": {"configRef": {"kind": "KubeadmConfig", "name": name}}},
            "status": {"conditions": conditions}
        })
    }

    fn objects() -> Objects {
        let mut referenced = BTreeMap::new();
        for (name, ready) in [
            ("c1-cp-a", true),
            ("c1-md-0-x-1", false),
            ("c1-md-0-x-2", false),
        ] {
            let infra = if ready {
                cond("Ready", "True", "Ready", 300, "")
            } else {
                cond(
                    "Ready",
                    "False",
                    "WaitingForBootstrapData",
                    120,
                    "Waiting for Machine spec.bootstrap.dataSecretName",
                )
            };
            referenced.insert(("InMemoryMachine".to_string(), name.to_string()), json!({"kind": "InMemoryMachine", "metadata": {"name": name, "namespace": "default"}, "status": {"conditions": [infra]}}));
            referenced.insert(("KubeadmConfig".to_string(), name.to_string()), json!({"kind": "KubeadmConfig", "metadata": {"name": name, "namespace": "default"}, "status": {"conditions": [cond("Ready", "True", "Ready", 300, "")]}}));
        }
        // The pool's infrastructure waits for an instance; its bootstrap config is ready.
        referenced.insert(("DevMachinePool".to_string(), "c1-mp-0".to_string()), json!({"kind": "DevMachinePool", "metadata": {"name": "c1-mp-0", "namespace": "default"}, "status": {"conditions": [cond("Ready", "False", "NotReady", 60, "1 of 2 instances are provisioned")]}}));
        referenced.insert(("KubeadmConfig".to_string(), "c1-mp-0".to_string()), json!({"kind": "KubeadmConfig", "metadata": {"name": "c1-mp-0", "namespace": "default"}, "status": {"conditions": [cond("Ready", "True", "Ready", 300, "")]}}));
        for (kind, name) in [
            ("InMemoryMachineTemplate", "c1-cp"),
            ("KubeadmConfigTemplate", "c1-md-0"),
            ("InMemoryMachineTemplate", "c1-md-0"),
        ] {
            referenced.insert(
                (kind.to_string(), name.to_string()),
                json!({"kind": kind, "metadata": {"name": name, "namespace": "default"}}),
            );
        }
        Objects {
            cluster_class: None,
            cluster: json!({
                "kind": "Cluster", "metadata": {"name": "c1", "namespace": "default"}, "spec": {},
                "status": {
                    "controlPlane": {"desiredReplicas": 1, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1},
                    "workers": {"desiredReplicas": 2, "replicas": 2, "readyReplicas": 0, "availableReplicas": 0, "upToDateReplicas": 2},
                    "conditions": [
                        cond("Available", "False", "NotAvailable", 180, "* WorkersAvailable:\n  * MachineDeployment c1-md-0: 0 available replicas, at least 1 required (spec.strategy.rollout.maxUnavailable is 0, spec.replicas is 2)"),
                        cond("Paused", "False", "NotPaused", 400, ""),
                        cond("RemoteConnectionProbe", "True", "ProbeSucceeded", 300, ""),
                    ]
                }
            }),
            infrastructure: Some(
                json!({"kind": "InMemoryCluster", "metadata": {"name": "c1", "namespace": "default"}, "status": {"conditions": [cond("Ready", "True", "Ready", 400, "")]}}),
            ),
            control_plane: Some(json!({
                "kind": "KubeadmControlPlane", "metadata": {"name": "c1-cp", "namespace": "default"},
                "spec": {"replicas": 1, "version": "v1.30.4", "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachineTemplate", "name": "c1-cp"}}}},
                "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1, "conditions": [
                    cond("Available", "True", "Available", 200, ""), cond("EtcdClusterHealthy", "True", "Healthy", 200, ""), cond("RollingOut", "False", "NotRollingOut", 400, "")
                ]}
            })),
            machine_deployments: vec![json!({
                "kind": "MachineDeployment", "metadata": {"name": "c1-md-0", "namespace": "default"},
                "spec": {"replicas": 2, "template": {"spec": {
                    "version": "v1.30.4",
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "c1-md-0"}},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachineTemplate", "name": "c1-md-0"},
                }}},
                "status": {"replicas": 2, "readyReplicas": 0, "availableReplicas": 0, "upToDateReplicas": 2, "conditions": [
                    cond("Available", "False", "NotAvailable", 180, "0 available replicas, at least 1 required (spec.strategy.rollout.maxUnavailable is 0, spec.replicas is 2)")
                ]}
            })],
            machine_sets: vec![json!({
                "kind": "MachineSet", "metadata": {"name": "c1-md-0-x", "namespace": "default", "ownerReferences": [{"kind": "MachineDeployment", "name": "c1-md-0"}]},
                "spec": {"replicas": 2, "template": {"spec": {"version": "v1.30.4"}}},
                "status": {"replicas": 2, "readyReplicas": 0, "availableReplicas": 0, "upToDateReplicas": 2}
            })],
            machine_pools: vec![json!({
                "kind": "MachinePool", "metadata": {"name": "c1-mp-0", "namespace": "default"},
                "spec": {"replicas": 2, "template": {"spec": {
                    "version": "v1.30.4",
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "c1-mp-0"}},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachinePool", "name": "c1-mp-0"},
                }}},
                "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1, "conditions": [
                    cond("Available", "False", "NotAvailable", 60, "1 of 2 replicas are available")
                ]}
            })],
            machines: vec![
                machine("c1-cp-a", ("KubeadmControlPlane", "c1-cp"), true, true),
                machine("c1-md-0-x-1", ("MachineSet", "c1-md-0-x"), false, false),
                machine("c1-md-0-x-2", ("MachineSet", "c1-md-0-x"), false, false),
                machine("c1-mp-0-bcdfg", ("MachinePool", "c1-mp-0"), false, true),
            ],
            machine_health_checks: vec![json!({
                "kind": "MachineHealthCheck", "metadata": {"name": "c1-workers", "namespace": "default"},
                "status": {"expectedMachines": 2, "currentHealthy": 2, "conditions": [cond("RemediationAllowed", "True", "RemediationAllowed", 300, "")]}
            })],
            cluster_resource_sets: Vec::new(),
            referenced,
        }
    }

    fn options(show_conditions: &str, grouping: bool, show_machine_sets: bool) -> Options {
        Options {
            show_conditions: ConditionFilter::parse_list(show_conditions).unwrap(),
            show_machine_sets,
            show_templates: false,
            echo: false,
            grouping,
            now: NOW.parse().unwrap(),
            color: false,
        }
    }

    #[test]
    fn a_cluster_with_unready_workers() {
        insta::assert_snapshot!(render(&objects(), &options("", true, false)));
    }

    #[test]
    fn without_grouping_and_with_machine_sets() {
        insta::assert_snapshot!(render(&objects(), &options("", false, true)));
    }

    #[test]
    fn with_resource_sets() {
        let mut o = objects();
        o.cluster_resource_sets = vec![
            json!({
                "kind": "ClusterResourceSet", "metadata": {"name": "calico", "namespace": "default"},
                "status": {"conditions": [cond("ResourcesApplied", "True", "Applied", 200, "")]}
            }),
            json!({
                "kind": "ClusterResourceSet", "metadata": {"name": "cloud-config", "namespace": "default"},
                "status": {"conditions": [cond("ResourcesApplied", "False", "InternalError", 100, "ConfigMap cloud-config not found; waiting for it to be created")]}
            }),
        ];
        insta::assert_snapshot!(render(&o, &options("", true, false)));
    }

    #[test]
    fn with_templates() {
        let mut o = options("", true, false);
        o.show_templates = true;
        insta::assert_snapshot!(render(&objects(), &o));
    }

    #[test]
    fn with_conditions() {
        insta::assert_snapshot!(render(
            &objects(),
            &options("KubeadmControlPlane,Cluster+", true, false)
        ));
    }

    #[test]
    fn a_protected_cluster_says_so() {
        let mut protected = objects();
        protected.cluster["metadata"]["annotations"] =
            json!({(crate::api::DELETION_PROTECTION_ANNOTATION): "true"});
        let text = render(&protected, &options("", false, false));
        let row = text.lines().nth(1).unwrap();
        assert!(
            row.starts_with("Cluster default/c1 (deletion protected)"),
            "{text}"
        );
        assert!(!render(&objects(), &options("", false, false)).contains("protected"));
    }

    #[test]
    fn colours_follow_polarity_and_keep_columns_aligned() {
        let mut o = options("KubeadmControlPlane", true, false);
        o.color = true;
        let text = render(&objects(), &o);
        assert!(text.contains("\x1b[31mFalse\x1b[0m"), "NotAvailable in red");
        assert!(
            text.contains("\x1b[32mFalse\x1b[0m"),
            "RollingOut False is good news: green"
        );
        assert!(text.contains("\x1b[36mEtcdClusterHealthy\x1b[0m"));
        let plain: String = render(&objects(), &options("KubeadmControlPlane", true, false));
        let strip = |t: &str| {
            t.replace("\x1b[31m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[33m", "")
                .replace("\x1b[36m", "")
                .replace("\x1b[0m", "")
        };
        assert_eq!(strip(&text), plain);
    }

    #[test]
    fn the_tree_as_data() {
        let d = data(&objects(), &options("", true, false));
        assert_eq!(d["object"]["kind"], "Cluster");
        assert_eq!(d["replicas"], "3/3");
        let names: Vec<&str> = d["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "InMemoryCluster default/c1",
                "KubeadmControlPlane default/c1-cp, v1.30.4",
                "MachineHealthChecks",
                "Workers"
            ]
        );
        let group = &d["children"][3]["children"][0]["children"][0];
        assert_eq!(
            group["members"],
            serde_json::json!(["c1-md-0-x-1", "c1-md-0-x-2"])
        );
    }

    #[test]
    fn durations_read_like_kubectl_ages() {
        for (s, text) in [
            (5, "5s"),
            (119, "119s"),
            (123, "2m3s"),
            (600, "10m"),
            (2760, "46m"),
            (4 * 3600 + 60, "4h1m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
        ] {
            assert_eq!(human_duration(s), text);
        }
    }

    #[test]
    fn messages_wrap_below_100_columns_keeping_item_indentation() {
        let long = format!("* MachineDeployment md-0: {}", "word ".repeat(30));
        let lines = wrap(&long, 100);
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| l.len() < 100), "{lines:?}");
        assert!(lines[1].starts_with("  word"), "{lines:?}");
        assert_eq!(wrap("a\n  b", 100), ["a", "  b"]);
    }

    #[test]
    fn show_conditions_values() {
        let f = ConditionFilter::parse_list("all+,Machine/m1").unwrap();
        assert!(f[0].non_zero_only && f[0].matches("Cluster", "c"));
        assert!(f[1].matches("machine", "m1") && !f[1].matches("Machine", "m2"));
        assert_eq!(
            ConditionFilter::parse_list("all, Machine").unwrap_err(),
            "invalid --show-conditions value \"all, Machine\": whitespace is not allowed"
        );
    }
}
