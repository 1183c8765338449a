//! The Node authorizer and the NodeRestriction admission plugin, as kube-apiserver runs them
//! with `--authorization-mode=Node,RBAC`: a kubelet (user `system:node:<name>` in group
//! `system:nodes`) reads only the Secrets, ConfigMaps, PersistentVolumeClaims and
//! ServiceAccount tokens that the Pods bound to its Node use, only its own Lease, and otherwise
//! what kube's `NodeRules` give every node; it writes only its own Node, the status of its own
//! Pods and its own mirror Pods. What the Node authorizer does not allow goes on to RBAC (kubeadm
//! binds `system:nodes` to the `kubelet-config` and `kubeadm-config` ConfigMaps there).
//!
//! One addition to kube's rules: capictl's node agent plays kube-proxy and CoreDNS for its Node
//! as the node itself, so nodes may also list and watch EndpointSlices (they read every Pod and
//! Service already).
//!
//! [`authorize`] and [`restrict`] decide, purely; the API server gives them the request and the
//! Pods bound to the Node.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::User;
use super::authz::{Target, rule_allows};

/// The group every kubelet's credentials carry.
pub const NODES_GROUP: &str = "system:nodes";
const NODE_USER_PREFIX: &str = "system:node:";
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The annotation a kubelet puts on the mirror Pod of a static Pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The Node whose kubelet `user` is, as the Node authorizer recognises one.
pub fn node_of(user: &User) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    (!name.is_empty() && user.groups.iter().any(|g| g == NODES_GROUP)).then_some(name)
}

/// What the Pods bound to one Node use, each as (namespace, name).
#[derive(Debug, Default, PartialEq)]
pub struct Graph {
    pub secrets: BTreeSet<(String, String)>,
    pub config_maps: BTreeSet<(String, String)>,
    pub claims: BTreeSet<(String, String)>,
    pub service_accounts: BTreeSet<(String, String)>,
}

/// Whether a stored Pod (its JSON) is bound to `node`, read without decoding the rest of it:
/// the graph is asked on every kubelet read of a Secret or ConfigMap and every token request,
/// and a node's Pods are a few of the store's.
pub fn bound_to(pod_json: &[u8], node: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Pod {
        #[serde(default)]
        spec: Spec,
    }
    #[derive(serde::Deserialize, Default)]
    struct Spec {
        #[serde(rename = "nodeName", default)]
        node_name: Option<String>,
    }
    serde_json::from_slice::<Pod>(pod_json).is_ok_and(|p| p.spec.node_name.as_deref() == Some(node))
}

impl Graph {
    /// The references of `pods` bound to `node` (the others are skipped).
    pub fn of<'a>(node: &str, pods: impl IntoIterator<Item = &'a Value>) -> Graph {
        let mut graph = Graph::default();
        for pod in pods {
            if pod["spec"]["nodeName"].as_str() != Some(node) {
                continue;
            }
            let namespace = pod["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let spec = &pod["spec"];
            let add = |set: &mut BTreeSet<(String, String)>, name: &Value| {
                if let Some(name) = name.as_str().filter(|n| !n.is_empty()) {
                    set.insert((namespace.clone(), name.to_string()));
                }
            };
            let account = match &spec["serviceAccountName"] {
                Value::String(s) if !s.is_empty() => json!(s),
                _ => json!("default"),
            };
            add(&mut graph.service_accounts, &account);
            for secret in each(&spec["imagePullSecrets"]) {
                add(&mut graph.secrets, &secret["name"]);
            }
            for volume in each(&spec["volumes"]) {
                add(&mut graph.secrets, &volume["secret"]["secretName"]);
                add(&mut graph.config_maps, &volume["configMap"]["name"]);
                add(
                    &mut graph.claims,
                    &volume["persistentVolumeClaim"]["claimName"],
                );
                for source in each(&volume["projected"]["sources"]) {
                    add(&mut graph.secrets, &source["secret"]["name"]);
                    add(&mut graph.config_maps, &source["configMap"]["name"]);
                }
            }
            for list in ["initContainers", "containers", "ephemeralContainers"] {
                for container in each(&spec[list]) {
                    for from in each(&container["envFrom"]) {
                        add(&mut graph.secrets, &from["secretRef"]["name"]);
                        add(&mut graph.config_maps, &from["configMapRef"]["name"]);
                    }
                    for var in each(&container["env"]) {
                        let from = &var["valueFrom"];
                        add(&mut graph.secrets, &from["secretKeyRef"]["name"]);
                        add(&mut graph.config_maps, &from["configMapKeyRef"]["name"]);
                    }
                }
            }
        }
        graph
    }
}

fn each(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

/// What the Node authorizer says to a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Not the Node authorizer's to allow: RBAC decides (and says why not).
    NoOpinion,
}

/// kube's `NodeRules`: what every node may do beyond the kinds the graph decides.
pub fn node_rules() -> &'static [Value] {
    static RULES: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| {
            json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
        };
        let read = ["get", "list", "watch"];
        vec![
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
            rule(
                &["authorization.k8s.io"],
                &["subjectaccessreviews", "localsubjectaccessreviews"],
                &["create"],
            ),
            rule(&[""], &["services"], &read),
            rule(&[""], &["nodes"], &["create", "get", "list", "watch"]),
            rule(&[""], &["nodes/status", "nodes"], &["update", "patch"]),
            rule(&[""], &["events"], &["create", "update", "patch"]),
            rule(&["events.k8s.io"], &["events"], &["create", "update", "patch"]),
            rule(&[""], &["pods"], &read),
            rule(&[""], &["pods"], &["create", "delete"]),
            rule(&[""], &["pods/status"], &["update", "patch"]),
            rule(&[""], &["pods/eviction"], &["create"]),
            rule(&[""], &["endpoints"], &["get"]),
            rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            ),
            rule(&["storage.k8s.io"], &["csidrivers"], &read),
            rule(&["node.k8s.io"], &["runtimeclasses"], &read),
            // capictl's node agent serves Services and cluster DNS for its Node.
            rule(&["discovery.k8s.io"], &["endpointslices"], &["list", "watch"]),
        ]
    })
}

/// The Node authorizer's decision on `node`'s request; `graph` is asked only for the kinds it
/// decides.
pub fn authorize(
    node: &str,
    verb: &str,
    target: &Target<'_>,
    graph: impl FnOnce() -> Graph,
) -> Decision {
    let allow = |yes: bool| {
        if yes {
            Decision::Allow
        } else {
            Decision::NoOpinion
        }
    };
    let Target::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
    } = target
    else {
        return Decision::NoOpinion;
    };
    let key = |name: &str| (namespace.unwrap_or_default().to_string(), name.to_string());
    match (*group, *resource, *subresource) {
        ("", "secrets" | "configmaps" | "persistentvolumeclaims", None) => {
            // One object at a time, and only what this Node's Pods use.
            let Some(name) = name.filter(|_| verb == "get") else {
                return Decision::NoOpinion;
            };
            let graph = graph();
            let used = match *resource {
                "secrets" => &graph.secrets,
                "configmaps" => &graph.config_maps,
                _ => &graph.claims,
            };
            allow(used.contains(&key(name)))
        }
        ("", "serviceaccounts", Some("token")) => match name.filter(|_| verb == "create") {
            Some(name) => allow(graph().service_accounts.contains(&key(name))),
            None => Decision::NoOpinion,
        },
        ("coordination.k8s.io", "leases", None) => allow(
            matches!(verb, "get" | "create" | "update" | "patch" | "delete")
                && *namespace == Some(LEASE_NAMESPACE)
                && (verb == "create" || *name == Some(node)),
        ),
        _ => allow(node_rules().iter().any(|r| rule_allows(r, verb, target))),
    }
}

/// A write a node makes, as NodeRestriction sees it.
pub struct Write<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    /// `create`, `update` (a patch too) or `delete`.
    pub operation: &'a str,
    /// The object before, for updates and deletions.
    pub old: Option<&'a Value>,
    /// The object after, for creations and updates.
    pub new: Option<&'a Value>,
}

/// NodeRestriction: whether `node` may make this write; Err says why not, in the plugin's
/// words.
pub fn restrict(node: &str, write: &Write<'_>) -> Result<(), String> {
    let object = write.new.or(write.old).unwrap_or(&Value::Null);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let bound =
        |pod: Option<&Value>| pod.is_some_and(|p| p["spec"]["nodeName"].as_str() == Some(node));
    match (write.group, write.resource, write.subresource) {
        ("", "nodes", _) if name != node => Err(format!(
            "node \"{node}\" is not allowed to modify node \"{name}\""
        )),
        ("", "pods", None) => match write.operation {
            "create" => {
                let mirror = object["metadata"]["annotations"][MIRROR_ANNOTATION].is_string();
                if !mirror {
                    Err(format!(
                        "pod does not have \"{MIRROR_ANNOTATION}\" annotation, node \"{node}\" can only create mirror pods"
                    ))
                } else if !bound(write.new) {
                    Err(format!(
                        "node \"{node}\" can only create pods with spec.nodeName set to itself"
                    ))
                } else {
                    Ok(())
                }
            }
            "delete" if !bound(write.old) => Err(format!(
                "node \"{node}\" can only delete pods with spec.nodeName set to itself"
            )),
            "delete" => Ok(()),
            _ => Err(format!("node \"{node}\" can only update pod status")),
        },
        ("", "pods", Some("status")) if !bound(write.old) => Err(format!(
            "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
        )),
        ("coordination.k8s.io", "leases", None) if name != node => {
            Err(format!("node \"{node}\" can only access its own lease"))
        }
        _ => Ok(()),
    }
}

/// Why NodeRestriction refuses a kubelet's TokenRequest.
#[derive(Debug, PartialEq)]
pub enum TokenRefusal {
    Forbidden(String),
    /// The Pod the token would be bound to does not exist (its name).
    PodNotFound(String),
}

/// NodeRestriction on a kubelet's TokenRequest for ServiceAccount `account`: a node gets tokens
/// only bound to a Pod, named with its uid, that is scheduled on the node itself (`pod`: that
/// Pod as stored, None when there is none), as kube's plugin checks them. A kubelet's
/// credentials then mint no token that outlives its Pods or serves another node's.
pub fn restrict_token(
    node: &str,
    account: &str,
    request: &Value,
    pod: Option<&Value>,
) -> Result<(), TokenRefusal> {
    let forbidden = |why: &str| {
        TokenRefusal::Forbidden(format!("serviceaccounts \"{account}\" is forbidden: {why}"))
    };
    let reference = &request["spec"]["boundObjectRef"];
    let field = |k: &str| reference[k].as_str().unwrap_or_default();
    if field("apiVersion") != "v1" || field("kind") != "Pod" || field("name").is_empty() {
        return Err(forbidden("node requested token not bound to a pod"));
    }
    if field("uid").is_empty() {
        return Err(forbidden(
            "node requested token with a pod binding without a uid",
        ));
    }
    let pod = pod.ok_or_else(|| TokenRefusal::PodNotFound(field("name").to_string()))?;
    if pod["metadata"]["uid"].as_str() != Some(field("uid")) {
        return Err(forbidden(&format!(
            "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
            field("uid")
        )));
    }
    if pod["spec"]["nodeName"].as_str() != Some(node) {
        return Err(forbidden(
            "node requested token bound to a pod scheduled on a different node",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "nodeName": node,
                "serviceAccountName": "runner",
                "imagePullSecrets": [{"name": "registry"}],
                "volumes": [
                    {"name": "a", "secret": {"secretName": "tls"}},
                    {"name": "b", "configMap": {"name": "settings"}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "d", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}, {"serviceAccountToken": {"path": "token"}}]}},
                ],
                "containers": [{
                    "name": "app",
                    "envFrom": [{"secretRef": {"name": "env"}}],
                    "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "flags", "key": "x"}}}],
                }],
            }
        })
    }

    fn get<'a>(resource: &'a str, namespace: &'a str, name: &'a str) -> Target<'a> {
        Target::Resource {
            group: "",
            resource,
            subresource: None,
            namespace: Some(namespace),
            name: Some(name),
        }
    }

    #[test]
    fn a_stored_pod_is_bound_to_the_node_its_spec_names() {
        let json = |v: Value| serde_json::to_vec(&v).unwrap();
        assert!(bound_to(&json(pod("web", "n1")), "n1"));
        assert!(!bound_to(&json(pod("web", "n2")), "n1"));
        assert!(!bound_to(
            &json(json!({"metadata": {"name": "pending"}, "spec": {}})),
            "n1"
        ));
        assert!(!bound_to(
            &json(json!({"metadata": {"name": "bare"}})),
            "n1"
        ));
    }

    #[test]
    fn the_graph_holds_what_the_nodes_pods_use() {
        let pods = [pod("web", "n1"), pod("other", "n2")];
        let graph = Graph::of("n1", &pods);
        let names = |set: &BTreeSet<(String, String)>| {
            set.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&graph.secrets), ["env", "registry", "tls"]);
        assert_eq!(
            names(&graph.config_maps),
            ["flags", "kube-root-ca.crt", "settings"]
        );
        assert_eq!(names(&graph.claims), ["data"]);
        assert_eq!(names(&graph.service_accounts), ["runner"]);
        assert_eq!(Graph::of("n3", &pods), Graph::default());
    }

    fn res<'a>(
        group: &'a str,
        resource: &'a str,
        subresource: Option<&'a str>,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Target<'a> {
        Target::Resource {
            group,
            resource,
            subresource,
            namespace,
            name,
        }
    }

    #[test]
    fn a_node_reads_what_its_pods_use_and_what_node_rules_give() {
        use Decision::{Allow, NoOpinion};
        let pods = [pod("web", "n1"), pod("other", "n2")];
        let graph = || Graph::of("n1", &pods);
        let lease = |ns, name| res("coordination.k8s.io", "leases", None, Some(ns), Some(name));
        let token = |ns, name| res("", "serviceaccounts", Some("token"), Some(ns), Some(name));
        #[rustfmt::skip]
        let cases: &[(&str, Target<'_>, Decision)] = &[
            ("get", get("secrets", "team", "tls"), Allow),
            ("get", get("secrets", "other", "tls"), NoOpinion),
            ("get", get("secrets", "team", "db-password"), NoOpinion),
            ("get", get("configmaps", "team", "settings"), Allow),
            ("get", get("persistentvolumeclaims", "team", "data"), Allow),
            ("list", res("", "secrets", None, None, None), NoOpinion),
            ("create", token("team", "runner"), Allow),
            ("create", token("kube-system", "generic-garbage-collector"), NoOpinion),
            ("update", lease("kube-node-lease", "n1"), Allow),
            ("update", lease("kube-node-lease", "n2"), NoOpinion),
            ("update", lease("kube-system", "kube-controller-manager"), NoOpinion),
            ("list", res("", "pods", None, None, None), Allow),
            ("patch", res("", "nodes", Some("status"), None, Some("n1")), Allow),
            ("watch", res("discovery.k8s.io", "endpointslices", None, None, None), Allow),
            ("list", res("apps", "deployments", None, None, None), NoOpinion),
            ("get", Target::Path("/version"), NoOpinion),
        ];
        for (verb, target, want) in cases {
            assert_eq!(
                &authorize("n1", verb, target, graph),
                want,
                "{verb} {target:?}"
            );
        }
    }

    #[test]
    fn a_node_gets_tokens_only_for_its_own_pods() {
        let on_node = json!({"metadata": {"name": "web", "uid": "u1"}, "spec": {"nodeName": "n1"}});
        let elsewhere =
            json!({"metadata": {"name": "web", "uid": "u1"}, "spec": {"nodeName": "n2"}});
        let request = |reference: Value| json!({"spec": {"boundObjectRef": reference}});
        let pod_ref = json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u1"});
        let forbidden = |why: &str| {
            Err(TokenRefusal::Forbidden(format!(
                "serviceaccounts \"runner\" is forbidden: {why}"
            )))
        };
        let cases = [
            (request(pod_ref.clone()), Some(&on_node), Ok(())),
            (
                json!({"spec": {}}),
                Some(&on_node),
                forbidden("node requested token not bound to a pod"),
            ),
            (
                request(json!({"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u"})),
                Some(&on_node),
                forbidden("node requested token not bound to a pod"),
            ),
            (
                request(json!({"apiVersion": "v1", "kind": "Pod", "name": "web"})),
                Some(&on_node),
                forbidden("node requested token with a pod binding without a uid"),
            ),
            (
                request(pod_ref.clone()),
                None,
                Err(TokenRefusal::PodNotFound("web".into())),
            ),
            (
                request(json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "old"})),
                Some(&on_node),
                forbidden(
                    "the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated",
                ),
            ),
            (
                request(pod_ref),
                Some(&elsewhere),
                forbidden("node requested token bound to a pod scheduled on a different node"),
            ),
        ];
        for (asked, pod, expected) in cases {
            assert_eq!(
                restrict_token("n1", "runner", &asked, pod),
                expected,
                "{asked}"
            );
        }
    }

    #[test]
    fn node_restriction_keeps_a_node_to_its_own_objects() {
        let mine = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "n1"}});
        let theirs = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "n2"}});
        let mirror = json!({"metadata": {"name": "etcd-n1", "annotations": {MIRROR_ANNOTATION: "x"}}, "spec": {"nodeName": "n1"}});
        let (n1, n2, x) = (
            json!({"metadata": {"name": "n1"}}),
            json!({"metadata": {"name": "n2"}}),
            json!({"metadata": {"name": "x"}}),
        );
        let write = |resource, subresource, operation, old, new| Write {
            group: "",
            resource,
            subresource,
            operation,
            old,
            new,
        };
        #[rustfmt::skip]
        let cases = [
            (write("nodes", Some("status"), "update", Some(&n1), Some(&n1)), true),
            (write("nodes", None, "update", Some(&n2), Some(&n2)), false),
            (write("pods", None, "create", None, Some(&mirror)), true),
            (write("pods", None, "create", None, Some(&mine)), false),
            (write("pods", None, "update", Some(&mine), Some(&mine)), false),
            (write("pods", Some("status"), "update", Some(&mine), Some(&mine)), true),
            (write("pods", Some("status"), "update", Some(&theirs), Some(&theirs)), false),
            (write("pods", None, "delete", Some(&mine), None), true),
            (write("pods", None, "delete", Some(&theirs), None), false),
            (write("configmaps", None, "create", None, Some(&x)), true),
        ];
        for (i, (w, allowed)) in cases.iter().enumerate() {
            assert_eq!(
                restrict("n1", w).is_ok(),
                *allowed,
                "case {i}: {:?}",
                restrict("n1", w)
            );
        }
    }

    #[test]
    fn only_node_users_in_the_nodes_group_are_nodes() {
        let user = |name: &str, groups: &[&str]| User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..User::default()
        };
        assert_eq!(node_of(&user("system:node:n1", &[NODES_GROUP])), Some("n1"));
        assert_eq!(
            node_of(&user("system:node:n1", &["system:authenticated"])),
            None
        );
        assert_eq!(node_of(&user("alice", &[NODES_GROUP])), None);
    }
}
