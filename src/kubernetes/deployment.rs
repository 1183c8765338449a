//! The Deployment controller, as kube-controller-manager's: a ReplicaSet per template (named
//! `<deployment>-<pod-template-hash>`, numbered by the `deployment.kubernetes.io/revision`
//! annotation), rolled to with RollingUpdate's `maxSurge`/`maxUnavailable` or Recreate, old
//! ReplicaSets kept up to `revisionHistoryLimit`, and the status and conditions `kubectl
//! rollout status` reads. `kubectl rollout restart` and `undo` are template changes, so they
//! work as upstream's.
//!
//! [`plan`] decides for one Deployment, purely; [`run`] keeps every Deployment of a cluster.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::replica_set::controller_of;
use super::selectors::label_selector_matches;

const COMPONENT: &str = "deployment-controller";
pub const HASH_LABEL: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// kube's `ComputeHash`'s shape: FNV-1a of the template, written in the consonants and digits
/// of `rand.SafeEncodeString` so that it never spells a word.
pub fn template_hash(template: &PodTemplateSpec, collision_count: i32) -> String {
    let text = serde_json::to_string(template).unwrap_or_default() + &collision_count.to_string();
    let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(HASH_LABEL);
        if labels.is_empty() {
            t.metadata.as_mut().expect("labels were there").labels = None;
        }
    }
    t
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn replicas_of(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(0)
}

fn status_of(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

/// A percentage of `total` (rounded up for surge, down for unavailability) or a number.
fn resolve(
    value: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    default: &str,
    total: i32,
    round_up: bool,
) -> i32 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let text = match value {
        Some(IntOrString::Int(n)) => return *n,
        Some(IntOrString::String(s)) => s.clone(),
        None => default.to_string(),
    };
    match text.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) {
        Some(percent) => {
            let exact = percent * f64::from(total) / 100.0;
            (if round_up {
                exact.ceil()
            } else {
                exact.floor()
            }) as i32
        }
        None => text.parse().unwrap_or(0),
    }
}

/// RollingUpdate's bounds: how many Pods over `replicas` may exist and how many may be
/// unavailable (both zero is one unavailable, as kube resolves it).
pub fn surge_and_unavailable(d: &Deployment) -> (i32, i32) {
    let replicas = d.spec.replicas.unwrap_or(1);
    let rolling = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let surge = resolve(rolling.max_surge.as_ref(), "25%", replicas, true);
    let unavailable = resolve(rolling.max_unavailable.as_ref(), "25%", replicas, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable.min(replicas))
    }
}

/// What a Deployment needs done.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// ReplicaSets to adopt (orphans its selector matches).
    pub adopt: Vec<String>,
    /// A new ReplicaSet to create: its hash, replicas and revision.
    pub create: Option<(String, i32, i64)>,
    /// ReplicaSets to scale (and annotate): name, replicas, revision.
    pub scale: Vec<(String, i32, i64)>,
    /// Old ReplicaSets beyond the history limit.
    pub delete: Vec<String>,
    /// The Deployment's status and revision.
    pub status: Value,
    pub revision: i64,
}

/// What one Deployment needs, from the ReplicaSets of its namespace.
pub fn plan(d: &Deployment, sets: &[&ReplicaSet]) -> Plan {
    let uid = d.uid().unwrap_or_default();
    let mut out = Plan::default();
    let mut owned: Vec<&ReplicaSet> = Vec::new();
    for rs in sets {
        match controller_of(*rs) {
            Some(owner) if owner == uid => owned.push(rs),
            None if label_selector_matches(&d.spec.selector, &rs.labels().clone())
                && d.metadata.deletion_timestamp.is_none() =>
            {
                out.adopt.push(rs.name_any());
                owned.push(rs);
            }
            _ => {}
        }
    }
    let replicas = d.spec.replicas.unwrap_or(1);
    let template = without_hash(&d.spec.template);
    let hash = template_hash(
        &template,
        d.status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0),
    );
    let new = owned.iter().copied().find(|rs| {
        rs.labels().get(HASH_LABEL) == Some(&hash)
            || rs.spec.template.as_ref().map(without_hash).as_ref() == Some(&template)
    });
    let mut old: Vec<&ReplicaSet> = owned
        .iter()
        .copied()
        .filter(|rs| Some(rs.name_any()) != new.map(|n| n.name_any()))
        .collect();
    old.sort_by_key(|rs| (revision(rs), rs.metadata.creation_timestamp.clone()));
    let max_old_revision = old.iter().map(|rs| revision(rs)).max().unwrap_or(0);
    let new_revision = match new {
        Some(rs) if revision(rs) > max_old_revision => revision(rs),
        _ => max_old_revision + 1,
    };
    let paused = d.spec.paused == Some(true);
    let recreate = d.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let (surge, max_unavailable) = if recreate {
        (0, replicas)
    } else {
        surge_and_unavailable(d)
    };
    let old_replicas: i32 = old.iter().map(|rs| replicas_of(rs)).sum();
    let old_pods: i32 = old.iter().map(|rs| status_of(rs).0).sum();
    let new_replicas = new.map_or(0, replicas_of);

    // The new ReplicaSet's size, and the old ones' after this pass.
    let mut target_new = new_replicas;
    let mut old_targets: Vec<i32> = old.iter().map(|rs| replicas_of(rs)).collect();
    if paused {
        // A paused Deployment only follows scaling, on the ReplicaSet it has.
    } else if recreate {
        // Every old Pod gone before a new one starts.
        old_targets.iter_mut().for_each(|r| *r = 0);
        target_new = if old_replicas == 0 && old_pods == 0 {
            replicas
        } else {
            new_replicas.min(replicas)
        };
    } else if old_replicas == 0 {
        target_new = replicas;
    } else {
        // Up: within replicas + maxSurge in all.
        let room = (replicas + surge - new_replicas - old_replicas).max(0);
        target_new = (new_replicas + room.min((replicas - new_replicas).max(0))).min(replicas);
        // Down, counted after the scale-up as kube counts it: keep replicas - maxUnavailable
        // available, unhealthy old Pods first.
        let min_available = replicas - max_unavailable;
        let new_unavailable = (target_new - new.map_or(0, |rs| status_of(rs).2)).max(0);
        let mut budget = (target_new + old_replicas - min_available - new_unavailable).max(0);
        for (rs, target) in old.iter().zip(old_targets.iter_mut()) {
            let unhealthy = (*target - status_of(rs).2).max(0);
            let cut = unhealthy.min(budget);
            *target -= cut;
            budget -= cut;
        }
        let available: i32 = owned.iter().map(|rs| status_of(rs).2).sum();
        let mut healthy_budget = (available - min_available).max(0).min(budget);
        for target in old_targets.iter_mut() {
            let cut = (*target).min(healthy_budget);
            *target -= cut;
            healthy_budget -= cut;
        }
    }
    match new {
        None if !paused => out.create = Some((hash.clone(), target_new, new_revision)),
        Some(rs)
            if target_new != replicas_of(rs)
                || revision(rs) != new_revision
                || rs.annotations().get(DESIRED_REPLICAS) != Some(&replicas.to_string()) =>
        {
            out.scale.push((rs.name_any(), target_new, new_revision));
        }
        _ => {}
    }
    for (rs, target) in old.iter().zip(&old_targets) {
        if *target != replicas_of(rs) {
            out.scale.push((rs.name_any(), *target, revision(rs)));
        }
    }
    // History: empty old ReplicaSets beyond the limit go, oldest first.
    let limit = d.spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    let empty: Vec<&&ReplicaSet> = old
        .iter()
        .zip(&old_targets)
        .filter(|(rs, t)| **t == 0 && status_of(rs).0 == 0)
        .map(|(rs, _)| rs)
        .collect();
    if empty.len() > limit {
        out.delete = empty[..empty.len() - limit]
            .iter()
            .map(|rs| rs.name_any())
            .collect();
    }

    // Status, from what the ReplicaSets report.
    let sum = |f: fn(&ReplicaSet) -> i32| owned.iter().map(|rs| f(rs)).sum::<i32>();
    let pods = sum(|rs| status_of(rs).0);
    let ready = sum(|rs| status_of(rs).1);
    let available = sum(|rs| status_of(rs).2);
    let updated = new.map_or(0, |rs| status_of(rs).0);
    let new_name = new.map_or_else(|| format!("{}-{hash}", d.name_any()), |rs| rs.name_any());
    let complete = new.is_some()
        && updated == replicas
        && pods == replicas
        && available == replicas
        && old_pods == 0;
    let min_available = replicas - max_unavailable;
    let now = super::now();
    let available_condition = if available >= min_available {
        json!({"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."})
    } else {
        json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."})
    };
    let progressing = if paused {
        json!({"type": "Progressing", "status": "Unknown", "reason": "DeploymentPaused", "message": "Deployment is paused"})
    } else if complete {
        json!({"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": format!("ReplicaSet \"{new_name}\" has successfully progressed.")})
    } else if new.is_none() {
        json!({"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated", "message": format!("Created new replica set \"{new_name}\"")})
    } else {
        json!({"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": format!("ReplicaSet \"{new_name}\" is progressing.")})
    };
    let previous: Vec<Value> = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    let conditions: Vec<Value> = [available_condition, progressing]
        .into_iter()
        .map(|mut c| {
            let before = previous.iter().find(|p| p["type"] == c["type"]);
            let same = |k: &str| before.is_some_and(|b| b[k] == c[k]);
            let transition = match before {
                Some(b) if same("status") => b["lastTransitionTime"].clone(),
                _ => json!(now),
            };
            let update = if same("status") && same("reason") && same("message") {
                before.map_or(json!(now), |b| b["lastUpdateTime"].clone())
            } else {
                json!(now)
            };
            c["lastTransitionTime"] = transition;
            c["lastUpdateTime"] = update;
            c
        })
        .collect();
    out.status = json!({
        "observedGeneration": d.metadata.generation.unwrap_or(0),
        "replicas": pods,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": (replicas - available).max(0),
        "conditions": conditions,
    });
    out.revision = new_revision;
    out
}

fn status_differs(d: &Deployment, status: &Value) -> bool {
    let current = serde_json::to_value(d.status.clone().unwrap_or_default()).unwrap_or_default();
    let numbers = [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ];
    super::counters_differ(&d.status, status, &numbers)
        || status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                let had = current["conditions"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|x| x["type"] == c["type"]).cloned())
                    .unwrap_or_default();
                ["status", "reason", "message"]
                    .iter()
                    .any(|k| had[k] != c[k])
            })
}

/// The new ReplicaSet of a Deployment's template.
fn new_replica_set(d: &Deployment, hash: &str, replicas: i32, revision: i64) -> ReplicaSet {
    let mut template = without_hash(&d.spec.template);
    let meta = template.metadata.get_or_insert_with(Default::default);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    let mut selector = d.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    let (surge, _) = surge_and_unavailable(d);
    let desired = d.spec.replicas.unwrap_or(1);
    ReplicaSet {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{}-{hash}", d.name_any())),
            namespace: d.namespace(),
            labels: meta.labels.clone(),
            annotations: Some(
                [
                    (REVISION.to_string(), revision.to_string()),
                    (DESIRED_REPLICAS.to_string(), desired.to_string()),
                    (MAX_REPLICAS.to_string(), (desired + surge).to_string()),
                ]
                .into(),
            ),
            owner_references: Some(vec![super::controller_reference(d)]),
            ..Default::default()
        },
        spec: k8s_openapi::api::apps::v1::ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.min_ready_seconds,
            selector,
            template: Some(template),
        },
        status: None,
    }
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (deployments, watch_deployments) = watches.cache::<Deployment>(&client);
    let (sets, watch_sets) = watches.cache::<ReplicaSet>(&client);
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(10)).await;
            let sets = sets.state();
            for d in deployments.state() {
                let mine: Vec<&ReplicaSet> = sets
                    .iter()
                    .filter(|rs| rs.namespace() == d.namespace())
                    .map(|rs| &**rs)
                    .collect();
                let plan = plan(&d, &mine);
                if let Err(e) = sync(&client, &d, &plan).await {
                    super::report_failure(COMPONENT, &d.name_any(), &e);
                }
            }
        }
    };
    tokio::join!(watch_deployments, watch_sets, work);
}

async fn sync(client: &Client, d: &Deployment, plan: &Plan) -> Result<(), kube::Error> {
    let namespace = d.namespace().unwrap_or_default();
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    for name in &plan.adopt {
        let owner = json!({"metadata": {"ownerReferences": [super::controller_reference(d)]}});
        sets.patch(name, &PatchParams::default(), &Patch::Merge(owner))
            .await?;
    }
    let desired = d.spec.replicas.unwrap_or(1);
    let (surge, _) = surge_and_unavailable(d);
    if let Some((hash, replicas, revision)) = &plan.create {
        let rs = new_replica_set(d, hash, *replicas, *revision);
        match sets.create(&PostParams::default(), &rs).await {
            Ok(rs) => {
                super::record_event(
                    client,
                    d,
                    COMPONENT,
                    "Normal",
                    "ScalingReplicaSet",
                    &format!(
                        "Scaled up replica set {} from 0 to {replicas}",
                        rs.name_any()
                    ),
                )
                .await;
            }
            // Made by a pass whose cache had not shown it yet.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for (name, replicas, revision) in &plan.scale {
        let before = sets.get_opt(name).await?.map_or(0, |rs| replicas_of(&rs));
        let patch = json!({
            "metadata": {"annotations": {
                REVISION: revision.to_string(),
                DESIRED_REPLICAS: desired.to_string(),
                MAX_REPLICAS: (desired + surge).to_string(),
            }},
            "spec": {"replicas": replicas},
        });
        sets.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        if before != *replicas {
            let verb = if *replicas > before { "up" } else { "down" };
            super::record_event(
                client,
                d,
                COMPONENT,
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled {verb} replica set {name} from {before} to {replicas}"),
            )
            .await;
        }
    }
    for name in &plan.delete {
        match sets.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    if d.annotations().get(REVISION) != Some(&plan.revision.to_string()) {
        let patch = json!({"metadata": {"annotations": {REVISION: plan.revision.to_string()}}});
        deployments
            .patch(&d.name_any(), &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    if status_differs(d, &plan.status) {
        super::write_status(client, d, plan.status.clone()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i32, image: &str, strategy: Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "d-1", "generation": 1},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": strategy,
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}},
            },
        }))
        .unwrap()
    }

    /// The ReplicaSet the Deployment made for `image`, at a size, with its Pods all available.
    fn rs_for(
        d: &Deployment,
        image: &str,
        replicas: i32,
        available: i32,
        revision: i64,
    ) -> ReplicaSet {
        let mut d = d.clone();
        d.spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
        let hash = template_hash(&without_hash(&d.spec.template), 0);
        let mut rs = new_replica_set(&d, &hash, replicas, revision);
        rs.metadata.creation_timestamp = None;
        rs.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
            replicas: available,
            ready_replicas: Some(available),
            available_replicas: Some(available),
            ..Default::default()
        });
        rs
    }

    #[test]
    fn template_hashes_are_stable_and_safe() {
        let d = deployment(3, "nginx:1", json!({}));
        let h = template_hash(&d.spec.template, 0);
        assert_eq!(h, template_hash(&d.spec.template, 0));
        assert_ne!(h, template_hash(&d.spec.template, 1));
        assert!(
            h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{h}"
        );
    }

    #[test]
    fn a_new_deployment_gets_its_first_replica_set_at_full_size() {
        let d = deployment(3, "nginx:1", json!({}));
        let plan = plan(&d, &[]);
        let (hash, replicas, revision) = plan.create.unwrap();
        assert_eq!((replicas, revision), (3, 1));
        assert_eq!(hash, template_hash(&d.spec.template, 0));
        assert_eq!(
            plan.status["conditions"][1]["reason"],
            "NewReplicaSetCreated"
        );
    }

    #[test]
    fn a_rolling_update_surges_and_keeps_availability() {
        // 4 replicas, 25%: one over, one unavailable at most.
        let d = deployment(4, "nginx:2", json!({}));
        let old = rs_for(&d, "nginx:1", 4, 4, 1);
        let plan1 = plan(&d, &[&old]);
        assert_eq!(
            plan1.create.as_ref().map(|c| (c.1, c.2)),
            Some((1, 2)),
            "one Pod over"
        );
        assert_eq!(
            plan1.scale,
            [(old.name_any(), 3, 1)],
            "one old Pod may go unavailable"
        );
        // The new one came up available: the next step.
        let new = rs_for(&d, "nginx:2", 1, 1, 2);
        let mut old = old;
        old.spec.replicas = Some(3);
        old.status.as_mut().unwrap().available_replicas = Some(3);
        old.status.as_mut().unwrap().replicas = 3;
        let plan2 = plan(&d, &[&old, &new]);
        assert_eq!(
            plan2.scale,
            [(new.name_any(), 2, 2), (old.name_any(), 2, 1)]
        );
        // Done: the old one at zero and empty, the new one full.
        let new = rs_for(&d, "nginx:2", 4, 4, 2);
        let old = rs_for(&d, "nginx:1", 0, 0, 1);
        let done = plan(&d, &[&old, &new]);
        assert!(done.scale.is_empty() && done.create.is_none(), "{done:?}");
        assert_eq!(
            done.status["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(done.status["updatedReplicas"], 4);
    }

    #[test]
    fn recreate_empties_the_old_before_the_new_grows() {
        let d = deployment(2, "nginx:2", json!({"type": "Recreate"}));
        let old = rs_for(&d, "nginx:1", 2, 2, 1);
        let first = plan(&d, &[&old]);
        assert_eq!(first.create.as_ref().map(|c| c.1), Some(0));
        assert_eq!(first.scale, [(old.name_any(), 0, 1)]);
        let new = rs_for(&d, "nginx:2", 0, 0, 2);
        let old = rs_for(&d, "nginx:1", 0, 0, 1);
        assert_eq!(plan(&d, &[&old, &new]).scale, [(new.name_any(), 2, 2)]);
    }

    #[test]
    fn undo_makes_an_old_replica_set_new_again_with_the_next_revision() {
        let d = deployment(2, "nginx:1", json!({}));
        let first = rs_for(&d, "nginx:1", 0, 0, 1);
        let second = rs_for(&d, "nginx:2", 2, 2, 2);
        let plan = plan(&d, &[&first, &second]);
        assert!(plan.create.is_none());
        assert_eq!(plan.revision, 3);
        assert!(
            plan.scale.contains(&(first.name_any(), 1, 3)),
            "{:?}",
            plan.scale
        );
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_first() {
        let mut d = deployment(1, "nginx:9", json!({}));
        d.spec.revision_history_limit = Some(2);
        let old: Vec<ReplicaSet> = (1..=4)
            .map(|i| rs_for(&d, &format!("nginx:{i}"), 0, 0, i))
            .collect();
        let new = rs_for(&d, "nginx:9", 1, 1, 5);
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(&new);
        assert_eq!(
            plan(&d, &all).delete,
            [old[0].name_any(), old[1].name_any()]
        );
    }
}
