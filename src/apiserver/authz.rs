//! Authorization as kube-apiserver's RBAC authorizer decides it: `system:masters` may do
//! anything; everyone else may do what a Role or ClusterRole bound to them (as a User, one of
//! their Groups, or their ServiceAccount) allows — verbs, API groups, resources and
//! subresources, resource names, non-resource URLs — with ClusterRole aggregation. Nothing is
//! allowed that no rule allows, and a refusal says, in kube-apiserver's words, who cannot do
//! what where.
//!
//! The decision is a pure function of the request's attributes and a [`Policy`] read from the
//! store; [`default_policy`] holds the roles and bindings a new cluster starts with.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::User;

/// How a server decides whether a request is allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Every authenticated request is allowed (a server only administrators reach).
    AlwaysAllow,
    /// RBAC, as `--authorization-mode=RBAC`.
    Rbac,
    /// The Node authorizer, then RBAC, as kubeadm's `--authorization-mode=Node,RBAC`
    /// ([`super::node_authz`]).
    NodeAndRbac,
}

impl Authorization {
    /// Whether RBAC decides (its bootstrap policy is created, its escalation rules apply).
    pub fn rbac(self) -> bool {
        self != Authorization::AlwaysAllow
    }
}

/// What a request asks to do.
#[derive(Clone, Debug)]
pub enum Target<'a> {
    Resource {
        group: &'a str,
        resource: &'a str,
        subresource: Option<&'a str>,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    },
    /// A path outside the resource API (`/healthz`, `/api`, `/version`...).
    Path(&'a str),
}

/// The group every authenticated user is in, and the one of requests without credentials.
pub const AUTHENTICATED: &str = "system:authenticated";
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// Members of this group may do anything.
pub const MASTERS: &str = "system:masters";
/// The group allowed to read `/metrics` and the health endpoints.
pub const MONITORING: &str = "system:monitoring";

/// The roles and bindings in force, as stored.
#[derive(Debug, Default)]
pub struct Policy {
    pub cluster_roles: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
    /// Roles and RoleBindings of every namespace.
    pub roles: Vec<Value>,
    pub role_bindings: Vec<Value>,
}

/// The verb of a resource request, as RBAC names it.
pub fn resource_verb(
    method: &http::Method,
    named: bool,
    watch: bool,
    subresource: Option<&str>,
) -> &'static str {
    use http::Method;
    // Streams opened to a Pod are creations whatever the HTTP method (kube-apiserver asks
    // for `create` on pods/exec, pods/attach and pods/portforward).
    if matches!(subresource, Some("portforward" | "exec" | "attach")) {
        return "create";
    }
    match (method, named) {
        (&Method::GET | &Method::HEAD, _) if watch => "watch",
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

/// The verb of a non-resource request: the method in lower case (`get` for HEAD).
pub fn path_verb(method: &http::Method) -> String {
    if method == http::Method::HEAD {
        "get".into()
    } else {
        method.as_str().to_lowercase()
    }
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn has(list: &Value, wanted: &str) -> bool {
    strings(list).any(|s| s == "*" || s == wanted)
}

/// Whether one PolicyRule allows the request.
pub fn rule_allows(rule: &Value, verb: &str, target: &Target<'_>) -> bool {
    if !has(&rule["verbs"], verb) {
        return false;
    }
    match target {
        Target::Resource {
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = match subresource {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_string(),
            };
            let resource_matches = strings(&rule["resources"]).any(|r| {
                r == "*"
                    || r == combined
                    || subresource.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
            });
            let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
            let name_matches = names.is_empty() || name.is_some_and(|n| names.contains(&n));
            has(&rule["apiGroups"], group) && resource_matches && name_matches
        }
        Target::Path(path) => {
            strings(&rule["nonResourceURLs"]).any(|u| match u.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => u == *path,
            })
        }
    }
}

/// Whether a binding's subject is this user (a ServiceAccount without a namespace is in the
/// binding's).
fn subject_is(subject: &Value, user: &User, binding_namespace: Option<&str>) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject["namespace"]
                .as_str()
                .or(binding_namespace)
                .unwrap_or_default();
            user.name == format!("system:serviceaccount:{namespace}:{name}")
        }
        _ => false,
    }
}

pub fn labels_match(selector: &Value, labels: &Value) -> bool {
    let expected_all = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| labels[k] == *v));
    let expressions_hold = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let value = labels[key].as_str();
            let mut values = strings(&e["values"]);
            match e["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values.any(|x| x == v)),
                Some("NotIn") => value.is_none_or(|v| !values.any(|x| x == v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                _ => false,
            }
        });
    expected_all && expressions_hold
}

impl Policy {
    /// The rules of a ClusterRole: its own, and those of the ClusterRoles its aggregation rule
    /// selects, through chains of aggregation (as kube-controller-manager fills them in).
    pub fn cluster_role_rules(&self, name: &str) -> Vec<&Value> {
        let mut rules = Vec::new();
        let mut seen = vec![name.to_string()];
        let mut queue = vec![name.to_string()];
        while let Some(current) = queue.pop() {
            let Some(role) = self
                .cluster_roles
                .iter()
                .find(|r| r["metadata"]["name"] == current.as_str())
            else {
                continue;
            };
            rules.extend(role["rules"].as_array().into_iter().flatten());
            let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
                continue;
            };
            for other in &self.cluster_roles {
                let other_name = other["metadata"]["name"].as_str().unwrap_or_default();
                if !seen.iter().any(|s| s == other_name)
                    && selectors
                        .iter()
                        .any(|s| labels_match(s, &other["metadata"]["labels"]))
                {
                    seen.push(other_name.to_string());
                    queue.push(other_name.to_string());
                }
            }
        }
        rules
    }

    pub fn role_rules(&self, namespace: &str, name: &str) -> Vec<&Value> {
        self.roles
            .iter()
            .filter(|r| r["metadata"]["namespace"] == namespace && r["metadata"]["name"] == name)
            .flat_map(|r| r["rules"].as_array().into_iter().flatten())
            .collect()
    }

    /// The rules that apply to `user` in `namespace` (None: the cluster scope only).
    pub fn rules_for(&self, user: &User, namespace: Option<&str>) -> Vec<&Value> {
        let mut rules = Vec::new();
        for binding in &self.cluster_role_bindings {
            if strings_of_subjects(binding).any(|s| subject_is(s, user, None)) {
                rules.extend(
                    self.cluster_role_rules(
                        binding["roleRef"]["name"].as_str().unwrap_or_default(),
                    ),
                );
            }
        }
        if let Some(namespace) = namespace {
            for binding in self
                .role_bindings
                .iter()
                .filter(|b| b["metadata"]["namespace"] == namespace)
            {
                if !strings_of_subjects(binding).any(|s| subject_is(s, user, Some(namespace))) {
                    continue;
                }
                let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
                match binding["roleRef"]["kind"].as_str() {
                    Some("ClusterRole") => rules.extend(self.cluster_role_rules(role)),
                    Some("Role") => rules.extend(self.role_rules(namespace, role)),
                    _ => {}
                }
            }
        }
        rules
    }

    /// Whether `user` may do `verb` to `target`; the refusal in kube-apiserver's words.
    pub fn authorize(&self, user: &User, verb: &str, target: &Target<'_>) -> Result<(), String> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Ok(());
        }
        let namespace = match target {
            Target::Resource { namespace, .. } => *namespace,
            Target::Path(_) => None,
        };
        if self
            .rules_for(user, namespace)
            .iter()
            .any(|r| rule_allows(r, verb, target))
        {
            return Ok(());
        }
        Err(forbidden_message(user, verb, target))
    }
}

fn strings_of_subjects(binding: &Value) -> impl Iterator<Item = &Value> {
    binding["subjects"].as_array().into_iter().flatten()
}

/// kube-apiserver's message for a refused request.
pub fn forbidden_message(user: &User, verb: &str, target: &Target<'_>) -> String {
    match target {
        Target::Resource {
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let qualified = if group.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}.{group}")
            };
            let object = match name {
                Some(n) => format!("{qualified} \"{n}\""),
                None => qualified,
            };
            let what = match subresource {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_string(),
            };
            let scope = match namespace {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".into(),
            };
            format!(
                "{object} is forbidden: User \"{}\" cannot {verb} resource \"{what}\" in API group \"{group}\" {scope}",
                user.name
            )
        }
        Target::Path(path) => format!(
            "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
            user.name
        ),
    }
}

/// The roles and bindings every cluster starts with (kube-apiserver's bootstrap policy, the
/// part clients rely on): cluster-admin for `system:masters`; discovery, health and version
/// for everyone authenticated (health and version also for anyone); the user-facing
/// `admin`, `edit` and `view` roles, aggregated from the `aggregate-to-*` ClusterRoles; and
/// what every user may ask about themselves (access and identity reviews).
pub fn default_policy() -> Vec<Value> {
    policy_for_users(&[
        "cluster.x-k8s.io",
        "bootstrap.cluster.x-k8s.io",
        "controlplane.cluster.x-k8s.io",
        "infrastructure.cluster.x-k8s.io",
        "addons.cluster.x-k8s.io",
        "ipam.cluster.x-k8s.io",
        "runtime.cluster.x-k8s.io",
    ])
}

/// The user-facing part of [`default_policy`], with `extra_groups` (every resource) in the
/// aggregated `edit` and `view` roles.
pub fn policy_for_users(extra_groups: &[&str]) -> Vec<Value> {
    let reads = json!(["get", "list", "watch"]);
    let writes = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let workloads = json!([
        "pods",
        "pods/log",
        "pods/status",
        "services",
        "endpoints",
        "configmaps",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "serviceaccounts",
        "events",
        "limitranges",
        "resourcequotas"
    ]);
    let apps = json!([
        "deployments",
        "deployments/scale",
        "replicasets",
        "replicasets/scale",
        "statefulsets",
        "statefulsets/scale",
        "daemonsets",
        "controllerrevisions"
    ]);
    let cluster_role = |name: &str, labels: Value, rules: Value| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name, "labels": labels, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}, "rules": rules});
    let aggregated = |name: &str, from: &[&str], labels: Value| {
        let selectors: Vec<Value> = from
            .iter()
            .map(|to| json!({"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"}}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name, "labels": labels, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}, "aggregationRule": {"clusterRoleSelectors": selectors}, "rules": []})
    };
    let binding = |name: &str, role: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": subjects})
    };
    let defaults = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let with = |extra: &str| {
        let mut labels = defaults.clone();
        labels[extra] = json!("true");
        labels
    };
    let mut objects = vec![
        cluster_role(
            "cluster-admin",
            defaults.clone(),
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        cluster_role(
            "system:discovery",
            defaults.clone(),
            json!([
                {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/", "/"], "verbs": ["get"]},
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            defaults.clone(),
            json!([
                {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
        ),
        // Who may scrape the API server, as kube-apiserver's bootstrap policy has it.
        cluster_role(
            "system:monitoring",
            defaults.clone(),
            json!([
                {"nonResourceURLs": ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"], "verbs": ["get"]},
            ]),
        ),
        cluster_role(
            "system:basic-user",
            defaults.clone(),
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        aggregated("admin", &["admin"], defaults.clone()),
        aggregated(
            "edit",
            &["edit"],
            with("rbac.authorization.k8s.io/aggregate-to-admin"),
        ),
        aggregated(
            "view",
            &["view"],
            with("rbac.authorization.k8s.io/aggregate-to-edit"),
        ),
        cluster_role(
            "system:aggregate-to-admin",
            with("rbac.authorization.k8s.io/aggregate-to-admin"),
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": reads.as_array().unwrap().iter().chain(writes.as_array().unwrap()).collect::<Vec<_>>()},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
        cluster_role(
            "system:aggregate-to-edit",
            with("rbac.authorization.k8s.io/aggregate-to-edit"),
            json!([
                {"apiGroups": [""], "resources": workloads.as_array().unwrap().iter().chain([json!("secrets"), json!("pods/eviction"), json!("pods/portforward"), json!("pods/exec"), json!("pods/attach")].iter()).collect::<Vec<_>>(), "verbs": writes},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": reads},
                {"apiGroups": ["apps"], "resources": apps, "verbs": writes},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": writes},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": writes},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": writes},
            ]),
        ),
        cluster_role(
            "system:aggregate-to-view",
            with("rbac.authorization.k8s.io/aggregate-to-view"),
            json!([
                {"apiGroups": [""], "resources": workloads, "verbs": reads},
                {"apiGroups": [""], "resources": ["namespaces", "namespaces/status"], "verbs": reads},
                {"apiGroups": ["apps"], "resources": apps, "verbs": reads},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": reads},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": reads},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": reads},
            ]),
        ),
        binding("cluster-admin", "cluster-admin", &[MASTERS]),
        binding("system:discovery", "system:discovery", &[AUTHENTICATED]),
        binding("system:basic-user", "system:basic-user", &[AUTHENTICATED]),
        binding("system:monitoring", "system:monitoring", &[MONITORING]),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
    ];
    if !extra_groups.is_empty() {
        for (role, verbs) in [
            ("system:aggregate-to-edit", &writes),
            ("system:aggregate-to-view", &reads),
        ] {
            let rules = objects
                .iter_mut()
                .find(|o| o["metadata"]["name"] == role)
                .and_then(|o| o["rules"].as_array_mut())
                .expect("the aggregated roles are above");
            rules.push(json!({"apiGroups": extra_groups, "resources": ["*"], "verbs": verbs}));
        }
    }
    objects
}

/// The policy in `objects` (ClusterRoles, ClusterRoleBindings, Roles, RoleBindings mixed).
pub fn policy_of<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Policy {
    let mut policy = Policy::default();
    let mut by_kind: HashMap<&str, &mut Vec<Value>> = HashMap::new();
    by_kind.insert("ClusterRole", &mut policy.cluster_roles);
    by_kind.insert("ClusterRoleBinding", &mut policy.cluster_role_bindings);
    by_kind.insert("Role", &mut policy.roles);
    by_kind.insert("RoleBinding", &mut policy.role_bindings);
    for object in objects {
        if let Some(list) = object["kind"].as_str().and_then(|k| by_kind.get_mut(k)) {
            list.push(object.clone());
        }
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..User::default()
        }
    }

    fn configmaps<'a>(namespace: &'a str, name: Option<&'a str>) -> Target<'a> {
        Target::Resource {
            group: "",
            resource: "configmaps",
            subresource: None,
            namespace: Some(namespace),
            name,
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["configmaps", "pods/log"], "resourceNames": ["settings"], "verbs": ["get", "update"]});
        let pod_log = Target::Resource {
            group: "",
            resource: "pods",
            subresource: Some("log"),
            namespace: Some("team"),
            name: Some("settings"),
        };
        let pods = Target::Resource {
            group: "",
            resource: "pods",
            subresource: None,
            namespace: Some("team"),
            name: Some("settings"),
        };
        assert!(rule_allows(
            &rule,
            "get",
            &configmaps("team", Some("settings"))
        ));
        assert!(rule_allows(&rule, "get", &pod_log));
        assert!(
            !rule_allows(&rule, "get", &pods),
            "a subresource does not grant its resource"
        );
        assert!(!rule_allows(
            &rule,
            "get",
            &configmaps("team", Some("other"))
        ));
        assert!(
            !rule_allows(&rule, "list", &configmaps("team", None)),
            "names never match a list"
        );
        assert!(!rule_allows(
            &rule,
            "delete",
            &configmaps("team", Some("settings"))
        ));
        let any_status = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        let status = Target::Resource {
            group: "cluster.x-k8s.io",
            resource: "clusters",
            subresource: Some("status"),
            namespace: None,
            name: Some("c"),
        };
        assert!(rule_allows(&any_status, "patch", &status));
        let urls = json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]});
        assert!(rule_allows(&urls, "get", &Target::Path("/apis/apps/v1")));
        assert!(!rule_allows(&urls, "get", &Target::Path("/metrics")));
        assert!(!rule_allows(&urls, "post", &Target::Path("/healthz")));
    }

    #[test]
    fn alice_may_do_what_her_binding_names_and_nothing_else() {
        let alice = user("alice", &["developers", AUTHENTICATED]);
        let mut objects = default_policy();
        let none = policy_of(&objects);
        let secrets = Target::Resource {
            group: "",
            resource: "secrets",
            subresource: None,
            namespace: Some("kube-system"),
            name: None,
        };
        assert_eq!(
            none.authorize(&alice, "list", &secrets).unwrap_err(),
            "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""
        );
        let namespace = Target::Resource {
            group: "",
            resource: "namespaces",
            subresource: None,
            namespace: None,
            name: Some("team"),
        };
        assert_eq!(
            none.authorize(&alice, "delete", &namespace).unwrap_err(),
            "namespaces \"team\" is forbidden: User \"alice\" cannot delete resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        assert!(
            none.authorize(&alice, "get", &Target::Path("/version"))
                .is_ok()
        );
        assert!(
            none.authorize(&alice, "get", &Target::Path("/metrics"))
                .is_err()
        );

        objects.push(json!({"kind": "Role", "metadata": {"name": "configs", "namespace": "team"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}));
        objects.push(json!({"kind": "RoleBinding", "metadata": {"name": "devs", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "configs"}, "subjects": [{"kind": "Group", "name": "developers"}]}));
        let bound = policy_of(&objects);
        assert!(
            bound
                .authorize(&alice, "list", &configmaps("team", None))
                .is_ok()
        );
        assert!(
            bound
                .authorize(&alice, "create", &configmaps("team", None))
                .is_err()
        );
        assert!(
            bound
                .authorize(&alice, "list", &configmaps("other", None))
                .is_err()
        );
        let root = user("root", &[MASTERS]);
        assert!(bound.authorize(&root, "delete", &namespace).is_ok());
    }

    #[test]
    fn view_edit_and_admin_aggregate_and_view_reads_no_secrets() {
        let mut objects = default_policy();
        objects.push(json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": "bob"}]}));
        objects.push(json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "admin"}, "subjects": [{"kind": "ServiceAccount", "name": "ci"}]}));
        let policy = policy_of(&objects);
        let bob = user("bob", &[AUTHENTICATED]);
        let clusters = Target::Resource {
            group: "cluster.x-k8s.io",
            resource: "clusters",
            subresource: None,
            namespace: Some("team"),
            name: None,
        };
        assert!(policy.authorize(&bob, "list", &clusters).is_ok());
        assert!(policy.authorize(&bob, "create", &clusters).is_err());
        let secrets = Target::Resource {
            group: "",
            resource: "secrets",
            subresource: None,
            namespace: Some("team"),
            name: Some("c-kubeconfig"),
        };
        assert!(
            policy.authorize(&bob, "get", &secrets).is_err(),
            "view does not read Secrets"
        );
        let ci = user("system:serviceaccount:team:ci", &[AUTHENTICATED]);
        assert!(
            policy.authorize(&ci, "get", &secrets).is_ok(),
            "admin reads Secrets, through edit"
        );
        let rolebindings = Target::Resource {
            group: "rbac.authorization.k8s.io",
            resource: "rolebindings",
            subresource: None,
            namespace: Some("team"),
            name: None,
        };
        assert!(policy.authorize(&ci, "create", &rolebindings).is_ok());
        let elsewhere = Target::Resource {
            group: "rbac.authorization.k8s.io",
            resource: "rolebindings",
            subresource: None,
            namespace: Some("other"),
            name: None,
        };
        assert!(policy.authorize(&ci, "create", &elsewhere).is_err());
    }

    #[test]
    fn verbs_from_requests() {
        use http::Method;
        assert_eq!(resource_verb(&Method::GET, true, false, None), "get");
        assert_eq!(resource_verb(&Method::GET, false, false, None), "list");
        assert_eq!(resource_verb(&Method::GET, false, true, None), "watch");
        assert_eq!(
            resource_verb(&Method::DELETE, false, false, None),
            "deletecollection"
        );
        assert_eq!(
            resource_verb(&Method::GET, true, false, Some("portforward")),
            "create"
        );
        assert_eq!(path_verb(&Method::HEAD), "get");
    }
}
