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

mod cluster;
mod cluster_class;
mod cluster_resource_set;
pub mod conversion;
mod kubeadm_control_plane;
mod machine_drain_rule;
mod machine_pool;
pub mod replicas;

use cluster::ClusterRules;
pub use cluster::cluster_causes;
use cluster_class::ClusterClassRules;
pub use cluster_class::cluster_class_causes;
use cluster_resource_set::ClusterResourceSetRules;
use kubeadm_control_plane::KubeadmControlPlaneRules;
pub use kubeadm_control_plane::kubeadm_control_plane_causes;
use machine_drain_rule::MachineDrainRuleRules;
use machine_pool::MachinePoolRules;
use replicas::ReplicasDefault;

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
        kind: "ClusterClass",
        plural: "clusterclasses",
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
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachinePool",
        plural: "machinepools",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineHealthCheck",
        plural: "machinehealthchecks",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineDrainRule",
        plural: "machinedrainrules",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "addons.cluster.x-k8s.io",
        kind: "ClusterResourceSet",
        plural: "clusterresourcesets",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "addons.cluster.x-k8s.io",
        kind: "ClusterResourceSetBinding",
        plural: "clusterresourcesetbindings",
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
    // Deletion protection: a Cluster or ClusterClass annotated so stays, whoever asks (and so
    // does its namespace).
    for plural in ["clusters", "clusterclasses"] {
        chain.guard_deletion("cluster.x-k8s.io", plural, protected);
    }
    chain.register(Arc::new(ClusterNameLabel));
    chain.register(Arc::new(VersionDefaults));
    chain.register(Arc::new(SelectorMatchesTemplate));
    chain.register(Arc::new(ReplicasDefault));
    chain.register(Arc::new(ClusterRules));
    chain.register(Arc::new(ClusterClassRules));
    chain.register(Arc::new(KubeadmControlPlaneRules));
    chain.register(Arc::new(MachineDrainRuleRules));
    chain.register(Arc::new(MachinePoolRules));
    chain.register(Arc::new(ClusterResourceSetRules));
}

/// Why an object with deletion protection may not be deleted.
fn protected(object: &Value) -> Option<String> {
    let meta = &object["metadata"];
    (meta["annotations"][crate::api::DELETION_PROTECTION_ANNOTATION] == "true").then(|| {
        let kind = object["kind"].as_str().unwrap_or_default();
        crate::api::common::deletion_protection_message(
            kind,
            &kind.to_lowercase(),
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
        )
    })
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
        "MachineSet" | "MachineDeployment" | "MachinePool" => {
            Some(&["spec", "template", "spec", "version"])
        }
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

/// The `cluster.x-k8s.io/cluster-name` label from `spec.clusterName`, on the kinds that name
/// their Cluster, as upstream's defaulting webhooks set it: the Cluster finds its
/// MachineDeployments and MachinePools by that label, so one created without it would be
/// missed until its controller labelled it (a Cluster with workers on the way reported
/// Available with none). A MachineSet's and a MachineDeployment's selector and Machine template
/// get it too, so their Machines carry it and are found by it.
struct ClusterNameLabel;

impl Admission for ClusterNameLabel {
    fn name(&self) -> &str {
        "cluster-name.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io"
            && matches!(
                kind,
                "Machine"
                    | "MachineSet"
                    | "MachineDeployment"
                    | "MachinePool"
                    | "MachineHealthCheck"
            )
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        let Some(cluster) = object["spec"]["clusterName"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(String::from)
        else {
            // The schema says clusterName is required; validation reports it.
            return Ok(());
        };
        let metadata = &mut object["metadata"];
        if !metadata["labels"].is_object() {
            metadata["labels"] = json!({});
        }
        metadata["labels"][crate::api::CLUSTER_NAME_LABEL] = json!(cluster);
        if matches!(request.kind, "MachineSet" | "MachineDeployment") {
            for path in [
                &["spec", "selector", "matchLabels"][..],
                &["spec", "template", "metadata", "labels"],
            ] {
                let labels = path.iter().fold(&mut *object, |v, k| &mut v[*k]);
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels[crate::api::CLUSTER_NAME_LABEL] = json!(cluster);
            }
        }
        Ok(())
    }
}

/// A MachineSet's or MachineDeployment's selector must select the Machines its template
/// makes, as upstream's webhooks require: one that does not would make Machines it never sees
/// as its own, without end.
struct SelectorMatchesTemplate;

impl Admission for SelectorMatchesTemplate {
    fn name(&self) -> &str {
        "selector.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && matches!(kind, "MachineSet" | "MachineDeployment")
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let selector = &object["spec"]["selector"];
        let labels: std::collections::BTreeMap<String, String> =
            object["spec"]["template"]["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
        let causes = match crate::apiserver::selector::LabelSelector::from_object(selector) {
            Err(e) => vec![FieldCause::invalid("spec.selector", e)],
            Ok(parsed) if !parsed.matches(&labels) => vec![FieldCause::forbidden(
                "spec.template.metadata.labels",
                format!(
                    "must match spec.selector {:?}",
                    crate::apiserver::selector::format(selector)
                ),
            )],
            Ok(_) => Vec::new(),
        };
        refuse_with(request, causes)
    }
}

/// `v1.30.4` for `1.30.4` on Machines, MachineSets, MachineDeployments, MachinePools and
/// control planes.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_webhook_target_has_rules_and_every_rule_a_target() {
        let rules: Vec<Arc<dyn Admission>> = vec![
            Arc::new(ClusterNameLabel),
            Arc::new(VersionDefaults),
            Arc::new(SelectorMatchesTemplate),
            Arc::new(ReplicasDefault),
            Arc::new(ClusterRules),
            Arc::new(ClusterClassRules),
            Arc::new(KubeadmControlPlaneRules),
            Arc::new(MachineDrainRuleRules),
            Arc::new(ClusterResourceSetRules),
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
            ("cluster.x-k8s.io", "ClusterClass"),
            ("cluster.x-k8s.io", "Machine"),
            ("cluster.x-k8s.io", "MachineSet"),
            ("cluster.x-k8s.io", "MachineDeployment"),
            ("cluster.x-k8s.io", "MachineHealthCheck"),
            ("cluster.x-k8s.io", "MachineDrainRule"),
            ("addons.cluster.x-k8s.io", "ClusterResourceSet"),
            ("addons.cluster.x-k8s.io", "ClusterResourceSetBinding"),
            ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
        ] {
            assert!(
                TARGETS.iter().any(|t| t.group == group && t.kind == kind),
                "the rules take {kind} but no webhook configuration sends it"
            );
        }
    }

    #[test]
    fn the_cluster_name_label_follows_spec_cluster_name() {
        let request = |kind| Request {
            operation: Operation::Create,
            group: "cluster.x-k8s.io",
            version: "v1beta2",
            kind,
            namespace: Some("default"),
            name: "a",
            old: None,
            dry_run: false,
            lookup: None,
        };
        for (kind, object, label) in [
            (
                "MachineDeployment",
                json!({"metadata": {"name": "a"}, "spec": {"clusterName": "c1"}}),
                Some("c1"),
            ),
            (
                "Machine",
                json!({"metadata": {"labels": {"keep": "me", "cluster.x-k8s.io/cluster-name": "wrong"}}, "spec": {"clusterName": "c2"}}),
                Some("c2"),
            ),
            ("MachineSet", json!({"metadata": {}, "spec": {}}), None),
        ] {
            let mut object = object;
            ClusterNameLabel
                .default(&request(kind), &mut object)
                .unwrap();
            assert_eq!(
                object["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"].as_str(),
                label,
                "{kind}"
            );
        }
        // A MachineDeployment's selector and Machine template get it too, beside their own.
        let mut md =
            json!({"spec": {"clusterName": "c1", "selector": {"matchLabels": {"pool": "a"}}}});
        ClusterNameLabel
            .default(&request("MachineDeployment"), &mut md)
            .unwrap();
        assert_eq!(
            md["spec"]["selector"]["matchLabels"],
            json!({"pool": "a", "cluster.x-k8s.io/cluster-name": "c1"})
        );
        assert_eq!(
            md["spec"]["template"]["metadata"]["labels"],
            json!({"cluster.x-k8s.io/cluster-name": "c1"})
        );
    }

    #[test]
    fn a_selector_must_select_the_machines_of_its_template() {
        let request = |operation| Request {
            operation,
            group: "cluster.x-k8s.io",
            version: "v1beta2",
            kind: "MachineDeployment",
            namespace: Some("default"),
            name: "md",
            old: None,
            dry_run: false,
            lookup: None,
        };
        let md = |selector: Value, labels: Value| json!({"spec": {"selector": selector, "template": {"metadata": {"labels": labels}}}});
        let good = md(
            json!({"matchLabels": {"pool": "a"}}),
            json!({"pool": "a", "extra": "x"}),
        );
        assert!(
            SelectorMatchesTemplate
                .validate(&request(Operation::Create), &good)
                .is_ok()
        );
        let bad = md(json!({"matchLabels": {"pool": "a"}}), json!({"pool": "b"}));
        let e = SelectorMatchesTemplate
            .validate(&request(Operation::Update), &bad)
            .unwrap_err();
        assert_eq!(e.code, 422);
        let causes = e.details.unwrap()["causes"].to_string();
        assert!(
            causes.contains("spec.template.metadata.labels")
                && causes.contains("must match spec.selector \\\"pool=a\\\""),
            "{causes}"
        );
        // Deleting stays possible whatever the object holds.
        assert!(
            SelectorMatchesTemplate
                .validate(&request(Operation::Delete), &bad)
                .is_ok()
        );
        let broken = md(
            json!({"matchExpressions": [{"key": "pool", "operator": "Near"}]}),
            json!({}),
        );
        assert!(
            SelectorMatchesTemplate
                .validate(&request(Operation::Create), &broken)
                .unwrap_err()
                .details
                .unwrap()["causes"]
                .to_string()
                .contains("spec.selector")
        );
    }

    #[test]
    fn versions_get_their_v() {
        let mut v = json!("1.29.10");
        prefix_v(&mut v);
        assert_eq!(v, "v1.29.10");
    }
}
