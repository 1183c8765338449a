//! The KubeadmControlPlane's rules: replicas, the rollout strategy, immutable fields and
//! version upgrades one minor at a time (upstream's `kubeadm_control_plane_webhook.go`).

use serde_json::Value;

use crate::api::common::kubernetes_version;
use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::status::{ApiError, FieldCause};

use super::{at, refuse_with};

/// upstream's KubeadmControlPlane webhook checks.
pub(super) struct KubeadmControlPlaneRules;

/// What a running control plane cannot change: where its certificates and etcd data live,
/// how long its CAs (made once) are valid, stacked versus external etcd, how machines find and
/// announce the API server, and the kind of its infrastructure machines.
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
        "caCertificateValidityPeriodDays",
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
    use serde_json::json;

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
        let old = json!({"spec": {"replicas": 3, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/etc/kubernetes/pki", "caCertificateValidityPeriodDays": 3650, "encryptionAlgorithm": "ECDSA-P256"}}}});
        let mut new = old.clone();
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["certificatesDir"] = json!("/pki");
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"] =
            json!({"certSANs": ["a"]});
        // New certificates may use another key; the CAs, already made, keep their lifetime.
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["encryptionAlgorithm"] =
            json!("RSA-2048");
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["caCertificateValidityPeriodDays"] =
            json!(100);
        assert_eq!(
            messages(&new, Some(&old)),
            [
                "spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir: Forbidden: cannot be changed once the control plane exists; create a new cluster to change it",
                "spec.kubeadmConfigSpec.clusterConfiguration.caCertificateValidityPeriodDays: Forbidden: cannot be changed once the control plane exists; create a new cluster to change it"
            ]
        );
    }

    #[test]
    fn even_replicas_with_external_etcd_are_fine() {
        let object = json!({"spec": {"replicas": 2, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"external": {"endpoints": ["https://e:2379"]}}}}}});
        assert!(messages(&object, None).is_empty());
    }
}
