//! The StatefulSet controller, as kube-controller-manager's: Pods with stable names
//! (`<set>-<ordinal>`, from `spec.ordinals.start`), each its own hostname under the set's
//! `serviceName`, and a PersistentVolumeClaim per `volumeClaimTemplates` entry that outlives
//! the Pod. Under `OrderedReady` (the default) a Pod is created only once every lower ordinal
//! is Running and Ready, and removed highest first, one at a time; under `Parallel` all at
//! once. A changed template rolls the Pods from the highest ordinal down to `partition`, one
//! at a time, each waiting for the others to be Ready (`RollingUpdate`), or only as they are
//! deleted (`OnDelete`). The status carries the counters and the current and update revisions
//! that `kubectl rollout status` reads.
//!
//! [`plan`] decides for one StatefulSet, purely; [`run`] keeps every StatefulSet of a cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::daemon_set::REVISION_LABEL;
use super::replica_set::{controller_of, is_active, is_available, ready_since};

const COMPONENT: &str = "statefulset-controller";
/// The labels kube-controller-manager puts on a StatefulSet's Pods.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// What a StatefulSet needs done now.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Claims to create before the Pods that mount them.
    pub claims: Vec<PersistentVolumeClaim>,
    /// Pods to create.
    pub create: Vec<Pod>,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: Value,
}

/// The hash of the StatefulSet's current template (with its collision count).
fn revision_hash(set: &StatefulSet) -> String {
    let collisions = set.status.as_ref().and_then(|s| s.collision_count);
    super::deployment::template_hash(&set.spec.template, collisions.unwrap_or(0))
}

/// The revision name of the current template: `<set>-<hash>`, its Pods'
/// `controller-revision-hash`.
fn update_revision(set: &StatefulSet) -> String {
    super::history::revision_name(&set.name_any(), &revision_hash(set))
}

/// What the StatefulSet's history needs (its revisions among `revisions`, its Pods `owned`):
/// the revision of its template, named as its Pods' label and its status's revisions.
pub fn history(
    set: &StatefulSet,
    revisions: &[std::sync::Arc<ControllerRevision>],
    owned: &[&Pod],
) -> super::history::Plan {
    let status = set.status.as_ref();
    let live = owned
        .iter()
        .filter_map(|p| revision_of(p).cloned())
        .chain(status.and_then(|s| s.current_revision.clone()))
        .chain(status.and_then(|s| s.update_revision.clone()))
        .collect();
    let current = super::history::Current {
        template: &set.spec.template,
        hash: revision_hash(set),
        collision_count: status.and_then(|s| s.collision_count).unwrap_or(0),
    };
    let mine = super::history::owned_by(set, revisions);
    super::history::plan(set, &current, &mine, &live, set.spec.revision_history_limit)
}

fn revision_of(pod: &Pod) -> Option<&String> {
    pod.labels().get(REVISION_LABEL)
}

/// The ordinal of a Pod of the set, from its name.
fn ordinal(set: &str, pod: &Pod) -> Option<i32> {
    pod.name_any()
        .strip_prefix(set)?
        .strip_prefix('-')?
        .parse()
        .ok()
        .filter(|n: &i32| *n >= 0)
}

fn healthy(pod: &Pod) -> bool {
    is_active(pod)
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && ready_since(pod).is_some()
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The claim of template `template` for the Pod `pod_name`: `<template>-<pod>`.
fn claim_name(template: &str, pod_name: &str) -> String {
    format!("{template}-{pod_name}")
}

/// The Pod of ordinal `ordinal`: the template, its stable name and hostname, the set's labels,
/// and its claims mounted in place of the templates' volumes of the same name.
pub fn pod_for(set: &StatefulSet, ordinal: i32, revision: &str) -> Pod {
    let spec = set.spec.clone();
    let name = format!("{}-{ordinal}", set.name_any());
    let labels = [
        (POD_NAME_LABEL, name.clone()),
        (POD_INDEX_LABEL, ordinal.to_string()),
        (REVISION_LABEL, revision.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut pod = super::pod_from_template(set, spec.template, labels);
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(name.clone());
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.hostname = Some(name.clone());
    if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
        pod_spec.subdomain = spec.service_name.clone();
    }
    let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
    for template in spec.volume_claim_templates.iter().flatten() {
        let claim = template.name_any();
        volumes.retain(|v| v.name != claim);
        volumes.push(Volume {
            name: claim.clone(),
            persistent_volume_claim: Some(
                k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(&claim, &name),
                    read_only: None,
                },
            ),
            ..Default::default()
        });
    }
    if volumes.is_empty() {
        pod_spec.volumes = None;
    }
    pod
}

/// The claims the Pod of `ordinal` mounts, as created: named `<template>-<pod>`, labelled with
/// the set's selector, owned by no one (the default `Retain` policy keeps them after the Pod
/// and the set).
fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.clone();
    let pod_name = format!("{}-{ordinal}", set.name_any());
    let selector_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .into_iter()
        .flatten()
        .map(|mut claim| {
            let template = claim.name_any();
            let mut labels = claim.metadata.labels.take().unwrap_or_default();
            labels.extend(selector_labels.clone());
            claim.metadata = kube::api::ObjectMeta {
                name: Some(claim_name(&template, &pod_name)),
                namespace: set.namespace(),
                labels: Some(labels),
                annotations: claim.metadata.annotations.take(),
                ..Default::default()
            };
            claim.status = None;
            claim
        })
        .collect()
}

/// What one StatefulSet needs, from the Pods it owns and the claims of its namespace (by
/// name), at `now` (Unix seconds).
pub fn plan(
    set: &StatefulSet,
    pods: &[&Pod],
    claims: &std::collections::BTreeSet<String>,
    now: i64,
) -> Plan {
    let spec = set.spec.clone();
    let name = set.name_any();
    let update = update_revision(set);
    let current = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone())
        .unwrap_or_else(|| update.clone());
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let start = spec
        .ordinals
        .as_ref()
        .and_then(|o| o.start)
        .unwrap_or(0)
        .max(0);
    let wanted = start..start + replicas;
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let on_delete = strategy.type_.as_deref() == Some("OnDelete");
    let partition = strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let by_ordinal: BTreeMap<i32, &Pod> = pods
        .iter()
        .filter_map(|p| Some((ordinal(&name, p)?, *p)))
        .collect();
    let mut plan = Plan::default();
    let deleting = set.metadata.deletion_timestamp.is_some();
    // Pods to make or replace, lowest first; OrderedReady stops at the first that is not
    // Running and Ready.
    let mut all_healthy = true;
    if !deleting {
        for ordinal in wanted.clone() {
            match by_ordinal.get(&ordinal) {
                None => {
                    for claim in claims_for(set, ordinal) {
                        if !claims.contains(&claim.name_any()) {
                            plan.claims.push(claim);
                        }
                    }
                    plan.create.push(pod_for(set, ordinal, &update));
                    all_healthy = false;
                    if !parallel {
                        break;
                    }
                }
                // A finished Pod is replaced: a StatefulSet's Pods are meant to run.
                Some(pod) if finished(pod) && pod.metadata.deletion_timestamp.is_none() => {
                    plan.delete.push(pod.name_any());
                    all_healthy = false;
                    if !parallel {
                        break;
                    }
                }
                Some(pod) if !healthy(pod) => {
                    all_healthy = false;
                    if !parallel {
                        break;
                    }
                }
                Some(_) => {}
            }
        }
    }
    // Ordinals out of range go highest first, once the rest are healthy (all at once when
    // Parallel).
    let condemned: Vec<&Pod> = by_ordinal
        .iter()
        .rev()
        .filter(|(o, p)| !wanted.contains(*o) && p.metadata.deletion_timestamp.is_none())
        .map(|(_, p)| *p)
        .collect();
    let terminating = by_ordinal
        .values()
        .any(|p| p.metadata.deletion_timestamp.is_some());
    if !deleting && (parallel || (all_healthy && !terminating)) {
        let take = if parallel { condemned.len() } else { 1 };
        plan.delete
            .extend(condemned.iter().take(take).map(|p| p.name_any()));
    }
    // A rolling update: the highest outdated Pod at or above the partition, once every Pod
    // is healthy and nothing else is going.
    let rolling = !deleting && !on_delete && all_healthy && plan.delete.is_empty() && !terminating;
    if rolling {
        let outdated = by_ordinal
            .iter()
            .rev()
            .filter(|(o, _)| wanted.contains(*o) && **o >= start + partition)
            .find(|(_, p)| revision_of(p) != Some(&update));
        if let Some((_, pod)) = outdated {
            plan.delete.push(pod.name_any());
        }
    }
    // The status, from the Pods as they are.
    let active: Vec<&&Pod> = pods.iter().filter(|p| is_active(p)).collect();
    let count = |f: &dyn Fn(&Pod) -> bool| active.iter().filter(|p| f(p)).count() as i32;
    let min_ready = i64::from(spec.min_ready_seconds.unwrap_or(0));
    let updated = count(&|p| revision_of(p) == Some(&update));
    let ready = count(&|p| ready_since(p).is_some());
    let rolled = updated == replicas && ready == replicas && active.len() as i32 == replicas;
    let current = if rolled { update.clone() } else { current };
    let status = json!({
        "observedGeneration": set.metadata.generation.unwrap_or(0),
        "replicas": active.len(),
        "readyReplicas": ready,
        "availableReplicas": count(&|p| is_available(p, min_ready, now)),
        "currentReplicas": count(&|p| revision_of(p) == Some(&current)),
        "updatedReplicas": updated,
        "currentRevision": current,
        "updateRevision": update,
        "collisionCount": set.status.as_ref().and_then(|s| s.collision_count).unwrap_or(0),
    });
    plan.status = status;
    plan
}

fn status_differs(set: &StatefulSet, wanted: &Value) -> bool {
    let current = serde_json::to_value(set.status.clone().unwrap_or_default()).unwrap_or_default();
    super::counters_differ(
        &set.status,
        wanted,
        &[
            "observedGeneration",
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "currentReplicas",
            "updatedReplicas",
        ],
    ) || current["currentRevision"] != wanted["currentRevision"]
        || current["updateRevision"] != wanted["updateRevision"]
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (sets, watch_sets) = watches.cache::<StatefulSet>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (claims, watch_claims) = watches.cache::<PersistentVolumeClaim>(&client);
    let (revisions, watch_revisions) = watches.cache::<ControllerRevision>(&client);
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let pods = pods.state();
            let claims = claims.state();
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let revisions = revisions.state();
            for set in sets.state() {
                let uid = set.uid().unwrap_or_default();
                let owned: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| controller_of(&***p).as_deref() == Some(uid.as_str()))
                    .map(|p| &**p)
                    .collect();
                let claim_names = claims
                    .iter()
                    .filter(|c| c.namespace() == set.namespace())
                    .map(|c| c.name_any())
                    .collect();
                let history = history(&set, &revisions, &owned);
                if !super::keep_history(&client, &*set, &history, COMPONENT).await {
                    continue;
                }
                let plan = plan(&set, &owned, &claim_names, now);
                if let Err(e) = sync(&client, &set, &plan).await {
                    super::report_failure(COMPONENT, &set.name_any(), &e);
                }
            }
        }
    };
    tokio::join!(watch_sets, watch_pods, watch_claims, watch_revisions, work);
}

/// Carries out a plan. A Pod or claim that exists already (the cache had not shown it yet) is
/// as good as made.
async fn sync(client: &Client, set: &StatefulSet, plan: &Plan) -> Result<(), kube::Error> {
    let namespace = set.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    let name = set.name_any();
    let first_pod = plan
        .create
        .first()
        .map(|p| p.name_any())
        .unwrap_or_default();
    for claim in &plan.claims {
        let message = format!(
            "create Claim {} for Pod {first_pod} in StatefulSet {name} success",
            claim.name_any()
        );
        let result = claims.create(&PostParams::default(), claim).await;
        super::record_write(
            client,
            set,
            COMPONENT,
            ("SuccessfulCreate", message),
            result,
        )
        .await?;
    }
    for pod in &plan.create {
        let message = format!(
            "create Pod {} in StatefulSet {name} successful",
            pod.name_any()
        );
        let result = pods.create(&PostParams::default(), pod).await;
        super::record_write(
            client,
            set,
            COMPONENT,
            ("SuccessfulCreate", message),
            result,
        )
        .await?;
    }
    for pod in &plan.delete {
        let message = format!("delete Pod {pod} in StatefulSet {name} successful");
        let result = pods.delete(pod, &DeleteParams::default()).await;
        super::record_write(
            client,
            set,
            COMPONENT,
            ("SuccessfulDelete", message),
            result,
        )
        .await?;
    }
    if status_differs(set, &plan.status) {
        super::write_status(client, set, plan.status.clone()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn set(spec: Value) -> StatefulSet {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "db"}});
        spec["serviceName"] = json!("db");
        spec["template"] = json!({"metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "db", "image": "db:1"}]}});
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "default", "uid": "set-1", "generation": 1},
            "spec": spec,
        }))
        .unwrap()
    }

    /// A Pod of the set at `ordinal`, made from its template, in `phase` and ready or not.
    fn member(s: &StatefulSet, ordinal: i32, ready: bool) -> Pod {
        let mut pod = pod_for(s, ordinal, &update_revision(s));
        pod.status = serde_json::from_value(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        }))
        .unwrap();
        pod
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn ordered_ready_makes_one_pod_at_a_time_lowest_first() {
        let s = set(json!({"replicas": 3}));
        let (p0, p1_unready) = (member(&s, 0, true), member(&s, 1, false));
        let none = BTreeSet::new();
        for (pods, create) in [
            (vec![], vec!["db-0"]),
            (vec![&p0], vec!["db-1"]),
            (vec![&p0, &p1_unready], vec![]),
        ] {
            let plan = plan(&s, &pods, &none, 0);
            assert_eq!(
                names(&plan.create),
                create,
                "{:?}",
                names(&pods.iter().map(|p| (*p).clone()).collect::<Vec<_>>())
            );
            assert!(plan.delete.is_empty());
        }
        let parallel = set(json!({"replicas": 3, "podManagementPolicy": "Parallel"}));
        let plan = plan(&parallel, &[], &none, 0);
        assert_eq!(names(&plan.create), ["db-0", "db-1", "db-2"]);
    }

    #[test]
    fn pods_have_stable_names_hostnames_labels_and_claims() {
        let s = set(json!({"replicas": 1, "volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}));
        let plan = plan(&s, &[], &BTreeSet::new(), 0);
        let pod = &plan.create[0];
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            (spec.hostname.as_deref(), spec.subdomain.as_deref()),
            (Some("db-0"), Some("db"))
        );
        assert_eq!(pod.labels()[POD_NAME_LABEL], "db-0");
        assert_eq!(pod.labels()[POD_INDEX_LABEL], "0");
        assert!(pod.labels()[REVISION_LABEL].starts_with("db-"));
        let volume = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-db-0"
        );
        assert_eq!(names_of_claims(&plan.claims), ["data-db-0"]);
        assert_eq!(plan.claims[0].labels()["app"], "db");
        // A claim that exists is not made again.
        let existing = BTreeSet::from(["data-db-0".to_string()]);
        assert!(super::plan(&s, &[], &existing, 0).claims.is_empty());
    }

    fn names_of_claims(claims: &[PersistentVolumeClaim]) -> Vec<String> {
        claims.iter().map(|c| c.name_any()).collect()
    }

    #[test]
    fn scaling_down_removes_the_highest_ordinal_once_the_rest_are_ready() {
        let s = set(json!({"replicas": 1}));
        let (p0, p1, p2) = (
            member(&s, 0, true),
            member(&s, 1, true),
            member(&s, 2, true),
        );
        let none = BTreeSet::new();
        assert_eq!(plan(&s, &[&p0, &p1, &p2], &none, 0).delete, ["db-2"]);
        let unready0 = member(&s, 0, false);
        assert!(plan(&s, &[&unready0, &p1, &p2], &none, 0).delete.is_empty());
    }

    #[test]
    fn a_new_template_rolls_from_the_highest_ordinal_down_to_the_partition() {
        let old = set(json!({"replicas": 3}));
        let pods = [
            member(&old, 0, true),
            member(&old, 1, true),
            member(&old, 2, true),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut new = old.clone();
        new.spec.template.spec.as_mut().unwrap().containers[0].image = Some("db:2".into());
        new.status = Some(
            serde_json::from_value(
                json!({"replicas": 3, "currentRevision": update_revision(&old)}),
            )
            .unwrap(),
        );
        let none = BTreeSet::new();
        let plan = plan(&new, &refs, &none, 0);
        assert_eq!(plan.delete, ["db-2"]);
        assert_eq!(plan.status["updatedReplicas"], 0);
        assert_eq!(plan.status["currentRevision"], update_revision(&old));
        assert_eq!(plan.status["updateRevision"], update_revision(&new));
        // db-2 is back on the new template: db-1 is next.
        let rolled = [
            member(&old, 0, true),
            member(&old, 1, true),
            member(&new, 2, true),
        ];
        let refs: Vec<&Pod> = rolled.iter().collect();
        assert_eq!(super::plan(&new, &refs, &none, 0).delete, ["db-1"]);
        // With partition 2, db-1 and db-0 stay as they are.
        let mut partitioned = new.clone();
        partitioned.spec.update_strategy = Some(
            serde_json::from_value(
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}),
            )
            .unwrap(),
        );
        assert!(super::plan(&partitioned, &refs, &none, 0).delete.is_empty());
        let mut manual = new.clone();
        manual.spec.update_strategy =
            Some(serde_json::from_value(json!({"type": "OnDelete"})).unwrap());
        assert!(super::plan(&manual, &refs, &none, 0).delete.is_empty());
        // Once all are on the new template and ready, it is the current revision.
        let done = [
            member(&new, 0, true),
            member(&new, 1, true),
            member(&new, 2, true),
        ];
        let refs: Vec<&Pod> = done.iter().collect();
        let plan = super::plan(&new, &refs, &none, 0);
        assert_eq!(plan.status["currentRevision"], update_revision(&new));
        assert_eq!(
            (
                plan.status["updatedReplicas"].clone(),
                plan.status["currentReplicas"].clone()
            ),
            (json!(3), json!(3))
        );
    }
}
