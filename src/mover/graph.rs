//! The object graph of a move, as clusterctl builds it: which objects go, in which order, and
//! which stay and why. Pure: fed the discovered types and objects, it does no I/O.
//!
//! Nodes are objects keyed by uid; edges are owner references and clusterctl's soft ownership
//! (a Cluster's `<cluster>-<purpose>` Secrets, a ClusterClass's Clusters). Every Cluster,
//! ClusterClass and ClusterResourceSet (and objects of types or with labels saying
//! `move-hierarchy`) is a root; an object moves when a root reaches it, or when it or its type
//! says `move`. Unlike clusterctl, an object that would move but whose owner does not is
//! reported, not silently left behind.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The label on CRDs (and objects) clusterctl moves whatever owns them.
pub const MOVE_LABEL: &str = "clusterctl.cluster.x-k8s.io/move";
/// The label on CRDs (and objects) whose objects are moved with everything they own.
pub const MOVE_HIERARCHY_LABEL: &str = "clusterctl.cluster.x-k8s.io/move-hierarchy";
/// An object with this annotation is not ready to move: the move waits until it goes.
pub const BLOCK_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/block-move";
/// Put on source objects just before the move deletes them, so their controllers can tell.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// The Secrets a Cluster owns by name (`<cluster>-<purpose>`) rather than by reference.
const CLUSTER_SECRET_PURPOSES: [&str; 6] = [
    "kubeconfig",
    "ca",
    "etcd",
    "sa",
    "proxy",
    "apiserver-etcd-client",
];

/// A kind the move considers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Type {
    /// The version objects are read and written at (the CRD's storage version).
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Moved with everything it owns (a root).
    pub move_hierarchy: bool,
    /// Moved even when no root reaches it.
    pub force_move: bool,
}

impl Type {
    /// A type from its CRD's group, storage version, names, scope and labels.
    pub fn from_crd(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        labels: &BTreeMap<String, String>,
    ) -> Type {
        let move_hierarchy = (group == "cluster.x-k8s.io"
            && matches!(kind, "Cluster" | "ClusterClass"))
            || (group == "addons.cluster.x-k8s.io" && kind == "ClusterResourceSet")
            || labels.contains_key(MOVE_HIERARCHY_LABEL);
        Type {
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            move_hierarchy,
            force_move: move_hierarchy || labels.contains_key(MOVE_LABEL),
        }
    }

    /// Secrets and ConfigMaps, which move when something moved owns them.
    pub fn core(kind: &str) -> Type {
        Type {
            api_version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
            move_hierarchy: false,
            force_move: false,
        }
    }

    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

/// Which object, as a person names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// Whether it is Cluster API's own `kind` (group `cluster.x-k8s.io`): a Cluster or a
    /// ClusterClass, say, rather than a provider's kind of the same name.
    pub fn is_core(&self, kind: &str) -> bool {
        self.kind == kind && self.api_version.starts_with("cluster.x-k8s.io/")
    }

    /// `namespace/name`, or the name of a cluster-scoped object.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub object: ObjectRef,
    pub uid: String,
    /// The uids of its owner references.
    pub owners: Vec<String>,
    /// Owners by clusterctl's naming rules: not written as owner references in the target.
    pub soft_owners: BTreeSet<String>,
    /// Set for owners known only from a reference: not listed among the kinds considered.
    pub listed: bool,
    pub force_move: bool,
    pub move_hierarchy: bool,
    pub blocking: bool,
    /// Cluster-scoped: copied when missing, never deleted from the source.
    pub global: bool,
    /// The roots that reach it.
    pub tenants: BTreeSet<String>,
    /// Copied but kept in the source (a ClusterClass other Clusters still use, and what it owns).
    pub keep_in_source: bool,
    /// A Cluster's `spec.topology.classRef`, as (namespace, name).
    class: Option<(String, String)>,
    /// A ClusterResourceSetBinding's `spec.clusterName`: the Cluster it records, which
    /// soft-owns it as clusterctl's graph has it.
    bound_cluster: Option<String>,
}

/// Why an object stays in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Staying {
    /// Nothing moved owns or names it (a Secret, a ConfigMap, a template no Cluster uses).
    Unlinked,
    /// It would move, but this owner does not (not of a kind the move considers, or not moved).
    OwnerNotMoved(String),
    /// It belongs to a Cluster not chosen with `--cluster`.
    OtherCluster,
}

impl std::fmt::Display for Staying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Staying::Unlinked => write!(f, "not linked to any moved Cluster"),
            Staying::OwnerNotMoved(owner) => write!(f, "its owner {owner} is not moved"),
            Staying::OtherCluster => write!(f, "belongs to a Cluster not chosen with --cluster"),
        }
    }
}

/// What a move does: groups created in order (owners before what they own) and deleted in
/// reverse, and what stays in the source.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub groups: Vec<Vec<Node>>,
    /// Objects that would have moved but cannot: their owner is not moved.
    pub stranded: Vec<(ObjectRef, Staying)>,
    /// Objects that stay, as they should (reported with `--dry-run`).
    pub staying: Vec<(ObjectRef, Staying)>,
}

impl Plan {
    /// The moved objects of Cluster API's own `kind` (Clusters, ClusterClasses).
    pub fn core(&self, kind: &str) -> Vec<ObjectRef> {
        self.nodes()
            .filter(|n| n.object.is_core(kind))
            .map(|n| n.object.clone())
            .collect()
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.groups.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.groups.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Default)]
pub struct Graph {
    nodes: BTreeMap<String, Node>,
}

fn string_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, k| v.get(k))?.as_str()
}

impl Graph {
    /// Adds a listed object of `type_`.
    pub fn add(&mut self, type_: &Type, object: &Value) {
        let meta = &object["metadata"];
        let Some(uid) = meta["uid"].as_str() else {
            return;
        };
        let labels = meta["labels"].as_object();
        let has_label = |l: &str| labels.is_some_and(|m| m.contains_key(l));
        let owners = meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let owner_uid = r["uid"].as_str()?.to_string();
                // An owner not (yet) listed is known from the reference alone.
                self.nodes.entry(owner_uid.clone()).or_insert_with(|| Node {
                    object: ObjectRef {
                        api_version: r["apiVersion"].as_str().unwrap_or_default().into(),
                        kind: r["kind"].as_str().unwrap_or_default().into(),
                        plural: String::new(),
                        namespace: None,
                        name: r["name"].as_str().unwrap_or_default().into(),
                    },
                    uid: owner_uid.clone(),
                    owners: Vec::new(),
                    soft_owners: BTreeSet::new(),
                    listed: false,
                    force_move: false,
                    move_hierarchy: false,
                    blocking: false,
                    global: false,
                    tenants: BTreeSet::new(),
                    keep_in_source: false,
                    class: None,
                    bound_cluster: None,
                });
                Some(owner_uid)
            })
            .collect();
        let object_ref = ObjectRef {
            api_version: type_.api_version.clone(),
            kind: type_.kind.clone(),
            plural: type_.plural.clone(),
            namespace: meta["namespace"]
                .as_str()
                .filter(|_| type_.namespaced)
                .map(str::to_string),
            name: meta["name"].as_str().unwrap_or_default().into(),
        };
        let class = object_ref
            .is_core("Cluster")
            .then(|| class_in_use(object))
            .flatten();
        let bound_cluster = (object_ref.kind == "ClusterResourceSetBinding"
            && object_ref
                .api_version
                .starts_with("addons.cluster.x-k8s.io/"))
        .then(|| string_at(object, &["spec", "clusterName"]).map(str::to_string))
        .flatten();
        let node = Node {
            object: object_ref,
            uid: uid.to_string(),
            owners,
            soft_owners: BTreeSet::new(),
            listed: true,
            force_move: type_.force_move
                || has_label(MOVE_LABEL)
                || has_label(MOVE_HIERARCHY_LABEL),
            move_hierarchy: type_.move_hierarchy || has_label(MOVE_HIERARCHY_LABEL),
            blocking: meta["annotations"]
                .as_object()
                .is_some_and(|a| a.contains_key(BLOCK_MOVE_ANNOTATION)),
            global: !type_.namespaced,
            tenants: BTreeSet::new(),
            keep_in_source: false,
            class,
            bound_cluster,
        };
        self.nodes.insert(uid.to_string(), node);
    }

    fn find(&self, kind: &str, namespace: &str, name: &str) -> Option<String> {
        self.nodes
            .values()
            .find(|n| {
                n.listed
                    && n.object.is_core(kind)
                    && n.object.name == name
                    && n.object.namespace.as_deref() == Some(namespace)
            })
            .map(|n| n.uid.clone())
    }

    /// clusterctl's soft ownership: a Cluster's Secrets by name, a ClusterClass's Clusters.
    fn set_soft_ownership(&mut self) {
        let mut links = Vec::new();
        for n in self.nodes.values().filter(|n| n.listed) {
            let ns = n.object.namespace.as_deref().unwrap_or_default();
            if n.object.kind == "Secret" && n.object.api_version == "v1" && n.owners.is_empty() {
                // The purpose is after the last '-', as clusterctl splits it.
                if let Some((cluster, purpose)) = n.object.name.rsplit_once('-')
                    && CLUSTER_SECRET_PURPOSES.contains(&purpose)
                    && let Some(owner) = self.find("Cluster", ns, cluster)
                {
                    links.push((n.uid.clone(), owner));
                }
            }
            if let Some((class_ns, class)) = &n.class
                && let Some(owner) = self.find("ClusterClass", class_ns, class)
            {
                links.push((n.uid.clone(), owner));
            }
            if let Some(cluster) = &n.bound_cluster
                && let Some(owner) = self.find("Cluster", ns, cluster)
            {
                links.push((n.uid.clone(), owner));
            }
        }
        for (child, owner) in links {
            if let Some(n) = self.nodes.get_mut(&child) {
                n.soft_owners.insert(owner);
            }
        }
    }

    /// Children by owner uid, hard and soft.
    fn children(&self) -> BTreeMap<String, Vec<String>> {
        let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for n in self.nodes.values() {
            for owner in n.owners.iter().chain(&n.soft_owners) {
                children
                    .entry(owner.clone())
                    .or_default()
                    .push(n.uid.clone());
            }
        }
        children
    }

    /// Marks every object a root reaches with that root.
    fn set_tenants(&mut self) {
        let children = self.children();
        let roots: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.listed && n.move_hierarchy)
            .map(|n| n.uid.clone())
            .collect();
        for root in roots {
            let mut stack = vec![root.clone()];
            let mut seen = BTreeSet::new();
            while let Some(uid) = stack.pop() {
                // An owner-reference cycle is walked once.
                if !seen.insert(uid.clone()) {
                    continue;
                }
                if let Some(n) = self.nodes.get_mut(&uid) {
                    // Another root (a ClusterClass's Cluster) is its own tenant: a walk stops
                    // there, so that `--cluster` can take one Cluster of a class.
                    if uid != root && n.listed && n.move_hierarchy {
                        continue;
                    }
                    n.tenants.insert(root.clone());
                }
                stack.extend(children.get(&uid).into_iter().flatten().cloned());
            }
        }
    }

    /// The plan for the Clusters named in `only` (every Cluster when empty): what moves, in
    /// which order, and what stays. `all_classes_in_use` are the (namespace, classRef) of
    /// every Cluster in the source, in any namespace, to keep a ClusterClass that Clusters not
    /// moved still use.
    pub fn plan(mut self, only: &[String], all_classes_in_use: &[(String, String)]) -> Plan {
        self.set_soft_ownership();
        self.set_tenants();
        let cluster_root = |n: &Node| n.object.is_core("Cluster");
        // The roots chosen: the named Clusters and the ClusterClasses they use, or every root.
        let chosen: BTreeSet<String> = if only.is_empty() {
            self.nodes
                .values()
                .filter(|n| n.listed && n.move_hierarchy)
                .map(|n| n.uid.clone())
                .collect()
        } else {
            let clusters: Vec<&Node> = self
                .nodes
                .values()
                .filter(|n| cluster_root(n) && only.contains(&n.object.name))
                .collect();
            let mut chosen: BTreeSet<String> = clusters.iter().map(|n| n.uid.clone()).collect();
            chosen.extend(clusters.iter().flat_map(|n| n.soft_owners.iter().cloned()));
            chosen
        };
        // A ClusterClass that Clusters staying behind (or in other namespaces) use is copied
        // and kept, with what it owns.
        let moved_classes: Vec<(String, String)> = self
            .nodes
            .values()
            .filter(|n| cluster_root(n) && chosen.contains(&n.uid))
            .filter_map(|n| n.class.clone())
            .collect();
        let mut remaining_uses: Vec<(String, String)> = all_classes_in_use.to_vec();
        for used in &moved_classes {
            if let Some(i) = remaining_uses.iter().position(|u| u == used) {
                remaining_uses.remove(i);
            }
        }
        let kept_classes: BTreeSet<String> = self
            .nodes
            .values()
            .filter(|n| n.object.is_core("ClusterClass") && chosen.contains(&n.uid))
            .filter(|n| {
                let key = (
                    n.object.namespace.clone().unwrap_or_default(),
                    n.object.name.clone(),
                );
                remaining_uses.contains(&key)
            })
            .map(|n| n.uid.clone())
            .collect();

        let mut plan = Plan::default();
        let mut moving: BTreeSet<String> = BTreeSet::new();
        for n in self.nodes.values_mut() {
            if !n.listed {
                continue;
            }
            let reached = n.tenants.iter().any(|t| chosen.contains(t));
            let in_selection = only.is_empty() || reached || n.global;
            if (reached || n.force_move) && in_selection {
                moving.insert(n.uid.clone());
                n.keep_in_source = n.tenants.iter().all(|t| kept_classes.contains(t))
                    && n.tenants.iter().any(|t| kept_classes.contains(t));
            } else if !n.tenants.is_empty() || n.force_move {
                plan.staying.push((n.object.clone(), Staying::OtherCluster));
            } else {
                plan.staying.push((n.object.clone(), Staying::Unlinked));
            }
        }

        // Owners first: a group holds what all of whose owners are in earlier groups. What is
        // never placed has an owner that is not moved (or an owner cycle).
        let mut placed: BTreeSet<String> = BTreeSet::new();
        loop {
            let group: Vec<String> = moving
                .iter()
                .filter(|uid| !placed.contains(*uid))
                .filter(|uid| {
                    let n = &self.nodes[*uid];
                    n.owners
                        .iter()
                        .chain(&n.soft_owners)
                        .all(|o| placed.contains(o))
                })
                .cloned()
                .collect();
            if group.is_empty() {
                break;
            }
            placed.extend(group.iter().cloned());
            plan.groups
                .push(group.iter().map(|uid| self.nodes[uid].clone()).collect());
        }
        for uid in moving.iter().filter(|uid| !placed.contains(*uid)) {
            let n = &self.nodes[uid];
            let missing = n
                .owners
                .iter()
                .chain(&n.soft_owners)
                .find(|o| !moving.contains(*o))
                .or_else(|| n.owners.first())
                .and_then(|o| self.nodes.get(o))
                .map(|o| o.object.to_string())
                .unwrap_or_else(|| "(an owner cycle)".into());
            plan.stranded
                .push((n.object.clone(), Staying::OwnerNotMoved(missing)));
        }
        plan.staying.sort_by(|a, b| a.0.cmp(&b.0));
        plan.stranded.sort_by(|a, b| a.0.cmp(&b.0));
        plan
    }
}

/// The (namespace, classRef name) of a Cluster using a ClusterClass, if it does.
pub fn class_in_use(cluster: &Value) -> Option<(String, String)> {
    let name = string_at(cluster, &["spec", "topology", "classRef", "name"])?;
    let ns = string_at(cluster, &["spec", "topology", "classRef", "namespace"])
        .filter(|n| !n.is_empty())
        .or_else(|| string_at(cluster, &["metadata", "namespace"]))?;
    Some((ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd_type(group: &str, kind: &str) -> Type {
        Type::from_crd(
            group,
            "v1beta2",
            kind,
            &format!("{}s", kind.to_lowercase()),
            true,
            &BTreeMap::new(),
        )
    }

    fn object(name: &str, owners: &[(&str, &str)]) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(kind, name)| json!({"apiVersion": "x/v1", "kind": kind, "name": name, "uid": format!("uid-{name}"), "controller": true}))
            .collect();
        json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "ownerReferences": refs}})
    }

    struct Fixture {
        graph: Graph,
        classes: Vec<(String, String)>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                graph: Graph::default(),
                classes: Vec::new(),
            }
        }
        fn add(&mut self, type_: &Type, object: Value) -> &mut Self {
            if let Some(c) = class_in_use(&object) {
                self.classes.push(c);
            }
            self.graph.add(type_, &object);
            self
        }
        fn plan(self, only: &[&str]) -> Plan {
            let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            self.graph.plan(&only, &self.classes)
        }
    }

    fn names(group: &[Node]) -> Vec<String> {
        let mut names: Vec<String> = group.iter().map(|n| n.object.name.clone()).collect();
        names.sort();
        names
    }

    /// One cluster as the in-memory flavor makes it, and things that are not part of it.
    fn two_clusters() -> Fixture {
        let cluster = crd_type("cluster.x-k8s.io", "Cluster");
        let kcp = crd_type("controlplane.cluster.x-k8s.io", "KubeadmControlPlane");
        let machine = crd_type("cluster.x-k8s.io", "Machine");
        let infra = crd_type("infrastructure.cluster.x-k8s.io", "InMemoryMachine");
        let template = crd_type("infrastructure.cluster.x-k8s.io", "InMemoryMachineTemplate");
        let secret = Type::core("Secret");
        let config_map = Type::core("ConfigMap");
        let mut f = Fixture::new();
        for c in ["a", "b"] {
            f.add(&cluster, object(c, &[]))
                .add(&kcp, object(&format!("{c}-cp"), &[("Cluster", c)]))
                .add(
                    &machine,
                    object(&format!("{c}-m"), &[("KCP", &format!("{c}-cp"))]),
                )
                .add(
                    &infra,
                    object(&format!("{c}-im"), &[("Machine", &format!("{c}-m"))]),
                )
                .add(&secret, object(&format!("{c}-kubeconfig"), &[]))
                .add(
                    &secret,
                    object(&format!("{c}-m-data"), &[("Machine", &format!("{c}-m"))]),
                );
        }
        f.add(&secret, object("unrelated-token", &[]))
            .add(&secret, object("a-apiserver-etcd-client", &[]))
            .add(&config_map, object("loose", &[]))
            .add(&template, object("shared", &[]));
        f
    }

    #[test]
    fn owners_go_first_and_every_piece_of_a_cluster_moves() {
        let plan = two_clusters().plan(&[]);
        let groups: Vec<Vec<String>> = plan.groups.iter().map(|g| names(g)).collect();
        assert_eq!(
            groups,
            vec![
                vec!["a", "b"],
                vec!["a-cp", "a-kubeconfig", "b-cp", "b-kubeconfig"],
                vec!["a-m", "b-m"],
                vec!["a-im", "a-m-data", "b-im", "b-m-data"],
            ]
        );
        assert_eq!(plan.core("Cluster").len(), 2);
        assert!(plan.stranded.is_empty());
        let mut staying: Vec<String> = plan
            .staying
            .iter()
            .map(|(o, why)| format!("{o}: {why}"))
            .collect();
        staying.sort();
        assert_eq!(
            staying,
            vec![
                // clusterctl splits at the last '-': "a-apiserver-etcd" is no Cluster.
                "ConfigMap ns/loose: not linked to any moved Cluster",
                "InMemoryMachineTemplate ns/shared: not linked to any moved Cluster",
                "Secret ns/a-apiserver-etcd-client: not linked to any moved Cluster",
                "Secret ns/unrelated-token: not linked to any moved Cluster",
            ]
        );
    }

    #[test]
    fn one_cluster_of_two() {
        let plan = two_clusters().plan(&["b"]);
        let moved: Vec<String> = plan.nodes().map(|n| n.object.name.clone()).collect();
        assert!(moved.iter().all(|n| n.starts_with('b')), "{moved:?}");
        assert_eq!(moved.len(), 6);
        let other: BTreeSet<&str> = plan
            .staying
            .iter()
            .filter(|(_, why)| *why == Staying::OtherCluster)
            .map(|(o, _)| o.name.as_str())
            .collect();
        assert_eq!(
            other,
            BTreeSet::from(["a", "a-cp", "a-im", "a-kubeconfig", "a-m", "a-m-data"])
        );
    }

    #[test]
    fn an_object_whose_owner_does_not_move_is_reported() {
        let mut f = two_clusters();
        let machine = crd_type("cluster.x-k8s.io", "Machine");
        // Owned by a Machine and by something of a kind the move does not consider.
        let mut orphan = object("a-extra", &[("KCP", "a-cp")]);
        orphan["metadata"]["ownerReferences"]
            .as_array_mut()
            .unwrap()
            .push(
                json!({"apiVersion": "other.io/v1", "kind": "Widget", "name": "w", "uid": "uid-w"}),
            );
        f.add(&machine, orphan);
        let plan = f.plan(&[]);
        assert_eq!(
            plan.stranded,
            vec![(
                ObjectRef {
                    api_version: "cluster.x-k8s.io/v1beta2".into(),
                    kind: "Machine".into(),
                    plural: "machines".into(),
                    namespace: Some("ns".into()),
                    name: "a-extra".into()
                },
                Staying::OwnerNotMoved("Widget w".into())
            )]
        );
        assert!(plan.nodes().all(|n| n.object.name != "a-extra"));
    }

    #[test]
    fn a_cluster_class_still_in_use_is_copied_and_kept() {
        let cluster = crd_type("cluster.x-k8s.io", "Cluster");
        let class = crd_type("cluster.x-k8s.io", "ClusterClass");
        let template = crd_type("infrastructure.cluster.x-k8s.io", "DockerClusterTemplate");
        let mut f = Fixture::new();
        f.add(&class, object("quick-start", &[])).add(
            &template,
            object("qs-cluster", &[("ClusterClass", "quick-start")]),
        );
        for c in ["a", "b"] {
            let mut o = object(c, &[]);
            o["spec"] = json!({"topology": {"classRef": {"name": "quick-start"}}});
            f.add(&cluster, o);
        }
        let plan = f.plan(&["a"]);
        let groups: Vec<Vec<String>> = plan.groups.iter().map(|g| names(g)).collect();
        assert_eq!(groups, vec![vec!["quick-start"], vec!["a", "qs-cluster"]]);
        let kept: Vec<&str> = plan
            .nodes()
            .filter(|n| n.keep_in_source)
            .map(|n| n.object.name.as_str())
            .collect();
        assert_eq!(kept, vec!["quick-start", "qs-cluster"]);

        // Moving every Cluster that uses it moves it.
        let mut f = Fixture::new();
        f.add(&class, object("quick-start", &[]));
        let mut o = object("a", &[]);
        o["spec"] = json!({"topology": {"classRef": {"name": "quick-start"}}});
        f.add(&cluster, o);
        assert!(f.plan(&[]).nodes().all(|n| !n.keep_in_source));
    }

    #[test]
    fn a_resource_set_binding_moves_after_its_cluster_and_its_set() {
        let cluster = crd_type("cluster.x-k8s.io", "Cluster");
        let set = crd_type("addons.cluster.x-k8s.io", "ClusterResourceSet");
        let binding = crd_type("addons.cluster.x-k8s.io", "ClusterResourceSetBinding");
        let mut f = Fixture::new();
        f.add(&set, object("cni", &[]))
            .add(
                &Type::core("ConfigMap"),
                object("cni-manifests", &[("ClusterResourceSet", "cni")]),
            )
            .add(&cluster, object("a", &[]));
        let mut b = object("a-binding", &[("ClusterResourceSet", "cni")]);
        b["spec"] = json!({"clusterName": "a"});
        f.add(&binding, b);
        let plan = f.plan(&[]);
        let groups: Vec<Vec<String>> = plan.groups.iter().map(|g| names(g)).collect();
        assert_eq!(
            groups,
            vec![vec!["a", "cni"], vec!["a-binding", "cni-manifests"]]
        );
        let moved = plan.nodes().find(|n| n.object.name == "a-binding").unwrap();
        assert_eq!(
            moved.tenants.len(),
            2,
            "both the Cluster and the set reach it"
        );
    }

    #[test]
    fn labels_make_objects_move() {
        let identity = Type::from_crd(
            "infrastructure.cluster.x-k8s.io",
            "v1beta2",
            "DockerClusterIdentity",
            "dockerclusteridentities",
            false,
            &BTreeMap::from([(MOVE_HIERARCHY_LABEL.to_string(), String::new())]),
        );
        let secret = Type::core("Secret");
        let mut f = Fixture::new();
        let mut id = object("id", &[]);
        id["metadata"]["namespace"] = Value::Null;
        f.add(&identity, id).add(
            &secret,
            object("id-credentials", &[("DockerClusterIdentity", "id")]),
        );
        let mut labelled = object("settings", &[]);
        labelled["metadata"]["labels"] = json!({MOVE_LABEL: ""});
        f.add(&Type::core("ConfigMap"), labelled);
        let plan = f.plan(&[]);
        let moved: BTreeMap<String, bool> = plan
            .nodes()
            .map(|n| (n.object.name.clone(), n.global))
            .collect();
        assert_eq!(
            moved,
            BTreeMap::from([
                ("id".to_string(), true),
                ("id-credentials".to_string(), false),
                ("settings".to_string(), false),
            ])
        );
    }
}
