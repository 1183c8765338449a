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

use super::mdutil::{outdated_because, scaled, template_hash};
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use futures::future::BoxFuture;
use kube::runtime::watcher;

use crate::api;
use crate::api::machine_deployment::{MachineDeploymentStatus, RolloutStrategyType};
use crate::api::machine_set::MachineSetSpec;
use crate::api::{Cluster, MachineDeployment, MachineSet};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Error, Result, StepContext};

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

/// What one reconcile knows of a MachineDeployment's world, gathered once.
struct Scope {
    api: Api<MachineDeployment>,
    sets_api: Api<MachineSet>,
    /// The MachineSets it controls, newest revision first.
    sets: Vec<MachineSet>,
    cluster: Option<Cluster>,
}

impl Scope {
    async fn gather(md: &MachineDeployment, ctx: &Context) -> Result<Scope> {
        let ns = md.namespace().unwrap_or_default();
        let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &ns);
        let uid = md.uid().unwrap_or_default();
        // Its sets carry its Cluster's label (set when created, and defaulted on admission): a
        // namespace of a thousand clusters is not read whole on every reconcile.
        let of_cluster = ListParams::default().labels(&format!(
            "{}={}",
            api::CLUSTER_NAME_LABEL,
            md.spec.cluster_name
        ));
        let mut sets: Vec<MachineSet> = sets_api
            .list(&of_cluster)
            .await?
            .items
            .into_iter()
            .filter(|s| common::controller_of(s.owner_references()).is_some_and(|c| c.uid == uid))
            .collect();
        sets.sort_by_key(|s| std::cmp::Reverse(revision(s)));
        let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&md.spec.cluster_name)
            .await?;
        Ok(Scope {
            api: Api::namespaced(ctx.client.clone(), &ns),
            sets_api,
            sets,
            cluster,
        })
    }
}

/// How the MachineDeployment rolls out, from its spec.
struct Rollout {
    desired: i32,
    strategy: RolloutStrategyType,
    max_surge: i32,
    max_unavailable: i32,
    /// `spec.paused`: no MachineSet is created or scaled.
    paused: bool,
}

impl Rollout {
    fn of(md: &MachineDeployment) -> Rollout {
        let desired = md.spec.replicas.unwrap_or(1).max(0);
        let strategy = md
            .spec
            .rollout
            .as_ref()
            .and_then(|r| r.strategy.clone())
            .unwrap_or_default();
        let rolling = strategy.rolling_update.clone().unwrap_or_default();
        Rollout {
            desired,
            strategy: strategy.type_,
            max_surge: scaled(rolling.max_surge.as_ref(), desired, true, 1),
            max_unavailable: scaled(rolling.max_unavailable.as_ref(), desired, false, 0),
            paused: md.spec.paused == Some(true),
        }
    }
}

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "machinedeployment";

/// The MachineDeployment controller: MachineDeployments, woken by their MachineSets.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<MachineDeployment>(CONTROLLER).owns(
        Api::<MachineSet>::all(w.client.clone()),
        watcher::Config::default(),
    );
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(md: Arc<MachineDeployment>, ctx: Arc<Context>) -> Result<Action> {
    let scope = Scope::gather(&md, &ctx)
        .await
        .step("reading the MachineSets and the Cluster")?;

    // Guards; a paused MachineDeployment is not even deleted (see the Cluster controller).
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        scope.cluster.as_ref(),
        "MachineDeployment",
        md.annotations(),
    );
    if is_paused {
        return common::record_paused(&scope.api, &md, paused).await;
    }
    if common::deleting(md.as_ref()) {
        return reconcile_delete(&md, &scope)
            .await
            .step("deleting the MachineSets");
    }
    let Some(cluster) = &scope.cluster else {
        return Err(Error::Invalid(format!(
            "Cluster {} of MachineDeployment {} does not exist",
            md.spec.cluster_name,
            md.name_any()
        )));
    };
    if common::ensure_finalizer(&scope.api, md.as_ref(), api::MACHINE_DEPLOYMENT_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    if md.labels().get(api::CLUSTER_NAME_LABEL) != Some(&md.spec.cluster_name)
        || !common::has_owner(md.owner_references(), &cluster.uid().unwrap_or_default())
    {
        let mut refs = md.owner_references().to_vec();
        if !common::has_owner(&refs, &cluster.uid().unwrap_or_default()) {
            refs.push(common::owner_reference(cluster, false));
        }
        common::patch_merge(&scope.api, &md.name_any(), json!({"metadata": {"labels": {(api::CLUSTER_NAME_LABEL): md.spec.cluster_name}, "ownerReferences": refs}})).await?;
        return Ok(Action::await_change());
    }

    // Phases.
    let rollout = Rollout::of(&md);
    let mut sets = scope.sets.clone();
    let new_set = sync_machine_sets(&ctx, &md, &scope, &rollout, &mut sets)
        .await
        .step("rolling out the MachineSets")?;
    if let Some(new_set) = &new_set {
        delete_empty_old_sets(&ctx, &md, &scope, &rollout, new_set, &sets)
            .await
            .step("deleting old MachineSets")?;
        let revision = revision(new_set).to_string();
        if md.annotations().get(api::REVISION_ANNOTATION) != Some(&revision) {
            common::patch_merge(
                &scope.api,
                &md.name_any(),
                json!({"metadata": {"annotations": {(api::REVISION_ANNOTATION): revision}}}),
            )
            .await
            .step("recording the revision")?;
        }
        sets.push(new_set.clone());
    }

    update_in_place(&ctx, &md, &sets)
        .await
        .step("updating the MachineSets in place")?;

    // Status, computed once from what this reconcile saw.
    let status = compute_status(&md, &sets, new_set.as_ref(), &rollout, paused);
    let settled = status.replicas == Some(rollout.desired)
        && status.available_replicas == Some(rollout.desired)
        && status.up_to_date_replicas == Some(rollout.desired);
    common::write_status(&scope.api, &md.name_any(), md.status.as_ref(), &status).await?;
    let resync = if settled {
        common::spread(md.as_ref(), common::RESYNC)
    } else {
        Duration::from_secs(1)
    };
    // A `rollout.after` still ahead is when the next rollout starts: look again then.
    let until_rollout = md
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.after.as_ref())
        .map(|after| after.0.duration_since(k8s_openapi::jiff::Timestamp::now()))
        .filter(|d| d.is_positive())
        .and_then(|d| Duration::try_from(d).ok());
    Ok(Action::requeue(until_rollout.map_or(resync, |d| {
        resync.min(d + Duration::from_millis(100))
    })))
}

/// Deletes the MachineSets; the finalizer goes once they are gone.
/// Gives every MachineSet's template what the MachineDeployment's changed in place, for its
/// Machines to take without a rollout.
async fn update_in_place(ctx: &Context, md: &MachineDeployment, sets: &[MachineSet]) -> Result<()> {
    let api =
        Api::<MachineSet>::namespaced(ctx.client.clone(), &md.namespace().unwrap_or_default());
    for set in sets {
        let template = &set.spec.template;
        let meta = template.metadata.clone().unwrap_or_default();
        let changes = super::machines::in_place_changes(
            &md.spec.template,
            &meta.labels.unwrap_or_default(),
            &meta.annotations.unwrap_or_default(),
            &template.spec,
        );
        if let Some((metadata, spec)) = changes {
            let patch = json!({"spec": {"template": {"metadata": metadata, "spec": spec}}});
            common::patch_merge(&api, &set.name_any(), patch).await?;
        }
    }
    Ok(())
}

async fn reconcile_delete(md: &MachineDeployment, scope: &Scope) -> Result<Action> {
    for s in scope.sets.iter().filter(|s| !common::deleting(*s)) {
        scope
            .sets_api
            .delete(&s.name_any(), &DeleteParams::background())
            .await?;
    }
    if scope.sets.is_empty() {
        common::remove_finalizer(&scope.api, md, api::MACHINE_DEPLOYMENT_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Finds or creates the MachineSet of the current template and scales it and the old ones by
/// the rollout strategy. Takes the new set out of `sets`, leaving the old ones; returns it
/// (none while the rollout is paused and no set has the current template).
async fn sync_machine_sets(
    ctx: &Context,
    md: &MachineDeployment,
    scope: &Scope,
    rollout: &Rollout,
    sets: &mut Vec<MachineSet>,
) -> Result<Option<MachineSet>> {
    // The new MachineSet: the newest one whose Machines are what the deployment asks for
    // (its template, made after any `rollout.after` that has passed), or a new one.
    let now = k8s_openapi::jiff::Timestamp::now();
    let new_index = sets
        .iter()
        .position(|s| outdated_because(s, md, now).is_empty());
    let new_set = match new_index {
        Some(i) => sets.remove(i),
        None if rollout.paused => return Ok(None),
        None => {
            let next_revision = sets.iter().map(revision).max().unwrap_or(0) + 1;
            let created = create_set(
                &scope.sets_api,
                md,
                next_revision,
                rollout.desired,
                rollout.max_surge,
            )
            .await?;
            let note = format!("Created MachineSet {:?}", created.name_any());
            ctx.events
                .publish(CONTROLLER, md, Severity::Normal, "SuccessfulCreate", note);
            created
        }
    };
    if rollout.paused {
        return Ok(Some(new_set));
    }
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
    let old_states: Vec<SetState> = sets.iter().rev().map(state).collect();
    let plan = if rollout.strategy == RolloutStrategyType::OnDelete {
        plan_on_delete(rollout.desired, &state(&new_set), &old_states)
    } else {
        plan_rolling_update(
            rollout.desired,
            rollout.max_surge,
            rollout.max_unavailable,
            &state(&new_set),
            &old_states,
        )
    };
    let desired = rollout.desired;
    // The new set first, then the old ones.
    for s in std::iter::once(&new_set).chain(sets.iter()) {
        let Some(&replicas) = plan.get(&s.name_any()) else {
            continue;
        };
        let annotations = json!({
            DESIRED_REPLICAS_ANNOTATION: desired.to_string(),
            api::MAX_REPLICAS_ANNOTATION: (desired + rollout.max_surge).to_string(),
            api::DISABLE_CREATE_ANNOTATION: if s.name_any() != new_set.name_any() && rollout.strategy == RolloutStrategyType::OnDelete { "true" } else { "false" },
        });
        if s.spec.replicas != Some(replicas)
            || s.annotations().get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired.to_string())
        {
            common::patch_merge(
                &scope.sets_api,
                &s.name_any(),
                json!({"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}),
            )
            .await?;
            let before = s.spec.replicas.unwrap_or(0);
            if before != replicas {
                let direction = if replicas > before { "up" } else { "down" };
                let note = format!(
                    "Scaled {direction} MachineSet {:?} from {before} to {replicas} replicas",
                    s.name_any()
                );
                ctx.events
                    .publish(CONTROLLER, md, Severity::Normal, "SuccessfulScale", note);
            }
        }
    }
    Ok(Some(new_set))
}

/// Old MachineSets that are empty go once the new one has all its replicas available.
async fn delete_empty_old_sets(
    ctx: &Context,
    md: &MachineDeployment,
    scope: &Scope,
    rollout: &Rollout,
    new_set: &MachineSet,
    old: &[MachineSet],
) -> Result<()> {
    let new_status = new_set.status.clone().unwrap_or_default();
    let complete = new_status.replicas == Some(rollout.desired)
        && new_status.available_replicas == Some(rollout.desired)
        && new_set.spec.replicas == Some(rollout.desired);
    if !complete {
        return Ok(());
    }
    for s in old {
        let empty = s.spec.replicas == Some(0)
            && s.status.as_ref().and_then(|st| st.replicas).unwrap_or(0) == 0;
        if empty && !common::deleting(s) {
            scope
                .sets_api
                .delete(&s.name_any(), &DeleteParams::background())
                .await?;
            let note = format!("Deleted MachineSet {:?}", s.name_any());
            ctx.events
                .publish(CONTROLLER, md, Severity::Normal, "SuccessfulDelete", note);
        }
    }
    Ok(())
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
    let name = crate::apiserver::object::generate_name(&format!("{}-", md.name_any()));
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

/// The MachineDeployment's status from its MachineSets: replica counters summed, the new set's
/// up-to-date replicas, the selector, the phase, and the v1beta2 conditions.
fn compute_status(
    md: &MachineDeployment,
    sets: &[MachineSet],
    new_set: Option<&MachineSet>,
    rollout: &Rollout,
    paused: NewCondition,
) -> MachineDeploymentStatus {
    let mut status = md.status.clone().unwrap_or_default();
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
    // The versions its sets' Machines run, as upstream v1.12+ reports them.
    status.versions = Some(super::machines::merge_versions(
        sets.iter()
            .filter_map(|s| s.status.as_ref()?.versions.clone())
            .flatten(),
    ));
    let mut selector = md.spec.selector.match_labels.clone().unwrap_or_default();
    selector.remove(api::TEMPLATE_HASH_LABEL);
    status.selector = Some(super::machines::selector_string(&selector));
    let (desired, max_unavailable) = (rollout.desired, rollout.max_unavailable);
    let available = status.available_replicas.unwrap_or(0);
    let needed = (desired - max_unavailable).max(0);
    let mut conds = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
    ];
    conds.push(if available >= needed {
        NewCondition::new(conditions::types::AVAILABLE, Status::True, conditions::reasons::AVAILABLE)
    } else {
        NewCondition::new(conditions::types::AVAILABLE, Status::False, conditions::reasons::NOT_AVAILABLE).message(format!(
            "{available} available replicas, at least {needed} required (spec.strategy.rollout.maxUnavailable is {max_unavailable}, spec.replicas is {desired})"
        ))
    });
    let not_up_to_date = status.replicas.unwrap_or(0) - status.up_to_date_replicas.unwrap_or(0);
    conds.push(NewCondition::activity(
        conditions::types::ROLLING_OUT,
        not_up_to_date > 0,
        || format!("Rolling out {not_up_to_date} not up-to-date replicas"),
    ));
    let current = status.replicas.unwrap_or(0);
    conds.push(NewCondition::activity(
        conditions::types::SCALING_UP,
        current < desired,
        || format!("Scaling up from {current} to {desired} replicas"),
    ));
    conds.push(NewCondition::activity(
        conditions::types::SCALING_DOWN,
        current > desired,
        || format!("Scaling down from {current} to {desired} replicas"),
    ));
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
    let generation = md.meta().generation;
    common::set_conditions(&mut status.conditions, generation, conds);
    status.observed_generation = generation;
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::expect_condition;

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

    fn deployment(replicas: i32, max_unavailable: i32) -> MachineDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": "md", "namespace": "ns", "generation": 2},
            "spec": {
                "clusterName": "c", "replicas": replicas,
                "selector": {"matchLabels": {"pool": "a"}},
                "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"}}},
                "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": max_unavailable}}},
            },
        }))
        .unwrap()
    }

    /// A MachineSet with these replicas, available and up-to-date counts in its status.
    fn machine_set(name: &str, replicas: i32, available: i32, up_to_date: i32) -> MachineSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "selector": {}, "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"}}}},
            "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available, "upToDateReplicas": up_to_date,
                       "versions": [{"version": if name == "new" { "v1.30.4" } else { "v1.29.10" }, "replicas": replicas}]},
        }))
        .unwrap()
    }

    #[test]
    fn status_table() {
        struct Case {
            name: &'static str,
            replicas: i32,
            max_unavailable: i32,
            /// The new set's (replicas, available, up to date); the old set's (replicas, available).
            new: (i32, i32, i32),
            old: Option<(i32, i32)>,
            phase: &'static str,
            /// (condition type, status, reason, message) for the ones that say something.
            conditions: Vec<(&'static str, &'static str, &'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "every replica available and up to date",
                replicas: 3,
                max_unavailable: 0,
                new: (3, 3, 3),
                old: None,
                phase: "Running",
                conditions: vec![
                    ("Available", "True", "Available", ""),
                    ("RollingOut", "False", "NotRollingOut", ""),
                    ("ScalingUp", "False", "NotScalingUp", ""),
                    ("ScalingDown", "False", "NotScalingDown", ""),
                    ("Deleting", "False", "NotDeleting", ""),
                ],
            },
            Case {
                name: "scaling up from one",
                replicas: 3,
                max_unavailable: 0,
                new: (1, 1, 1),
                old: None,
                phase: "ScalingUp",
                conditions: vec![
                    (
                        "Available",
                        "False",
                        "NotAvailable",
                        "1 available replicas, at least 3 required (spec.strategy.rollout.maxUnavailable is 0, spec.replicas is 3)",
                    ),
                    (
                        "ScalingUp",
                        "True",
                        "ScalingUp",
                        "Scaling up from 1 to 3 replicas",
                    ),
                ],
            },
            Case {
                name: "maxUnavailable lowers what Available needs",
                replicas: 3,
                max_unavailable: 1,
                new: (2, 2, 2),
                old: None,
                phase: "ScalingUp",
                conditions: vec![("Available", "True", "Available", "")],
            },
            Case {
                name: "rolling out: old Machines still there, one new up to date",
                replicas: 3,
                max_unavailable: 0,
                new: (1, 1, 1),
                old: Some((3, 3)),
                phase: "ScalingDown",
                conditions: vec![
                    ("Available", "True", "Available", ""),
                    (
                        "RollingOut",
                        "True",
                        "RollingOut",
                        "Rolling out 3 not up-to-date replicas",
                    ),
                    (
                        "ScalingDown",
                        "True",
                        "ScalingDown",
                        "Scaling down from 4 to 3 replicas",
                    ),
                ],
            },
        ];
        for case in cases {
            let md = deployment(case.replicas, case.max_unavailable);
            let (r, a, u) = case.new;
            let new = machine_set("new", r, a, u);
            let mut sets = vec![new.clone()];
            if let Some((r, a)) = case.old {
                sets.push(machine_set("old", r, a, 0));
            }
            let rollout = Rollout::of(&md);
            let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
            let status = compute_status(&md, &sets, Some(&new), &rollout, paused);
            let name = case.name;
            assert_eq!(status.phase.as_deref(), Some(case.phase), "{name}");
            assert_eq!(status.up_to_date_replicas, Some(u), "{name}");
            assert_eq!(status.selector.as_deref(), Some("pool=a"), "{name}");
            assert_eq!(status.observed_generation, Some(2), "{name}");
            let versions: Vec<(String, i32)> = status
                .versions
                .iter()
                .flatten()
                .map(|v| (v.version.clone(), v.replicas.unwrap()))
                .collect();
            let mut want = vec![];
            if let Some((old, _)) = case.old {
                want.push(("v1.29.10".to_string(), old));
            }
            want.push(("v1.30.4".to_string(), r));
            assert_eq!(versions, want, "{name}");
            for (type_, want_status, reason, message) in case.conditions {
                let c = expect_condition(status.conditions.as_ref(), type_, name);
                assert_eq!(
                    (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                    (want_status, reason, message),
                    "{name}: {type_}"
                );
                assert_eq!(c.observed_generation, Some(2), "{name}: {type_}");
            }
        }
    }

    #[test]
    fn on_delete_replaces_what_users_delete() {
        // A user deleted one old Machine: the new set takes its place.
        let plan = plan_on_delete(3, &set("n", 0, 0, 0), &[set("o", 3, 2, 2)]);
        assert_eq!((plan["n"], plan["o"]), (1, 2));
    }
}
