//! The MachineDeployment controller: a MachineSet per template, rolled out with maxSurge and
//! maxUnavailable (RollingUpdate) or as users delete old Machines (OnDelete), with revisions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::common;
use super::mdutil::{scaled, template_differences, template_hash};
use super::{Context, Error, Result};
use crate::api;
use crate::api::machine_deployment::{MachineDeploymentStatus, RolloutStrategyType};
use crate::api::machine_set::MachineSetSpec;
use crate::api::{Cluster, MachineDeployment, MachineSet};
use crate::conditions;
use crate::conditions::{NewCondition, Status};

pub const DESIRED_REPLICAS_ANNOTATION: &str =
    "machinedeployment.clusters.x-k8s.io/desired-replicas";

/// One MachineSet as the rollout planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetState {
    pub name: String,
    pub spec_replicas: i32,
    pub status_replicas: i32,
    pub available: i32,
}

/// The replicas each MachineSet should have next, for a RollingUpdate (upstream's planner):
/// the new set grows within maxSurge; old sets shrink as far as keeping minAvailable allows,
/// unavailable replicas first, oldest sets first.
pub fn plan_rolling_update(
    desired: i32,
    max_surge: i32,
    max_unavailable: i32,
    new: &SetState,
    old: &[SetState],
) -> BTreeMap<String, i32> {
    let mut plan: BTreeMap<String, i32> = old
        .iter()
        .map(|s| (s.name.clone(), s.spec_replicas))
        .collect();
    let (max_surge, max_unavailable) = match (max_surge, max_unavailable.min(desired)) {
        (0, 0) if desired > 0 => (0, 1),
        other => other,
    };
    // The new MachineSet.
    let new_replicas = if new.spec_replicas > desired {
        desired
    } else {
        let current: i32 = std::iter::once(new)
            .chain(old)
            .map(|s| s.spec_replicas.max(s.status_replicas))
            .sum();
        if current >= desired + max_surge {
            new.spec_replicas
        } else {
            new.spec_replicas + (desired + max_surge - current).min(desired - new.spec_replicas)
        }
    };
    plan.insert(new.name.clone(), new_replicas);

    // The old ones.
    let min_available = (desired - max_unavailable).max(0);
    let total_spec: i32 = std::iter::once(new)
        .chain(old)
        .map(|s| s.spec_replicas)
        .sum();
    let mut total_available: i32 = std::iter::once(new).chain(old).map(|s| s.available).sum();
    let pending_scale_down: i32 = old
        .iter()
        .map(|s| (s.status_replicas - s.spec_replicas).max(0))
        .sum();
    let new_unavailable = (new.spec_replicas - new.available).max(0);
    let mut budget = (total_spec - pending_scale_down - min_available - new_unavailable).max(0);
    for pass in 0..2 {
        for s in old {
            if budget == 0 {
                break;
            }
            let current = plan[&s.name];
            if current == 0 {
                continue;
            }
            let unavailable = (current - s.available).max(0);
            let mut down = if pass == 0 {
                unavailable.min(budget)
            } else {
                current.min(budget)
            };
            if pass == 1 && s.available > 0 {
                let deleted = (s.status_replicas - (current - down)).max(0);
                if total_available - min_available < deleted {
                    down = (down - (deleted - (total_available - min_available))).max(0);
                }
                total_available -= s
                    .available
                    .min((s.status_replicas - (current - down)).max(0));
            }
            plan.insert(s.name.clone(), current - down);
            budget -= down;
        }
    }
    plan
}

/// OnDelete: the new set takes up what the old ones no longer have; old sets never grow.
pub fn plan_on_delete(desired: i32, new: &SetState, old: &[SetState]) -> BTreeMap<String, i32> {
    let mut plan: BTreeMap<String, i32> = old
        .iter()
        .map(|s| (s.name.clone(), s.spec_replicas.min(s.status_replicas)))
        .collect();
    let old_total: i32 = plan.values().sum();
    let mut excess = (old_total + new.spec_replicas - desired).max(0);
    for s in old {
        let current = plan[&s.name];
        let down = current.min(excess);
        plan.insert(s.name.clone(), current - down);
        excess -= down;
    }
    let remaining: i32 = plan.values().sum();
    plan.insert(new.name.clone(), (desired - remaining).max(0));
    plan
}

fn revision(ms: &MachineSet) -> i64 {
    ms.annotations()
        .get(api::REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

pub async fn reconcile(md: Arc<MachineDeployment>, ctx: Arc<Context>) -> Result<Action> {
    let ns = md.namespace().unwrap_or_default();
    let api: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = md.uid().unwrap_or_default();
    let mut sets: Vec<MachineSet> = sets_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|s| common::controller_of(s.owner_references()).is_some_and(|c| c.uid == uid))
        .collect();

    if common::deleting(md.as_ref()) {
        for s in sets.iter().filter(|s| !common::deleting(*s)) {
            sets_api
                .delete(&s.name_any(), &DeleteParams::background())
                .await?;
        }
        if sets.is_empty() {
            common::remove_finalizer(&api, md.as_ref(), api::MACHINE_DEPLOYMENT_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let Some(cluster) = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&md.spec.cluster_name)
        .await?
    else {
        return Err(Error::Invalid(format!(
            "Cluster {} of MachineDeployment {} does not exist",
            md.spec.cluster_name,
            md.name_any()
        )));
    };
    if common::ensure_finalizer(&api, md.as_ref(), api::MACHINE_DEPLOYMENT_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let generation = md.meta().generation;
    let mut status = md.status.clone().unwrap_or_default();
    let (is_paused, paused) = common::paused(Some(&cluster), "MachineDeployment", md.annotations());
    if is_paused {
        common::set_conditions(&mut status.conditions, generation, vec![paused]);
        common::patch_status(&api, &md.name_any(), &status).await?;
        return Ok(Action::await_change());
    }
    if md.labels().get(api::CLUSTER_NAME_LABEL) != Some(&md.spec.cluster_name)
        || !common::has_owner(md.owner_references(), &cluster.uid().unwrap_or_default())
    {
        let mut refs = md.owner_references().to_vec();
        if !common::has_owner(&refs, &cluster.uid().unwrap_or_default()) {
            refs.push(common::owner_reference(&cluster, false));
        }
        common::patch_merge(&api, &md.name_any(), json!({"metadata": {"labels": {(api::CLUSTER_NAME_LABEL): md.spec.cluster_name}, "ownerReferences": refs}})).await?;
        return Ok(Action::await_change());
    }

    let desired = md.spec.replicas.unwrap_or(1).max(0);
    let strategy = md
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.strategy.clone())
        .unwrap_or_default();
    let rolling = strategy.rolling_update.clone().unwrap_or_default();
    let max_surge = scaled(rolling.max_surge.as_ref(), desired, true, 1);
    let max_unavailable = scaled(rolling.max_unavailable.as_ref(), desired, false, 0);

    // The new MachineSet: the newest one whose template is the deployment's, or a new one.
    sets.sort_by_key(|s| std::cmp::Reverse(revision(s)));
    let new_index = sets
        .iter()
        .position(|s| template_differences(&s.spec.template, &md.spec.template).is_empty());
    let paused_rollout = md.spec.paused == Some(true);
    let new_set = match new_index {
        Some(i) => sets.remove(i),
        None if paused_rollout => {
            return write_status(
                &api,
                &md,
                status,
                &sets,
                None,
                desired,
                max_unavailable,
                generation,
                paused,
            )
            .await;
        }
        None => {
            let next_revision = sets.iter().map(revision).max().unwrap_or(0) + 1;
            create_set(&sets_api, &md, next_revision, desired, max_surge).await?
        }
    };
    let old = sets;
    let state = |s: &MachineSet| SetState {
        name: s.name_any(),
        spec_replicas: s.spec.replicas.unwrap_or(0),
        status_replicas: s.status.as_ref().and_then(|st| st.replicas).unwrap_or(0),
        available: s
            .status
            .as_ref()
            .and_then(|st| st.available_replicas)
            .unwrap_or(0),
    };
    let old_states: Vec<SetState> = old.iter().rev().map(state).collect();
    let plan = if paused_rollout {
        BTreeMap::new()
    } else if strategy.type_ == RolloutStrategyType::OnDelete {
        plan_on_delete(desired, &state(&new_set), &old_states)
    } else {
        plan_rolling_update(
            desired,
            max_surge,
            max_unavailable,
            &state(&new_set),
            &old_states,
        )
    };
    // The new set first, then the old ones.
    for s in std::iter::once(&new_set).chain(&old) {
        let Some(&replicas) = plan.get(&s.name_any()) else {
            continue;
        };
        let annotations = json!({
            DESIRED_REPLICAS_ANNOTATION: desired.to_string(),
            api::MAX_REPLICAS_ANNOTATION: (desired + max_surge).to_string(),
            api::DISABLE_CREATE_ANNOTATION: if s.name_any() != new_set.name_any() && strategy.type_ == RolloutStrategyType::OnDelete { "true" } else { "false" },
        });
        if s.spec.replicas != Some(replicas)
            || s.annotations().get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired.to_string())
        {
            common::patch_merge(
                &sets_api,
                &s.name_any(),
                json!({"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}),
            )
            .await?;
        }
    }
    // Old sets that are empty go once the rollout is complete.
    let new_status = new_set.status.clone().unwrap_or_default();
    let complete = new_status.replicas == Some(desired)
        && new_status.available_replicas == Some(desired)
        && new_set.spec.replicas == Some(desired);
    if complete {
        for s in &old {
            let empty = s.spec.replicas == Some(0)
                && s.status.as_ref().and_then(|st| st.replicas).unwrap_or(0) == 0;
            if empty && !common::deleting(s) {
                sets_api
                    .delete(&s.name_any(), &DeleteParams::background())
                    .await?;
            }
        }
    }
    if md.annotations().get(api::REVISION_ANNOTATION) != Some(&revision(&new_set).to_string()) {
        common::patch_merge(&api, &md.name_any(), json!({"metadata": {"annotations": {(api::REVISION_ANNOTATION): revision(&new_set).to_string()}}})).await?;
    }
    let mut all = old;
    all.push(new_set.clone());
    write_status(
        &api,
        &md,
        status,
        &all,
        Some(&new_set),
        desired,
        max_unavailable,
        generation,
        paused,
    )
    .await
}

async fn create_set(
    api: &Api<MachineSet>,
    md: &MachineDeployment,
    revision: i64,
    desired: i32,
    max_surge: i32,
) -> Result<MachineSet> {
    let hash = template_hash(&md.spec.template);
    let mut template = md.spec.template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(api::TEMPLATE_HASH_LABEL.into(), hash.clone());
    labels.insert(api::DEPLOYMENT_NAME_LABEL.into(), md.name_any());
    labels.insert(api::CLUSTER_NAME_LABEL.into(), md.spec.cluster_name.clone());
    let mut selector = md.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(api::TEMPLATE_HASH_LABEL.into(), hash.clone());
    let mut set_labels = labels.clone();
    set_labels.retain(|k, _| k != api::TEMPLATE_HASH_LABEL);
    set_labels.insert(api::TEMPLATE_HASH_LABEL.into(), hash);
    let name = format!(
        "{}-{}",
        &md.name_any()[..md.name_any().len().min(58)],
        crate::apiserver::object::random_suffix()
    );
    let set = MachineSet {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: md.namespace(),
            labels: Some(set_labels),
            annotations: Some(BTreeMap::from([
                (api::REVISION_ANNOTATION.to_string(), revision.to_string()),
                (DESIRED_REPLICAS_ANNOTATION.to_string(), desired.to_string()),
                (
                    api::MAX_REPLICAS_ANNOTATION.to_string(),
                    (desired + max_surge).to_string(),
                ),
            ])),
            owner_references: Some(vec![common::owner_reference(md, true)]),
            ..Default::default()
        },
        spec: MachineSetSpec {
            cluster_name: md.spec.cluster_name.clone(),
            replicas: Some(0),
            selector,
            template,
            machine_naming: md.spec.machine_naming.clone(),
            deletion: md.spec.deletion.clone(),
        },
        status: None,
    };
    Ok(api.create(&PostParams::default(), &set).await?)
}

#[allow(clippy::too_many_arguments)]
async fn write_status(
    api: &Api<MachineDeployment>,
    md: &MachineDeployment,
    mut status: MachineDeploymentStatus,
    sets: &[MachineSet],
    new_set: Option<&MachineSet>,
    desired: i32,
    max_unavailable: i32,
    generation: Option<i64>,
    paused: NewCondition,
) -> Result<Action> {
    let sum = |f: fn(&crate::api::machine_set::MachineSetStatus) -> Option<i32>| -> i32 {
        sets.iter()
            .filter_map(|s| s.status.as_ref().and_then(f))
            .sum()
    };
    status.replicas = Some(sum(|s| s.replicas));
    status.ready_replicas = Some(sum(|s| s.ready_replicas));
    status.available_replicas = Some(sum(|s| s.available_replicas));
    status.up_to_date_replicas = new_set
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.up_to_date_replicas)
        .or(Some(0));
    let mut selector = md.spec.selector.match_labels.clone().unwrap_or_default();
    selector.remove(api::TEMPLATE_HASH_LABEL);
    status.selector = Some(super::machines::selector_string(&selector));
    let available = status.available_replicas.unwrap_or(0);
    let needed = (desired - max_unavailable).max(0);
    let mut conds = vec![
        paused,
        NewCondition::new(conditions::types::DELETING, Status::False, "NotDeleting"),
    ];
    conds.push(if available >= needed {
        NewCondition::new(conditions::types::AVAILABLE, Status::True, "Available")
    } else {
        NewCondition::new(conditions::types::AVAILABLE, Status::False, "NotAvailable").message(format!(
            "{available} available replicas, at least {needed} required (spec.strategy.rollout.maxUnavailable is {max_unavailable}, spec.replicas is {desired})"
        ))
    });
    let not_up_to_date = status.replicas.unwrap_or(0) - status.up_to_date_replicas.unwrap_or(0);
    conds.push(if not_up_to_date > 0 {
        NewCondition::new(conditions::types::ROLLING_OUT, Status::True, "RollingOut").message(
            format!("Rolling out {not_up_to_date} not up-to-date replicas"),
        )
    } else {
        NewCondition::new(
            conditions::types::ROLLING_OUT,
            Status::False,
            "NotRollingOut",
        )
    });
    let current = status.replicas.unwrap_or(0);
    conds.push(if current < desired {
        NewCondition::new(conditions::types::SCALING_UP, Status::True, "ScalingUp")
            .message(format!("Scaling up from {current} to {desired} replicas"))
    } else {
        NewCondition::new(conditions::types::SCALING_UP, Status::False, "NotScalingUp")
    });
    conds.push(if current > desired {
        NewCondition::new(conditions::types::SCALING_DOWN, Status::True, "ScalingDown")
            .message(format!("Scaling down from {current} to {desired} replicas"))
    } else {
        NewCondition::new(
            conditions::types::SCALING_DOWN,
            Status::False,
            "NotScalingDown",
        )
    });
    status.phase = Some(
        if current == desired {
            "Running"
        } else if current > desired {
            "ScalingDown"
        } else {
            "ScalingUp"
        }
        .into(),
    );
    common::set_conditions(&mut status.conditions, generation, conds);
    status.observed_generation = generation;
    if md.status.as_ref() != Some(&status) {
        common::patch_status(api, &md.name_any(), &status).await?;
    }
    let settled = current == desired && available == desired && not_up_to_date == 0;
    Ok(Action::requeue(if settled {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(1)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, spec: i32, status: i32, available: i32) -> SetState {
        SetState {
            name: name.into(),
            spec_replicas: spec,
            status_replicas: status,
            available,
        }
    }

    #[test]
    fn rolling_update_with_surge_1_and_unavailable_0_never_drops_below_desired() {
        // 3 replicas rolled from old to new, one at a time.
        let desired = 3;
        let mut new = set("new", 0, 0, 0);
        let mut old = vec![set("old", 3, 3, 3)];
        for step in 0..10 {
            let plan = plan_rolling_update(desired, 1, 0, &new, &old);
            new.spec_replicas = plan["new"];
            old[0].spec_replicas = plan["old"];
            // The world catches up: Machines come and go, new ones become available.
            new.status_replicas = new.spec_replicas;
            new.available = new.spec_replicas;
            old[0].status_replicas = old[0].spec_replicas;
            old[0].available = old[0].spec_replicas;
            let available = new.available + old[0].available;
            assert!(
                available >= desired,
                "step {step}: only {available} available"
            );
            assert!(
                new.spec_replicas + old[0].spec_replicas <= desired + 1,
                "step {step}: surge exceeded"
            );
            if new.spec_replicas == desired && old[0].spec_replicas == 0 {
                return;
            }
        }
        panic!("the rollout did not finish: new {new:?}, old {old:?}");
    }

    #[test]
    fn rolling_update_table() {
        // (desired, surge, unavailable, new, old, want new, want old)
        for (desired, surge, unavailable, new, old, want_new, want_old) in [
            (3, 1, 0, set("n", 0, 0, 0), set("o", 3, 3, 3), 1, 3),
            (3, 1, 0, set("n", 1, 1, 0), set("o", 3, 3, 3), 1, 3),
            (3, 1, 0, set("n", 1, 1, 1), set("o", 3, 3, 3), 1, 2),
            (3, 0, 1, set("n", 0, 0, 0), set("o", 3, 3, 3), 0, 2),
            (4, 0, 0, set("n", 0, 0, 0), set("o", 4, 4, 4), 0, 3),
            (3, 1, 0, set("n", 3, 3, 3), set("o", 0, 0, 0), 3, 0),
        ] {
            let plan = plan_rolling_update(
                desired,
                surge,
                unavailable,
                &new,
                std::slice::from_ref(&old),
            );
            assert_eq!(
                (plan["n"], plan["o"]),
                (want_new, want_old),
                "{desired} {surge} {unavailable} {new:?} {old:?}"
            );
        }
    }

    #[test]
    fn on_delete_replaces_what_users_delete() {
        // A user deleted one old Machine: the new set takes its place.
        let plan = plan_on_delete(3, &set("n", 0, 0, 0), &[set("o", 3, 2, 2)]);
        assert_eq!((plan["n"], plan["o"]), (1, 2));
    }
}
