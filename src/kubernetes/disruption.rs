//! The disruption controller, as kube-controller-manager's: each PodDisruptionBudget's status
//! says how many of its Pods are expected (the scale of their controllers), how many must stay
//! healthy, how many are, and so how many may be disrupted now, which the Eviction API then
//! spends one at a time (`disruptedPods` remembers evictions the cache has not seen yet).
//!
//! [`status`] computes one budget's status, purely; [`run`] keeps every budget of a cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::replica_set::{is_active, ready_since};
use super::selectors::label_selector_matches;

/// How long an eviction stays in `disruptedPods` waiting for its Pod to go (kube's
/// `DeletionTimeout`).
const DISRUPTED_TIMEOUT_SECONDS: i64 = 120;

/// The workload controllers' scales, by `kind/namespace/name`, that a budget's expected count
/// is made of.
#[derive(Default)]
pub struct Scales(pub BTreeMap<String, i32>);

impl Scales {
    /// The scale of the Pod's controller: a ReplicaSet's (its Deployment's when it has one), a
    /// StatefulSet's; None for Pods of other controllers or none.
    fn of(&self, pod: &Pod, owners: &BTreeMap<String, String>) -> Option<(String, i32)> {
        let controller = pod
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true))?;
        let ns = pod.namespace().unwrap_or_default();
        let mut key = format!("{}/{ns}/{}", controller.kind, controller.name);
        if let Some(deployment) = owners.get(&key) {
            key = deployment.clone();
        }
        self.0.get(&key).map(|s| (key, *s))
    }
}

fn resolve(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| ((p * i64::from(total) + 99) / 100) as i32),
    }
}

/// A budget's status, from the Pods of its namespace at `now` (Unix seconds).
pub fn status(
    budget: &PodDisruptionBudget,
    pods: &[&Pod],
    scales: &Scales,
    owners: &BTreeMap<String, String>,
    now: i64,
) -> Value {
    let spec = budget.spec.clone().unwrap_or_default();
    let covered: Vec<&Pod> = match &spec.selector {
        Some(selector) => pods
            .iter()
            .copied()
            .filter(|p| is_active(p) && label_selector_matches(selector, &p.labels().clone()))
            .collect(),
        None => Vec::new(),
    };
    // Evictions not yet seen through: their Pods are not healthy any more.
    let mut disrupted: BTreeMap<String, String> = BTreeMap::new();
    for (name, at) in budget
        .status
        .as_ref()
        .and_then(|s| s.disrupted_pods.clone())
        .unwrap_or_default()
    {
        let fresh = now - at.0.as_second() < DISRUPTED_TIMEOUT_SECONDS;
        if fresh && covered.iter().any(|p| p.name_any() == name) {
            disrupted.insert(name, at.0.to_string());
        }
    }
    let healthy = covered
        .iter()
        .filter(|p| ready_since(p).is_some() && !disrupted.contains_key(&p.name_any()))
        .count() as i32;
    let integer_min = matches!(spec.min_available, Some(IntOrString::Int(_)));
    let expected = if integer_min || spec.selector.is_none() {
        covered.len() as i32
    } else {
        // A percentage or maxUnavailable counts from the controllers' scale, so that a Pod
        // evicted and not yet replaced does not shrink what the budget protects.
        let mut seen: BTreeMap<String, i32> = BTreeMap::new();
        let mut uncontrolled = 0;
        for p in &covered {
            match scales.of(p, owners) {
                Some((key, scale)) => {
                    seen.insert(key, scale);
                }
                None => uncontrolled += 1,
            }
        }
        seen.values().sum::<i32>() + uncontrolled
    };
    let desired = match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), _) => resolve(min, expected),
        (None, Some(max)) => (expected - resolve(max, expected)).max(0),
        (None, None) => 0,
    };
    let allowed = (healthy - desired).max(0);
    let generation = budget.metadata.generation.unwrap_or(0);
    let (condition_status, reason, message) = if allowed > 0 {
        ("True", "SufficientPods", "")
    } else {
        ("False", "InsufficientPods", "")
    };
    // The transition time stays while the condition's status does.
    let transition = budget
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionAllowed"))
        .filter(|c| c.status == condition_status)
        .map_or_else(super::now, |c| c.last_transition_time.0.to_string());
    json!({
        "observedGeneration": generation,
        "disruptedPods": disrupted,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": condition_status,
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": transition,
        }],
    })
}

fn differs(budget: &PodDisruptionBudget, wanted: &Value) -> bool {
    let current =
        serde_json::to_value(budget.status.clone().unwrap_or_default()).unwrap_or_default();
    let numbers = [
        "observedGeneration",
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
    ];
    numbers
        .iter()
        .any(|k| current[k].as_i64().unwrap_or(0) != wanted[k].as_i64().unwrap_or(0))
        || current["disruptedPods"].as_object().map_or(0, |o| o.len())
            != wanted["disruptedPods"].as_object().map_or(0, |o| o.len())
        || current["conditions"][0]["status"] != wanted["conditions"][0]["status"]
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (budgets, watch_budgets) = watches.cache::<PodDisruptionBudget>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (sets, watch_sets) = watches.cache::<ReplicaSet>(&client);
    let (deployments, watch_deployments) = watches.cache::<Deployment>(&client);
    let (stateful, watch_stateful) = watches.cache::<StatefulSet>(&client);
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(10)).await;
            let mut scales = Scales::default();
            let mut owners = BTreeMap::new();
            for d in deployments.state() {
                let key = format!(
                    "Deployment/{}/{}",
                    d.namespace().unwrap_or_default(),
                    d.name_any()
                );
                scales.0.insert(key, d.spec.replicas.unwrap_or(1));
            }
            for rs in sets.state() {
                let key = format!(
                    "ReplicaSet/{}/{}",
                    rs.namespace().unwrap_or_default(),
                    rs.name_any()
                );
                scales.0.insert(key.clone(), rs.spec.replicas.unwrap_or(1));
                if let Some(d) = rs
                    .owner_references()
                    .iter()
                    .find(|r| r.controller == Some(true) && r.kind == "Deployment")
                {
                    owners.insert(
                        key,
                        format!(
                            "Deployment/{}/{}",
                            rs.namespace().unwrap_or_default(),
                            d.name
                        ),
                    );
                }
            }
            for s in stateful.state() {
                let key = format!(
                    "StatefulSet/{}/{}",
                    s.namespace().unwrap_or_default(),
                    s.name_any()
                );
                scales.0.insert(key, s.spec.replicas.unwrap_or(1));
            }
            let pods = pods.state();
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            for budget in budgets.state() {
                let mine: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.namespace() == budget.namespace())
                    .map(|p| &**p)
                    .collect();
                let wanted = status(&budget, &mine, &scales, &owners, now);
                if !differs(&budget, &wanted) {
                    continue;
                }
                // A merge patch with the whole map: entries the controller let go are nulls.
                let mut patch = wanted;
                if let Some(old) = budget
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                {
                    for name in old.keys() {
                        if patch["disruptedPods"].get(name).is_none() {
                            patch["disruptedPods"][name] = Value::Null;
                        }
                    }
                }
                if let Err(e) = super::write_status(&client, &*budget, patch).await {
                    super::report_failure("disruption-controller", &budget.name_any(), &e);
                }
            }
        }
    };
    tokio::join!(
        watch_budgets,
        watch_pods,
        watch_sets,
        watch_deployments,
        watch_stateful,
        work
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool, rs: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": "u", "controller": true}]},
            "spec": {"containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn budget(spec: Value, disrupted: Value) -> PodDisruptionBudget {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "generation": 2},
            "spec": spec,
            "status": {"disruptedPods": disrupted, "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
        }))
        .unwrap()
    }

    #[test]
    fn budgets_count_as_the_disruption_controller() {
        // A Deployment of 3 (its ReplicaSet web-1) with one Pod evicted and not yet replaced.
        let pods = [
            pod("a", true, "web-1"),
            pod("b", true, "web-1"),
            pod("c", false, "web-1"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let scales = Scales(BTreeMap::from([
            ("ReplicaSet/default/web-1".to_string(), 3),
            ("Deployment/default/web".to_string(), 4),
        ]));
        let owners = BTreeMap::from([(
            "ReplicaSet/default/web-1".to_string(),
            "Deployment/default/web".to_string(),
        )]);
        let now = 1_800_000_000;
        for (spec, disrupted, (expected, desired, healthy, allowed)) in [
            (json!({"minAvailable": 1}), json!({}), (3, 1, 2, 1)),
            (json!({"minAvailable": 2}), json!({}), (3, 2, 2, 0)),
            (json!({"minAvailable": "50%"}), json!({}), (4, 2, 2, 0)),
            (json!({"maxUnavailable": 1}), json!({}), (4, 3, 2, 0)),
            (json!({"maxUnavailable": "100%"}), json!({}), (4, 0, 2, 2)),
            // An eviction in flight: `a` no longer counts as healthy.
            (
                json!({"minAvailable": 1}),
                json!({"a": "2027-01-15T08:00:00Z"}),
                (3, 1, 1, 0),
            ),
        ] {
            let now = if disrupted.as_object().unwrap().is_empty() {
                now
            } else {
                "2027-01-15T08:00:30Z"
                    .parse::<k8s_openapi::jiff::Timestamp>()
                    .unwrap()
                    .as_second()
            };
            let s = status(
                &budget(spec.clone(), disrupted),
                &refs,
                &scales,
                &owners,
                now,
            );
            assert_eq!(
                (
                    s["expectedPods"].as_i64().unwrap(),
                    s["desiredHealthy"].as_i64().unwrap(),
                    s["currentHealthy"].as_i64().unwrap(),
                    s["disruptionsAllowed"].as_i64().unwrap()
                ),
                (expected, desired, healthy, allowed),
                "{spec}"
            );
        }
    }

    #[test]
    fn an_eviction_is_forgotten_after_two_minutes() {
        let pods = [pod("a", true, "web-1")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let b = budget(
            json!({"minAvailable": 0}),
            json!({"a": "2027-01-15T08:00:00Z"}),
        );
        let at = "2027-01-15T08:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let s = status(&b, &refs, &Scales::default(), &BTreeMap::new(), at + 121);
        assert_eq!(s["disruptedPods"], json!({}));
        assert_eq!(s["currentHealthy"], 1);
    }
}
