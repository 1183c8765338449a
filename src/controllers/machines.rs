//! What several reconcilers need of Machines, written once (upstream's `util/collections`
//! and machine helpers): reading and setting one condition, aggregating a condition over many
//! Machines, and the label selector string of a set.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api;
use crate::api::Machine;
use crate::conditions::{self, AggregateInput, MergeReasons, NewCondition, Status};
use crate::reconcile::Result;
use crate::reconcile::common;

/// A Machine's UpToDate condition: True, or False with what differs from its owner's spec.
pub fn up_to_date(differences: &[String]) -> NewCondition {
    if differences.is_empty() {
        NewCondition::new(
            conditions::types::UP_TO_DATE,
            Status::True,
            conditions::reasons::UP_TO_DATE,
        )
    } else {
        NewCondition::new(
            conditions::types::UP_TO_DATE,
            Status::False,
            conditions::reasons::NOT_UP_TO_DATE,
        )
        .message(differences.join("\n"))
    }
}

pub fn condition_of<'a>(m: &'a Machine, t: &str) -> Option<&'a Condition> {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::get(c, t))
}

/// Sets conditions on a Machine, based on its latest version (a conflict means someone
/// else wrote first; the next reconcile sets them again). Nothing is written when they hold.
pub async fn set_machine_conditions(
    api: &Api<Machine>,
    machine: &Machine,
    conditions: Vec<NewCondition>,
) -> Result<()> {
    let mut status = machine.status.clone().unwrap_or_default();
    let before = status.conditions.clone();
    common::set_conditions(
        &mut status.conditions,
        machine.meta().generation,
        conditions,
    );
    if status.conditions == before {
        return Ok(());
    }
    let patch = json!({"metadata": {"resourceVersion": machine.resource_version()}, "status": {"conditions": status.conditions}});
    match api
        .patch_status(
            &machine.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The name of a Machine's Node (also its etcd member's name on a control plane); None until
/// the Node has registered.
pub fn node_name(machine: &Machine) -> Option<&str> {
    machine
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| n.name.as_str())
}

/// A condition of many Machines as one, or True/NoReplicas without Machines.
pub fn aggregate<M: std::borrow::Borrow<Machine>>(
    machines: &[M],
    source: &str,
    target: &str,
    reasons: MergeReasons,
) -> NewCondition {
    if machines.is_empty() {
        return NewCondition::new(target, Status::True, conditions::reasons::NO_REPLICAS);
    }
    let machines: Vec<&Machine> = machines.iter().map(|m| m.borrow()).collect();
    let names: Vec<String> = machines.iter().map(|m| m.name_any()).collect();
    let inputs: Vec<AggregateInput<'_>> = machines
        .iter()
        .zip(&names)
        .map(|(m, name)| AggregateInput {
            kind: "Machine",
            name,
            control_plane: m.labels().contains_key(api::CONTROL_PLANE_LABEL),
            condition: condition_of(m, source),
        })
        .collect();
    conditions::aggregate(&inputs, source, target, &reasons)
}

/// A label selector in string form, for the scale subresource.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Kubernetes versions and how many Machines run each, oldest first.
/// MachinesReady and MachinesUpToDate of an owner of Machines (a MachineSet, a MachinePool, a
/// control plane): their Ready and UpToDate conditions, merged.
pub fn machines_ready_and_up_to_date<M: std::borrow::Borrow<Machine>>(
    machines: &[M],
) -> [NewCondition; 2] {
    [
        aggregate(
            machines,
            conditions::types::READY,
            conditions::types::MACHINES_READY,
            MergeReasons::new(
                conditions::reasons::NOT_READY,
                conditions::reasons::READY_UNKNOWN,
                conditions::reasons::READY,
            ),
        ),
        aggregate(
            machines,
            conditions::types::UP_TO_DATE,
            conditions::types::MACHINES_UP_TO_DATE,
            MergeReasons::new(
                conditions::reasons::NOT_UP_TO_DATE,
                conditions::reasons::UP_TO_DATE_UNKNOWN,
                conditions::reasons::UP_TO_DATE,
            ),
        ),
    ]
}

pub fn versions(versions: impl Iterator<Item = String>) -> Vec<crate::api::common::StatusVersion> {
    merge_versions(versions.map(|version| crate::api::common::StatusVersion {
        version,
        replicas: Some(1),
    }))
}

/// Counts of machines by version (each a `status.versions` entry of a MachineSet, a
/// MachineDeployment, or one Machine) summed into one `status.versions`.
pub fn merge_versions(
    counted: impl Iterator<Item = crate::api::common::StatusVersion>,
) -> Vec<crate::api::common::StatusVersion> {
    let mut counts: std::collections::BTreeMap<String, i32> = std::collections::BTreeMap::new();
    for v in counted {
        *counts.entry(v.version).or_default() += v.replicas.unwrap_or(0);
    }
    let mut out: Vec<crate::api::common::StatusVersion> = counts
        .into_iter()
        .map(|(version, n)| crate::api::common::StatusVersion {
            version,
            replicas: Some(n),
        })
        .collect();
    // By version, not by text: v1.29.9 is older than v1.29.10.
    out.sort_by_key(|v| crate::api::common::kubernetes_version(&v.version));
    out
}

/// What an object made from a Machine template (a Machine from its MachineSet's, a
/// MachineSet's template from its MachineDeployment's) takes from it in place, without a
/// rollout, as upstream propagates it: the template's labels and annotations (added or
/// changed, never removed: others may have set theirs), and the Machine's deletion timeouts,
/// minReadySeconds, readiness gates and taints. `labels`, `annotations` and `spec` are the
/// object's now; the answer is the merge patch of its metadata and of its spec, or None when
/// nothing differs.
pub fn in_place_changes(
    template: &crate::api::machine::MachineTemplateSpec,
    labels: &std::collections::BTreeMap<String, String>,
    annotations: &std::collections::BTreeMap<String, String>,
    spec: &crate::api::machine::MachineSpec,
) -> Option<(serde_json::Value, serde_json::Value)> {
    use serde_json::{Map, Value, json};
    let changed = |want: Option<&std::collections::BTreeMap<String, String>>,
                   have: &std::collections::BTreeMap<String, String>| {
        want.into_iter()
            .flatten()
            .filter(|(k, v)| have.get(*k) != Some(v))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<Map<String, Value>>()
    };
    let meta = template.metadata.as_ref();
    let mut metadata = Map::new();
    let new_labels = changed(meta.and_then(|m| m.labels.as_ref()), labels);
    if !new_labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(new_labels));
    }
    let new_annotations = changed(meta.and_then(|m| m.annotations.as_ref()), annotations);
    if !new_annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(new_annotations));
    }
    let want = &template.spec;
    let value = |v: serde_json::Result<Value>| v.expect("JSON");
    let mut fields = Map::new();
    // A merge patch merges objects: what the template no longer sets is written as null.
    let (want_deletion, had) = (
        value(serde_json::to_value(&want.deletion)),
        value(serde_json::to_value(&spec.deletion)),
    );
    if want_deletion != had {
        let mut deletion = want_deletion;
        if let (Some(keep), Some(old)) = (deletion.as_object_mut(), had.as_object()) {
            for key in old.keys() {
                keep.entry(key.clone()).or_insert(Value::Null);
            }
        }
        fields.insert("deletion".into(), deletion);
    }
    for (name, want, have) in [
        (
            "minReadySeconds",
            json!(want.min_ready_seconds),
            json!(spec.min_ready_seconds),
        ),
        (
            "readinessGates",
            value(serde_json::to_value(&want.readiness_gates)),
            value(serde_json::to_value(&spec.readiness_gates)),
        ),
        (
            "taints",
            value(serde_json::to_value(&want.taints)),
            value(serde_json::to_value(&spec.taints)),
        ),
    ] {
        if want != have {
            fields.insert(name.into(), want);
        }
    }
    (!metadata.is_empty() || !fields.is_empty())
        .then_some((Value::Object(metadata), Value::Object(fields)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_counted_oldest_first() {
        let v = versions(
            ["v1.29.10", "v1.29.9", "v1.29.10", "v1.30.0"]
                .map(String::from)
                .into_iter(),
        );
        let got: Vec<(&str, i32)> = v
            .iter()
            .map(|v| (v.version.as_str(), v.replicas.unwrap()))
            .collect();
        assert_eq!(got, [("v1.29.9", 1), ("v1.29.10", 2), ("v1.30.0", 1)]);
    }

    #[test]
    fn in_place_fields_reach_what_was_made_from_the_template() {
        let template: crate::api::machine::MachineTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"pool": "a", "tier": "gold"}},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"},
                     "deletion": {"nodeDrainTimeoutSeconds": 10},
                     "taints": [{"key": "k", "effect": "NoSchedule", "propagation": "Always"}]}
        }))
        .unwrap();
        let mut spec = template.spec.clone();
        let labels = std::collections::BTreeMap::from([
            ("pool".to_string(), "a".to_string()),
            ("tier".to_string(), "gold".to_string()),
            ("theirs".to_string(), "x".to_string()),
        ]);
        let none = std::collections::BTreeMap::new();
        assert_eq!(
            in_place_changes(&template, &labels, &none, &spec),
            None,
            "up to date"
        );
        spec.deletion = serde_json::from_value(
            serde_json::json!({"nodeDrainTimeoutSeconds": 20, "nodeDeletionTimeoutSeconds": 5}),
        )
        .unwrap();
        spec.taints = None;
        let (metadata, changed) =
            in_place_changes(&template, &std::collections::BTreeMap::new(), &none, &spec).unwrap();
        assert_eq!(
            metadata,
            serde_json::json!({"labels": {"pool": "a", "tier": "gold"}})
        );
        assert_eq!(
            changed,
            serde_json::json!({
                "deletion": {"nodeDrainTimeoutSeconds": 10, "nodeDeletionTimeoutSeconds": null},
                "taints": [{"key": "k", "effect": "NoSchedule", "propagation": "Always"}],
            })
        );
    }

    #[test]
    fn the_versions_of_several_sets_add_up_by_version() {
        let of = |version: &str, replicas: i32| crate::api::common::StatusVersion {
            version: version.into(),
            replicas: Some(replicas),
        };
        let merged =
            merge_versions([of("v1.30.4", 2), of("v1.29.10", 1), of("v1.30.4", 3)].into_iter());
        assert_eq!(merged, [of("v1.29.10", 1), of("v1.30.4", 5)]);
    }
}
