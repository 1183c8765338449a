//! The rest of kube-apiserver's bootstrap policy, for a cluster that runs Kubernetes' own
//! components (a workload cluster made with kubeadm): the roles of the kubelet (`system:node`,
//! left unbound: the Node authorizer decides for kubelets), of node bootstrapping, of the
//! scheduler, the controller-manager, kube-proxy and DNS, and one `system:controller:<name>`
//! role per controller, bound to the `kube-system/<name>` ServiceAccount the controller-manager
//! acts as (`--use-service-account-credentials`, as kubeadm runs it).
//!
//! The rules are kube's, with two differences: capictl's controllers write status with merge
//! patches where kube's use updates, so their roles allow `patch` beside `update` there; and
//! each controller watches what it reads with its own identity (kube's share the
//! controller-manager's informers), so its role lists those reads.

use serde_json::{Value, json};

const READ: &[&str] = &["get", "list", "watch"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn named(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
}

/// What a component electing its leader with the Lease `name` of kube-system needs (and the
/// events every component records).
fn leader_election(name: &str) -> Vec<Value> {
    vec![
        events(),
        rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        named(
            &["coordination.k8s.io"],
            &["leases"],
            &[name],
            &["get", "update"],
        ),
    ]
}

fn events() -> Value {
    rule(
        &["", "events.k8s.io"],
        &["events"],
        &["create", "update", "patch"],
    )
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": metadata(name), "rules": rules})
}

fn binding(name: &str, subjects: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

fn user(name: &str) -> Value {
    json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}])
}

/// The controllers the controller-manager runs, each with its ServiceAccount's rules.
fn controllers() -> Vec<(&'static str, Vec<Value>)> {
    let status_write = &["update", "patch"][..];
    vec![
        (
            "replicaset-controller",
            vec![
                rule(
                    &["apps"],
                    &["replicasets"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    &["apps"],
                    &["replicasets/status", "replicasets/finalizers"],
                    status_write,
                ),
                rule(
                    &[""],
                    &["pods"],
                    &["list", "watch", "patch", "create", "delete"],
                ),
                events(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(
                    &["apps"],
                    &["deployments"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    &["apps"],
                    &["deployments/status", "deployments/finalizers"],
                    status_write,
                ),
                rule(
                    &["apps"],
                    &["replicasets"],
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                ),
                rule(&[""], &["pods"], &["get", "list", "watch", "update"]),
                events(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(&["apps"], &["daemonsets"], READ),
                rule(
                    &["apps"],
                    &["daemonsets/status", "daemonsets/finalizers"],
                    status_write,
                ),
                rule(&[""], &["nodes"], &["list", "watch"]),
                rule(
                    &[""],
                    &["pods"],
                    &["list", "watch", "create", "delete", "patch"],
                ),
                rule(&[""], &["pods/binding"], &["create"]),
                rule(
                    &["apps"],
                    &["controllerrevisions"],
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                ),
                events(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(
                    &["apps"],
                    &["deployments", "replicasets", "statefulsets"],
                    READ,
                ),
                rule(&[""], &["replicationcontrollers"], READ),
                rule(&[""], &["pods"], &["list", "watch"]),
                rule(&["policy"], &["poddisruptionbudgets"], READ),
                rule(&["policy"], &["poddisruptionbudgets/status"], status_write),
                rule(&[""], &["pods/status"], status_write),
                rule(&["*"], &["*/scale"], &["get"]),
                events(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(&[""], &["services", "pods"], READ),
                rule(
                    &[""],
                    &["endpoints"],
                    &["get", "list", "watch", "create", "update", "delete"],
                ),
                rule(&[""], &["endpoints/restricted"], &["create"]),
                events(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(&[""], &["services", "pods", "nodes"], READ),
                rule(&[""], &["services/finalizers"], &["update"]),
                rule(
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                    &["get", "list", "watch", "create", "update", "delete"],
                ),
                events(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(
                    &["batch"],
                    &["jobs"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    &["batch"],
                    &["jobs/status", "jobs/finalizers"],
                    status_write,
                ),
                rule(
                    &[""],
                    &["pods"],
                    &["list", "watch", "create", "delete", "patch"],
                ),
                events(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(
                    &[""],
                    &["pods"],
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                ),
                rule(&["apps"], &["statefulsets"], &["list", "watch"]),
                rule(
                    &["apps"],
                    &["statefulsets/status", "statefulsets/finalizers"],
                    status_write,
                ),
                rule(
                    &["apps"],
                    &["controllerrevisions"],
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                ),
                rule(
                    &[""],
                    &["persistentvolumeclaims"],
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                ),
                events(),
            ],
        ),
        (
            "cronjob-controller",
            vec![
                rule(
                    &["batch"],
                    &["cronjobs"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    &["batch"],
                    &["cronjobs/status", "cronjobs/finalizers"],
                    status_write,
                ),
                rule(
                    &["batch"],
                    &["jobs"],
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                ),
                rule(&[""], &["pods"], &["list", "delete"]),
                events(),
            ],
        ),
        (
            // Pod garbage collection runs in the same loop (kube's pod-garbage-collector).
            "taint-eviction-controller",
            vec![
                rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
                rule(&[""], &["pods/status"], status_write),
                rule(&[""], &["nodes"], &["get", "list", "watch"]),
                events(),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(
                    &[""],
                    &["nodes"],
                    &["get", "list", "watch", "update", "delete", "patch"],
                ),
                rule(&[""], &["nodes/status"], status_write),
                rule(&[""], &["pods/status"], status_write),
                rule(&[""], &["pods"], &["list", "watch", "delete"]),
                rule(&["coordination.k8s.io"], &["leases"], READ),
                events(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(
                    &[""],
                    &["configmaps"],
                    &["create", "update", "list", "watch"],
                ),
                rule(&[""], &["namespaces"], &["list", "watch"]),
                events(),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                    &["get", "list", "watch", "delete"],
                ),
                rule(
                    &["certificates.k8s.io"],
                    &[
                        "certificatesigningrequests/approval",
                        "certificatesigningrequests/status",
                    ],
                    status_write,
                ),
                named(
                    &["certificates.k8s.io"],
                    &["signers"],
                    &["kubernetes.io/kube-apiserver-client-kubelet"],
                    &["approve"],
                ),
                named(
                    &["certificates.k8s.io"],
                    &["signers"],
                    &[
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                        "kubernetes.io/legacy-unknown",
                    ],
                    &["sign"],
                ),
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
                events(),
            ],
        ),
    ]
}

/// The roles and bindings of Kubernetes' components, as kube-apiserver creates them.
pub fn component_policy() -> Vec<Value> {
    let node_rules: Vec<Value> = super::node_authz::node_rules().to_vec();
    let mut objects = vec![
        cluster_role("system:node", node_rules),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata("system:node"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        }),
        cluster_role(
            "system:node-bootstrapper",
            vec![rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests/nodeclient"],
                &["create"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests/selfnodeclient"],
                &["create"],
            )],
        ),
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role(
            "system:node-proxier",
            vec![
                rule(&[""], &["services", "endpoints"], &["list", "watch"]),
                rule(&[""], &["nodes"], READ),
                rule(
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                    &["list", "watch"],
                ),
                events(),
            ],
        ),
        binding("system:node-proxier", user("system:kube-proxy")),
        cluster_role(
            "system:kube-dns",
            vec![rule(&[""], &["endpoints", "services"], &["list", "watch"])],
        ),
        binding(
            "system:kube-dns",
            json!([{"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}]),
        ),
        cluster_role(
            "system:kube-scheduler",
            [
                leader_election("kube-scheduler").as_slice(),
                &[
                    rule(&[""], &["nodes"], READ),
                    rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
                    rule(&[""], &["pods/binding", "bindings"], &["create"]),
                    rule(&[""], &["pods/status"], &["patch", "update"]),
                    rule(&[""], &["services", "replicationcontrollers"], READ),
                    rule(&["apps"], &["replicasets", "statefulsets"], READ),
                    rule(&["policy"], &["poddisruptionbudgets"], READ),
                    rule(
                        &[""],
                        &["persistentvolumeclaims", "persistentvolumes"],
                        READ,
                    ),
                    rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                    rule(
                        &["authorization.k8s.io"],
                        &["subjectaccessreviews"],
                        &["create"],
                    ),
                    rule(
                        &["storage.k8s.io"],
                        &["csinodes", "csidrivers", "csistoragecapacities"],
                        READ,
                    ),
                    rule(&[""], &["namespaces"], READ),
                ],
            ]
            .concat(),
        ),
        binding("system:kube-scheduler", user("system:kube-scheduler")),
        cluster_role(
            "system:kube-controller-manager",
            [
                leader_election("kube-controller-manager").as_slice(),
                &[
                    rule(&[""], &["secrets", "serviceaccounts"], &["create"]),
                    rule(&[""], &["secrets"], &["delete"]),
                    rule(
                        &[""],
                        &["namespaces", "secrets", "serviceaccounts", "configmaps"],
                        &["get"],
                    ),
                    rule(&[""], &["secrets", "serviceaccounts"], &["update"]),
                    rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                    rule(
                        &["authorization.k8s.io"],
                        &["subjectaccessreviews"],
                        &["create"],
                    ),
                    rule(&["*"], &["*"], &["list", "watch"]),
                    rule(&[""], &["serviceaccounts/token"], &["create"]),
                ],
            ]
            .concat(),
        ),
        binding(
            "system:kube-controller-manager",
            user("system:kube-controller-manager"),
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![
                json!({"nonResourceURLs": ["/.well-known/openid-configuration", "/openid/v1/jwks"], "verbs": ["get"]}),
            ],
        ),
        binding(
            "system:service-account-issuer-discovery",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts"}]),
        ),
    ];
    for (controller, rules) in controllers() {
        let name = format!("system:controller:{controller}");
        objects.push(cluster_role(&name, rules));
        objects.push(binding(
            &name,
            json!([{"kind": "ServiceAccount", "name": controller, "namespace": "kube-system"}]),
        ));
    }
    objects
}

/// The ServiceAccounts of `kube-system` the controller-manager's controllers act as.
pub fn controller_accounts() -> Vec<&'static str> {
    controllers().into_iter().map(|(name, _)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::User;
    use crate::apiserver::authz::{Target, policy_of};

    fn account(name: &str) -> User {
        User {
            name: format!("system:serviceaccount:kube-system:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
                "system:authenticated".into(),
            ],
            ..User::default()
        }
    }

    #[test]
    fn each_controller_may_do_its_work_and_no_more() {
        let objects = component_policy();
        let policy = policy_of(&objects);
        let target = |group, resource, subresource| Target::Resource {
            group,
            resource,
            subresource,
            namespace: Some("default"),
            name: Some("web"),
        };
        #[rustfmt::skip]
        let cases = [
            ("replicaset-controller", "create", target("", "pods", None), true),
            ("replicaset-controller", "patch", target("apps", "replicasets", Some("status")), true),
            ("replicaset-controller", "get", target("", "secrets", None), false),
            ("endpoint-controller", "update", target("", "endpoints", None), true),
            ("endpoint-controller", "create", target("discovery.k8s.io", "endpointslices", None), false),
            ("endpointslice-controller", "create", target("discovery.k8s.io", "endpointslices", None), true),
            ("disruption-controller", "patch", target("policy", "poddisruptionbudgets", Some("status")), true),
            ("disruption-controller", "delete", target("", "pods", None), false),
            ("taint-eviction-controller", "delete", target("", "pods", None), true),
            ("job-controller", "delete", target("apps", "deployments", None), false),
        ];
        for (controller, verb, target, allowed) in cases {
            assert_eq!(
                policy
                    .authorize(&account(controller), verb, &target)
                    .is_ok(),
                allowed,
                "{controller} {verb} {target:?}"
            );
        }
        assert_eq!(controller_accounts().len(), controllers().len());
    }
}
