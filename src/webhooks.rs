//! Cluster API's admission rules, as upstream's webhooks apply them: version defaulting on the
//! kinds that carry a Kubernetes version, the Cluster's network and reference checks, and the
//! KubeadmControlPlane's checks on replicas, the rollout strategy and version upgrades (one
//! minor at a time, never down). The embedded management
//! cluster runs them in-process; [`crate::apiserver::admission::webhook_router`] serves them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::common::kubernetes_version;
use crate::apiserver::admission::{Admission, Chain, Operation, Request};
use crate::apiserver::status::{ApiError, FieldCause};

/// A kind a provider's webhooks take, for its webhook configurations.
pub struct WebhookTarget {
    /// The provider whose manager serves it.
    pub provider: crate::api::CrdSet,
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// Every kind these rules cover, by provider; each is both defaulted and validated.
pub const TARGETS: &[WebhookTarget] = &[
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "Cluster",
        plural: "clusters",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "Machine",
        plural: "machines",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineSet",
        plural: "machinesets",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineDeployment",
        plural: "machinedeployments",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::KubeadmControlPlane,
        group: "controlplane.cluster.x-k8s.io",
        kind: "KubeadmControlPlane",
        plural: "kubeadmcontrolplanes",
    },
];

/// Registers every rule with a management cluster's admission chain.
pub fn register(chain: &Chain) {
    chain.register(Arc::new(VersionDefaults));
    chain.register(Arc::new(ClusterRules));
    chain.register(Arc::new(KubeadmControlPlaneRules));
}

/// Puts the "v" on a version that lacks it, as upstream's defaulting webhooks do.
fn prefix_v(value: &mut Value) {
    if let Some(v) = value
        .as_str()
        .filter(|v| !v.is_empty() && !v.starts_with('v'))
    {
        *value = json!(format!("v{v}"));
    }
}

/// Where each kind keeps its Kubernetes version.
fn version_path(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Machine" => Some(&["spec", "version"]),
        "MachineSet" | "MachineDeployment" => Some(&["spec", "template", "spec", "version"]),
        "KubeadmControlPlane" => Some(&["spec", "version"]),
        _ => None,
    }
}

fn at_mut<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(object, |v, k| v.get_mut(*k))
}

fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, k| v.get(*k))
}

/// `v1.30.4` for `1.30.4` on Machines, MachineSets, MachineDeployments and control planes.
struct VersionDefaults;

impl Admission for VersionDefaults {
    fn name(&self) -> &str {
        "versions.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        matches!(group, "cluster.x-k8s.io" | "controlplane.cluster.x-k8s.io")
            && version_path(kind).is_some()
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        if let Some(version) = version_path(request.kind).and_then(|p| at_mut(object, p)) {
            prefix_v(version);
        }
        Ok(())
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let path = version_path(request.kind).expect("handled kinds have a version");
        match at(object, path).and_then(Value::as_str) {
            Some(v) if kubernetes_version(v).is_none() => Err(ApiError::invalid(
                request.kind,
                request.group,
                request.name,
                vec![FieldCause::invalid(
                    path.join("."),
                    format!("{v:?} is not a Kubernetes version; use the form v1.30.4"),
                )],
            )),
            _ => Ok(Vec::new()),
        }
    }
}

/// upstream's Cluster webhook checks, beside what the schema says.
struct ClusterRules;

/// `10.0.0.0/8` or `fd00::/108` as an address and a prefix length no longer than it allows.
fn parse_cidr(block: &str) -> Option<std::net::IpAddr> {
    let (address, prefix) = block.split_once('/')?;
    let address: std::net::IpAddr = address.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|_| prefix.len() <= 3)?;
    let bits = if address.is_ipv4() { 32 } else { 128 };
    (prefix <= bits).then_some(address)
}

/// What is wrong with a Cluster, given its old self on updates: CIDR blocks that do not parse
/// or are not one family (or one of each, dual-stack), and references whose kind changed.
pub fn cluster_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    for network in ["pods", "services"] {
        let path = format!("spec.clusterNetwork.{network}.cidrBlocks");
        let blocks = object["spec"]["clusterNetwork"][network]["cidrBlocks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut families = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            let text = block.as_str().unwrap_or_default();
            match parse_cidr(text) {
                Some(address) => families.push(address.is_ipv4()),
                None => causes.push(FieldCause::invalid(
                    format!("{path}[{i}]"),
                    format!(
                        "Invalid value: {text:?}: invalid CIDR address: {text}; use an address and a prefix length, like 192.168.0.0/16 or fd00::/64"
                    ),
                )),
            }
        }
        let dual_stack = families.len() == 2 && families[0] != families[1];
        if families.len() == blocks.len() && blocks.len() > 1 && !dual_stack {
            causes.push(FieldCause::invalid(
                path,
                "Invalid value: more than one CIDR block is dual-stack: exactly one IPv4 and one IPv6 block",
            ));
        }
    }
    if let Some(old) = old {
        for reference in ["infrastructureRef", "controlPlaneRef"] {
            let before = &old["spec"][reference];
            let after = &object["spec"][reference];
            let kind_of = |r: &Value| (r["apiGroup"].clone(), r["kind"].clone());
            if before.is_object() && kind_of(before) != kind_of(after) {
                causes.push(FieldCause::forbidden(
                    format!("spec.{reference}"),
                    "apiGroup and kind cannot be changed once set; the Cluster's objects of that kind would be abandoned",
                ));
            }
        }
    }
    causes
}

impl Admission for ClusterRules {
    fn name(&self) -> &str {
        "cluster.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "Cluster"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, cluster_causes(object, request.old))
    }
}

/// Ok when there is nothing to say; otherwise the 422 naming every field (never on deletion,
/// which must stay possible whatever the object holds).
fn refuse_with(request: &Request<'_>, causes: Vec<FieldCause>) -> Result<Vec<String>, ApiError> {
    if causes.is_empty() || request.operation == Operation::Delete {
        Ok(Vec::new())
    } else {
        Err(ApiError::invalid(
            request.kind,
            request.group,
            request.name,
            causes,
        ))
    }
}

/// upstream's KubeadmControlPlane webhook checks.
struct KubeadmControlPlaneRules;

/// What a running control plane cannot change: where its certificates and etcd data live,
/// stacked versus external etcd, how machines find and announce the API server, and the kind of
/// its infrastructure machines.
const KUBEADM_CONTROL_PLANE_IMMUTABLE: &[&[&str]] = &[
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "certificatesDir",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "etcd",
        "local",
        "dataDir",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "etcd",
        "external",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "initConfiguration",
        "localAPIEndpoint",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "initConfiguration",
        "bootstrapTokens",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "joinConfiguration",
        "discovery",
    ],
    &[
        "spec",
        "machineTemplate",
        "spec",
        "infrastructureRef",
        "apiGroup",
    ],
    &[
        "spec",
        "machineTemplate",
        "spec",
        "infrastructureRef",
        "kind",
    ],
];

/// What is wrong with a KubeadmControlPlane, given its old self on updates.
pub fn kubeadm_control_plane_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let stacked_etcd = spec["kubeadmConfigSpec"]["clusterConfiguration"]["etcd"]
        .get("external")
        .is_none();
    let replicas = spec["replicas"].as_i64();
    match replicas {
        Some(n) if n <= 0 => causes.push(FieldCause::forbidden(
            "spec.replicas",
            "replicas must be greater than 0; delete the Cluster to remove its control plane",
        )),
        Some(n) if stacked_etcd && n % 2 == 0 => causes.push(FieldCause::forbidden(
            "spec.replicas",
            format!(
                "cannot be an even number when etcd is stacked: {n} members tolerate no more failures than {}; use {} or {}",
                n - 1,
                n - 1,
                n + 1
            ),
        )),
        _ => {}
    }
    let surge = &spec["rollout"]["strategy"]["rollingUpdate"]["maxSurge"];
    match surge {
        Value::Null => {}
        Value::Number(n) if n.as_i64() == Some(1) => {}
        Value::Number(n) if n.as_i64() == Some(0) => {
            if replicas.is_some_and(|r| r < 3) {
                causes.push(FieldCause::forbidden(
                    "spec.rollout.strategy.rollingUpdate.maxSurge",
                    "0 needs at least 3 replicas, since a rollout then removes a Machine before creating its replacement",
                ));
            }
        }
        other => causes.push(FieldCause::invalid(
            "spec.rollout.strategy.rollingUpdate.maxSurge",
            format!("{other} is not supported; use 0 or 1"),
        )),
    }
    if let Some(old) = old {
        for path in KUBEADM_CONTROL_PLANE_IMMUTABLE {
            if at(object, path) != at(old, path) {
                causes.push(FieldCause::forbidden(
                    path.join("."),
                    "cannot be changed once the control plane exists; create a new cluster to change it",
                ));
            }
        }
    }
    let new_version = spec["version"].as_str().and_then(kubernetes_version);
    let old_version = old
        .and_then(|o| o["spec"]["version"].as_str())
        .and_then(kubernetes_version);
    if let (Some(from), Some(to)) = (old_version, new_version)
        && to < from
    {
        causes.push(FieldCause::forbidden(
            "spec.version",
            format!(
                "cannot downgrade from v{}.{}.{} to v{}.{}.{}: kubeadm upgrades only; keep v{}.{}.{} or move forward",
                from.0, from.1, from.2, to.0, to.1, to.2, from.0, from.1, from.2
            ),
        ));
    }
    if let (Some(from), Some(to)) = (old_version, new_version)
        && (to.0 > from.0 || (to.0 == from.0 && to.1 > from.1 + 1))
    {
        let (major, minor, patch) = from;
        causes.push(FieldCause::forbidden(
            "spec.version",
            format!(
                "cannot upgrade from v{major}.{minor}.{patch} to v{}.{}.{} in one step: Kubernetes upgrades go one minor version at a time; upgrade to v{major}.{}.x first",
                to.0,
                to.1,
                to.2,
                minor + 1
            ),
        ));
    }
    causes
}

impl Admission for KubeadmControlPlaneRules {
    fn name(&self) -> &str {
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "controlplane.cluster.x-k8s.io" && kind == "KubeadmControlPlane"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, kubeadm_control_plane_causes(object, request.old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_webhook_target_has_rules_and_every_rule_a_target() {
        let rules: Vec<Arc<dyn Admission>> = vec![
            Arc::new(VersionDefaults),
            Arc::new(ClusterRules),
            Arc::new(KubeadmControlPlaneRules),
        ];
        for t in TARGETS {
            assert!(
                rules.iter().any(|r| r.handles(t.group, t.kind)),
                "{} has a webhook configuration but no rule",
                t.kind
            );
        }
        for (group, kind) in [
            ("cluster.x-k8s.io", "Cluster"),
            ("cluster.x-k8s.io", "Machine"),
            ("cluster.x-k8s.io", "MachineSet"),
            ("cluster.x-k8s.io", "MachineDeployment"),
            ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
        ] {
            assert!(
                TARGETS.iter().any(|t| t.group == group && t.kind == kind),
                "the rules take {kind} but no webhook configuration sends it"
            );
        }
    }

    fn kcp(replicas: i64, version: &str) -> Value {
        json!({"spec": {"replicas": replicas, "version": version}})
    }

    fn messages(object: &Value, old: Option<&Value>) -> Vec<String> {
        kubeadm_control_plane_causes(object, old)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn cluster_networks_and_references() {
        let cluster = |pods: Value, infra_kind: &str| {
            json!({"spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": pods}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": infra_kind, "name": "a"},
            }})
        };
        let old = cluster(json!(["192.168.0.0/16"]), "DockerCluster");
        for (pods, kind, expected) in [
            (json!(["192.168.0.0/16"]), "DockerCluster", vec![]),
            (json!(["10.0.0.0/8", "fd00::/64"]), "DockerCluster", vec![]),
            (
                json!(["not-a-cidr"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks[0]"],
            ),
            (
                json!(["10.0.0.0/33"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks[0]"],
            ),
            (
                json!(["10.0.0.0/8", "10.1.0.0/16"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks"],
            ),
            (
                json!(["10.0.0.0/8"]),
                "InMemoryCluster",
                vec!["spec.infrastructureRef"],
            ),
        ] {
            let causes = cluster_causes(&cluster(pods.clone(), kind), Some(&old));
            let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(fields, expected, "{pods} {kind}: {causes:?}");
        }
        let bad = &cluster_causes(&cluster(json!(["not-a-cidr"]), "DockerCluster"), None)[0];
        assert!(
            bad.message.contains("invalid CIDR address: not-a-cidr"),
            "{bad:?}"
        );
    }

    #[test]
    fn versions_get_their_v() {
        let mut v = json!("1.29.10");
        prefix_v(&mut v);
        assert_eq!(v, "v1.29.10");
    }

    #[test]
    fn kubeadm_control_plane_rules() {
        let table: [(Value, Option<Value>, &[&str]); 9] = [
            (kcp(5, "v1.29.10"), Some(kcp(3, "v1.29.10")), &[]),
            (kcp(3, "v1.29.10"), None, &[]),
            (kcp(3, "v1.29.10"), Some(kcp(3, "v1.28.13")), &[]),
            (kcp(3, "v1.28.15"), Some(kcp(3, "v1.28.13")), &[]),
            (
                kcp(3, "v1.28.13"),
                Some(kcp(3, "v1.29.10")),
                &["spec.version"],
            ),
            (
                kcp(3, "v1.30.4"),
                Some(kcp(3, "v1.28.13")),
                &["spec.version"],
            ),
            (kcp(2, "v1.30.4"), None, &["spec.replicas"]),
            (kcp(0, "v1.30.4"), None, &["spec.replicas"]),
            (
                json!({"spec": {"replicas": 1, "version": "v1.30.4", "rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0}}}}}),
                None,
                &["spec.rollout.strategy.rollingUpdate.maxSurge"],
            ),
        ];
        for (object, old, fields) in table {
            let got: Vec<String> = kubeadm_control_plane_causes(&object, old.as_ref())
                .into_iter()
                .map(|c| c.field)
                .collect();
            assert_eq!(got, fields, "{object} after {old:?}");
        }
    }

    #[test]
    fn a_skipped_minor_names_the_version_to_go_to_first() {
        assert_eq!(
            messages(&kcp(3, "v1.30.4"), Some(&kcp(3, "v1.28.13"))),
            [
                "spec.version: Forbidden: cannot upgrade from v1.28.13 to v1.30.4 in one step: Kubernetes upgrades go one minor version at a time; upgrade to v1.29.x first"
            ]
        );
    }

    #[test]
    fn immutable_fields_stay() {
        let old = json!({"spec": {"replicas": 3, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/etc/kubernetes/pki"}}}});
        let mut new = old.clone();
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["certificatesDir"] = json!("/pki");
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"] =
            json!({"certSANs": ["a"]});
        assert_eq!(
            messages(&new, Some(&old)),
            [
                "spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir: Forbidden: cannot be changed once the control plane exists; create a new cluster to change it"
            ]
        );
    }

    #[test]
    fn even_replicas_with_external_etcd_are_fine() {
        let object = json!({"spec": {"replicas": 2, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"external": {"endpoints": ["https://e:2379"]}}}}}});
        assert!(messages(&object, None).is_empty());
    }
}
