//! The MachineSet controller: keeps `spec.replicas` Machines made from the template (cloning
//! the bootstrap and infrastructure templates for each), adopts matching orphans, and picks
//! which Machines go first when scaling down.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::machines::{condition_of, selector_string};
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use crate::reconcile::external::clone_template;
use futures::future::BoxFuture;

use crate::api;
use crate::api::common::DeletionOrder;
use crate::api::machine::MachineSpec;
use crate::api::machine_set::MachineSetStatus;
use crate::api::{Cluster, Machine, MachineDeployment, MachineSet};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::runtime::{Wiring, controllers_of};
use crate::reconcile::{Context, Error, Result, StepContext};

/// How many Machines (with their bootstrap configs and infrastructure machines) a MachineSet
/// creates at once.
const CREATE_CONCURRENCY: usize = 16;

/// How much a Machine should go first when scaling down (upstream's priorities): deleting
/// 100, annotated for deletion 80, unhealthy 50, then by the set's deletion order.
pub fn deletion_priority(machine: &Machine, order: DeletionOrder, now: Timestamp) -> f64 {
    if common::deleting(machine) {
        return 100.0;
    }
    if machine
        .annotations()
        .contains_key(api::DELETE_MACHINE_ANNOTATION)
    {
        return 80.0;
    }
    let no_node = super::machines::node_name(machine).is_none();
    let unhealthy = |t: &str| condition_of(machine, t).is_some_and(|c| c.status == "False");
    if no_node
        || unhealthy(api::machine::conditions::NODE_HEALTHY)
        || unhealthy(api::machine::conditions::HEALTH_CHECK_SUCCEEDED)
    {
        return 50.0;
    }
    let age_days = machine
        .meta()
        .creation_timestamp
        .as_ref()
        .map(|t| (now.as_second() - t.0.as_second()) as f64 / 86_400.0)
        .unwrap_or(0.0);
    let oldest = 50.0 * (1.0 - (-age_days / 10.0).exp());
    match order {
        DeletionOrder::Random => 20.0,
        DeletionOrder::Oldest => oldest,
        DeletionOrder::Newest => 50.0 - oldest,
    }
}

/// The `n` Machines to delete: highest priority first, ties by name.
pub fn machines_to_delete(
    machines: &[Machine],
    n: usize,
    order: DeletionOrder,
    now: Timestamp,
) -> Vec<String> {
    let mut ranked: Vec<(f64, String)> = machines
        .iter()
        .map(|m| (deletion_priority(m, order, now), m.name_any()))
        .collect();
    ranked.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    });
    ranked.into_iter().take(n).map(|(_, name)| name).collect()
}

/// Whether a MachineHealthCheck asked this set to replace the Machine and it is not going yet.
fn awaits_remediation(m: &Machine) -> bool {
    !common::deleting(m)
        && condition_of(m, api::OWNER_REMEDIATED).is_some_and(|c| c.status == "False")
}

/// The Machines to remediate now: those awaiting it, by name, as many as `max_in_flight` allows
/// beside the remediations still going (all of them without a limit).
pub fn to_remediate(machines: &[Machine], max_in_flight: Option<usize>) -> Vec<String> {
    let in_flight = machines
        .iter()
        .filter(|m| common::deleting(*m) && condition_of(m, api::OWNER_REMEDIATED).is_some())
        .count();
    let allowance = max_in_flight.map_or(usize::MAX, |max| max.saturating_sub(in_flight));
    let mut names: Vec<String> = machines
        .iter()
        .filter(|m| awaits_remediation(m))
        .map(|m| m.name_any())
        .collect();
    names.sort();
    names.truncate(allowance);
    names
}

fn matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Creates one Machine of the set, with its bootstrap config and infrastructure machine;
/// returns its name.
async fn create_machine(ctx: &Context, ms: &MachineSet) -> Result<String> {
    let ns = ms.namespace().unwrap_or_default();
    let name = crate::apiserver::object::generate_name(&format!("{}-", ms.name_any()));
    let template = &ms.spec.template;
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(api::SET_NAME_LABEL.into(), ms.name_any());
    labels.insert(api::CLUSTER_NAME_LABEL.into(), ms.spec.cluster_name.clone());
    if let Some(md) = ms.labels().get(api::DEPLOYMENT_NAME_LABEL) {
        labels.insert(api::DEPLOYMENT_NAME_LABEL.into(), md.clone());
    }
    let owner = common::owner_reference(ms, false);
    let mut spec: MachineSpec = template.spec.clone();
    spec.cluster_name = ms.spec.cluster_name.clone();
    spec.provider_id = None;
    if let Some(config_template) = &template.spec.bootstrap.config_ref {
        spec.bootstrap.config_ref =
            Some(clone_template(ctx, &ns, config_template, &name, &labels, owner.clone()).await?);
    }
    spec.infrastructure_ref = clone_template(
        ctx,
        &ns,
        &template.spec.infrastructure_ref,
        &name,
        &labels,
        owner,
    )
    .await?;
    let machine = Machine {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(ns.clone()),
            labels: Some(labels),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone()),
            owner_references: Some(vec![common::owner_reference(ms, true)]),
            finalizers: Some(vec![api::MACHINE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec,
        status: None,
    };
    let created = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &machine)
        .await;
    let (severity, reason, note) = match &created {
        Ok(m) => (
            Severity::Normal,
            "SuccessfulCreate",
            format!("Created machine {:?}", m.name_any()),
        ),
        Err(e) => (
            Severity::Warning,
            "FailedCreate",
            format!("Failed to create machine: {e}"),
        ),
    };
    ctx.events.publish(CONTROLLER, ms, severity, reason, note);
    Ok(created?.name_any())
}

/// What one reconcile knows of a MachineSet's world, gathered once.
struct Scope {
    api: Api<MachineSet>,
    machines_api: Api<Machine>,
    /// The set's Machines: those it controls, and orphans matching its selector that it
    /// adopted while gathering (as upstream's getAndAdoptMachinesForMachineSet).
    machines: Vec<Machine>,
    cluster: Option<Cluster>,
}

impl Scope {
    async fn gather(ms: &MachineSet, ctx: &Context) -> Result<Scope> {
        let ns = ms.namespace().unwrap_or_default();
        let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        let selector = ms.spec.selector.match_labels.clone().unwrap_or_default();
        let uid = ms.uid().unwrap_or_default();
        let mut machines = Vec::new();
        // Only Machines with the selector's labels can be this set's (owned ones carry them
        // too). From the shared cache: listing them from the API server on every event is
        // quadratic.
        let candidates = match selector.get(api::CLUSTER_NAME_LABEL) {
            Some(cluster) => {
                ctx.machines()
                    .list_labelled(&ns, cluster, |m| matches(&selector, m.labels()))
                    .await?
            }
            None => {
                ctx.machines()
                    .list(&ns, |m| matches(&selector, m.labels()))
                    .await?
            }
        };
        for m in candidates {
            match common::controller_of(m.owner_references()) {
                Some(c) if c.uid == uid => machines.push((*m).clone()),
                None if !common::deleting(ms) => {
                    let mut refs = m.owner_references().to_vec();
                    refs.push(common::owner_reference(ms, true));
                    machines.push(
                        common::patch_merge(
                            &machines_api,
                            &m.name_any(),
                            json!({"metadata": {"ownerReferences": refs}}),
                        )
                        .await?,
                    );
                }
                _ => {}
            }
        }
        let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&ms.spec.cluster_name)
            .await?;
        Ok(Scope {
            api: Api::namespaced(ctx.client.clone(), &ns),
            machines_api,
            machines,
            cluster,
        })
    }

    /// The Machines not being deleted.
    fn live(&self) -> impl Iterator<Item = &Machine> {
        self.machines.iter().filter(|m| !common::deleting(*m))
    }
}

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "machineset";

/// The MachineSet controller: MachineSets, woken by changes of the Machines they control.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<MachineSet>("machineset");
    // The preflight checks wait for the control plane: its changes wake its Cluster's sets,
    // as upstream's MachineSets watch their Cluster.
    let sets = controller.store();
    let sets_of_woken_clusters = w.ctx.cluster_wakes().flat_map(move |cluster| {
        let woken: Vec<ObjectRef<MachineSet>> = sets
            .state()
            .iter()
            .filter(|s| s.namespace() == cluster.namespace && s.spec.cluster_name == cluster.name)
            .map(|s| ObjectRef::from_obj(s.as_ref()))
            .collect();
        futures::stream::iter(woken)
    });
    let controller = controller
        .reconcile_on(controllers_of(w.ctx.machines().changes()))
        .reconcile_on(sets_of_woken_clusters);
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(ms: Arc<MachineSet>, ctx: Arc<Context>) -> Result<Action> {
    let scope = Scope::gather(&ms, &ctx)
        .await
        .step("reading and adopting the Machines")?;

    // Guards; a paused MachineSet is not even deleted (see the Cluster controller).
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        scope.cluster.as_ref(),
        "MachineSet",
        ms.annotations(),
    );
    if is_paused {
        return common::record_paused(&scope.api, &ms, paused).await;
    }
    if common::deleting(ms.as_ref()) {
        return reconcile_delete(&ms, &scope)
            .await
            .step("deleting the Machines");
    }
    let Some(cluster) = &scope.cluster else {
        return Err(Error::Invalid(format!(
            "Cluster {} of MachineSet {} does not exist",
            ms.spec.cluster_name,
            ms.name_any()
        )));
    };
    if common::ensure_finalizer(&scope.api, ms.as_ref(), api::MACHINE_SET_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    // Labels, and a Cluster owner for stand-alone sets.
    let standalone = !ms.labels().contains_key(api::DEPLOYMENT_NAME_LABEL)
        && common::controller_of(ms.owner_references()).is_none();
    let needs_owner =
        standalone && !common::has_owner(ms.owner_references(), &cluster.uid().unwrap_or_default());
    if ms.labels().get(api::CLUSTER_NAME_LABEL) != Some(&ms.spec.cluster_name) || needs_owner {
        let mut refs = ms.owner_references().to_vec();
        if needs_owner {
            refs.push(common::owner_reference(cluster, false));
        }
        common::patch_merge(&scope.api, &ms.name_any(), json!({"metadata": {"labels": {(api::CLUSTER_NAME_LABEL): ms.spec.cluster_name}, "ownerReferences": refs}})).await?;
        return Ok(Action::await_change());
    }

    // Phases.
    let ns = ms.namespace().unwrap_or_default();
    let spec = &ms.spec.template.spec;
    for template in std::iter::once(&spec.infrastructure_ref).chain(&spec.bootstrap.config_ref) {
        ctx.external
            .adopt_template(&ns, template, cluster)
            .await
            .step("making the Cluster an owner of the templates")?;
    }
    if remediate_unhealthy_machines(&ctx, &ms, &scope)
        .await
        .step("remediating unhealthy Machines")?
    {
        return Ok(Action::await_change());
    }
    update_in_place(&ctx, &ms, &scope)
        .await
        .step("updating the Machines in place")?;
    let blocked = sync_replicas(&ctx, &ms, &scope, cluster)
        .await
        .step("scaling the Machines")?;

    // Status, computed once from what this reconcile saw.
    let status = compute_status(&ms, &scope.machines, &blocked, paused);
    common::write_status(&scope.api, &ms.name_any(), ms.status.as_ref(), &status).await?;
    let desired = ms.spec.replicas.unwrap_or(1).max(0) as usize;
    let settled = scope.machines.len() == desired
        && scope.machines.iter().all(|m| {
            condition_of(m, conditions::types::AVAILABLE).is_some_and(|c| c.status == "True")
        });
    Ok(Action::requeue(if !blocked.is_empty() {
        // Upstream's preflight retry interval.
        Duration::from_secs(15)
    } else if settled {
        common::spread(ms.as_ref(), common::RESYNC)
    } else {
        Duration::from_secs(1)
    }))
}

/// Gives the live Machines what the template changed in place (labels, annotations, deletion
/// timeouts, minReadySeconds, readiness gates, taints), as upstream does without a rollout.
async fn update_in_place(ctx: &Context, ms: &MachineSet, scope: &Scope) -> Result<()> {
    let api = Api::<Machine>::namespaced(ctx.client.clone(), &ms.namespace().unwrap_or_default());
    for machine in scope.live() {
        let changes = super::machines::in_place_changes(
            &ms.spec.template,
            machine.labels(),
            machine.annotations(),
            &machine.spec,
        );
        if let Some((metadata, spec)) = changes {
            let patch = json!({"metadata": metadata, "spec": spec});
            common::patch_merge(&api, &machine.name_any(), patch).await?;
        }
    }
    Ok(())
}

/// Deletes the Machines; the finalizer goes once they are gone.
async fn reconcile_delete(ms: &MachineSet, scope: &Scope) -> Result<Action> {
    for m in scope.live() {
        scope
            .machines_api
            .delete(&m.name_any(), &DeleteParams::background())
            .await?;
    }
    if scope.machines.is_empty() {
        common::remove_finalizer(&scope.api, ms, api::MACHINE_SET_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Deletes the Machines a MachineHealthCheck asked this set to remediate, within its
/// MachineDeployment's `remediation.maxInFlight`; their replacements follow on a later
/// reconcile. Whether any was deleted.
async fn remediate_unhealthy_machines(
    ctx: &Context,
    ms: &MachineSet,
    scope: &Scope,
) -> Result<bool> {
    let machines = &scope.machines;
    let max_in_flight = match ms.labels().get(api::DEPLOYMENT_NAME_LABEL) {
        Some(md) if machines.iter().any(awaits_remediation) => {
            Api::<MachineDeployment>::namespaced(
                ctx.client.clone(),
                &ms.namespace().unwrap_or_default(),
            )
            .get_opt(md)
            .await?
            .and_then(|md| {
                let limit = md.spec.remediation?.max_in_flight?;
                let total = md.spec.replicas.unwrap_or(1);
                Some(super::mdutil::scaled(Some(&limit), total, true, total) as usize)
            })
        }
        _ => None,
    };
    let remediate = to_remediate(machines, max_in_flight);
    if remediate.is_empty() {
        return Ok(false);
    }
    for m in machines
        .iter()
        .filter(|m| remediate.contains(&m.name_any()))
    {
        super::machines::set_machine_conditions(
            &scope.machines_api,
            m,
            vec![
                NewCondition::new(
                    api::OWNER_REMEDIATED,
                    Status::False,
                    conditions::reasons::MACHINE_DELETION_IN_PROGRESS,
                )
                .message("Machine deletionTimestamp set"),
            ],
        )
        .await?;
        tracing::info!(machine = %m.name_any(), "remediating an unhealthy Machine by deleting it");
    }
    delete_machines(ctx, ms, &scope.machines_api, &remediate).await?;
    Ok(true)
}

/// Creates or deletes Machines towards `spec.replicas`. Returns what the preflight checks
/// found to keep new Machines back (nothing when none are needed or none block).
async fn sync_replicas(
    ctx: &Context,
    ms: &MachineSet,
    scope: &Scope,
    cluster: &Cluster,
) -> Result<Vec<String>> {
    let desired = ms.spec.replicas.unwrap_or(1).max(0) as usize;
    let live: Vec<&Machine> = scope.live().collect();
    if live.len() < desired {
        let disabled = ms
            .annotations()
            .get(api::DISABLE_CREATE_ANNOTATION)
            .is_some_and(|v| v == "true");
        if disabled {
            return Ok(Vec::new());
        }
        let blocked = preflight_problems(ctx, ms, cluster).await?;
        if !blocked.is_empty() {
            return Ok(blocked);
        }
        // A few at a time: thousands one after the other take minutes.
        let created: Vec<String> = futures::stream::iter(live.len()..desired)
            .map(|_| create_machine(ctx, ms))
            .buffer_unordered(CREATE_CONCURRENCY)
            .try_collect()
            .await?;
        let ns = ms.namespace().unwrap_or_default();
        ctx.machines()
            .wait_for("the new Machines", |cache| {
                created
                    .iter()
                    .all(|n| cache.get(&ObjectRef::new(n).within(&ns)).is_some())
            })
            .await?;
    } else if live.len() > desired {
        let order = ms
            .spec
            .deletion
            .as_ref()
            .and_then(|d| d.order)
            .unwrap_or_default();
        let live_owned: Vec<Machine> = live.iter().map(|m| (*m).clone()).collect();
        let doomed = machines_to_delete(&live_owned, live.len() - desired, order, Timestamp::now());
        delete_machines(ctx, ms, &scope.machines_api, &doomed).await?;
    }
    Ok(Vec::new())
}

/// The MachineSet's status from its Machines as this reconcile read them, and what the
/// preflight checks said: replica counters, selector, versions, and the v1beta2 conditions.
fn compute_status(
    ms: &MachineSet,
    machines: &[Machine],
    preflight_problems: &[String],
    paused: NewCondition,
) -> MachineSetStatus {
    let mut status = ms.status.clone().unwrap_or_default();
    let desired = ms.spec.replicas.unwrap_or(1).max(0) as usize;
    let live = machines.iter().filter(|m| !common::deleting(*m)).count();
    let mut conds = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
    ];
    conds.push(NewCondition::activity(
        conditions::types::SCALING_UP,
        live < desired,
        || {
            let mut message = format!("Scaling up from {live} to {desired} replicas");
            if !preflight_problems.is_empty() {
                message.push_str(" is blocked because:");
                for problem in preflight_problems {
                    message.push_str(&format!("\n* {problem}"));
                }
            }
            message
        },
    ));
    conds.push(NewCondition::activity(
        conditions::types::SCALING_DOWN,
        live > desired,
        || format!("Scaling down from {live} to {desired} replicas"),
    ));
    let count = |t: &str| {
        machines
            .iter()
            .filter(|m| condition_of(m, t).is_some_and(|c| c.status == "True"))
            .count() as i32
    };
    status.replicas = Some(machines.len() as i32);
    status.ready_replicas = Some(count(conditions::types::READY));
    status.available_replicas = Some(count(conditions::types::AVAILABLE));
    status.up_to_date_replicas = Some(count(conditions::types::UP_TO_DATE));
    let selector = ms.spec.selector.match_labels.clone().unwrap_or_default();
    status.selector = Some(selector_string(&selector));
    status.versions = Some(super::machines::versions(
        machines.iter().filter_map(|m| m.spec.version.clone()),
    ));
    conds.extend(super::machines::machines_ready_and_up_to_date(machines));
    let generation = ms.meta().generation;
    common::set_conditions(&mut status.conditions, generation, conds);
    status.observed_generation = generation;
    status
}

/// Deletes these Machines of the set and waits until the shared cache shows them going, so the
/// next reconcile does not count them as live and delete others in their place.
async fn delete_machines(
    ctx: &Context,
    ms: &MachineSet,
    api: &Api<Machine>,
    names: &[String],
) -> Result<()> {
    for name in names {
        if let Err(e) = api.delete(name, &DeleteParams::background()).await {
            let note = format!("Failed to delete machine {name:?}: {e}");
            ctx.events
                .publish(CONTROLLER, ms, Severity::Warning, "FailedDelete", note);
            return Err(e.into());
        }
        let note = format!("Deleted machine {name:?}");
        ctx.events
            .publish(CONTROLLER, ms, Severity::Normal, "SuccessfulDelete", note);
    }
    let ns = api.namespace().unwrap_or_default();
    ctx.machines()
        .wait_for("the Machines being deleted", |cache| {
            names.iter().all(|n| {
                cache
                    .get(&ObjectRef::new(n).within(ns))
                    .is_none_or(|m| common::deleting(m.as_ref()))
            })
        })
        .await?;
    Ok(())
}

/// What keeps the set from creating Machines now, read from its Cluster's control plane
/// (nothing when the Cluster has no control-plane provider or it has no spec.version).
async fn preflight_problems(
    ctx: &Context,
    ms: &MachineSet,
    cluster: &Cluster,
) -> Result<Vec<String>> {
    let Some(reference) = &cluster.spec.control_plane_ref else {
        return Ok(Vec::new());
    };
    let ns = ms.namespace().unwrap_or_default();
    let Some(cp) = ctx.external.get(&ns, reference).await? else {
        return Ok(Vec::new());
    };
    let field = |path: &[&str]| {
        crate::reconcile::external::field(&cp, path)
            .and_then(Value::as_str)
            .map(String::from)
    };
    let Some(cp_version) = field(&["spec", "version"]) else {
        return Ok(Vec::new());
    };
    let reported: Vec<String> = crate::reconcile::external::field(&cp, &["status", "versions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v["version"].as_str().map(String::from))
        .chain(field(&["status", "version"]))
        .collect();
    let bootstrap = ms.spec.template.spec.bootstrap.config_ref.as_ref();
    Ok(preflight(&Preflight {
        control_plane: format!("{} {}", reference.kind, cp.name_any()),
        control_plane_version: &cp_version,
        control_plane_reported: &reported,
        version: ms.spec.template.spec.version.as_deref(),
        kubeadm_bootstrap: bootstrap.is_some_and(|b| {
            b.kind == "KubeadmConfigTemplate" && b.api_group == "bootstrap.cluster.x-k8s.io"
        }),
        skip: ms
            .annotations()
            .get(api::SKIP_PREFLIGHT_ANNOTATION)
            .map(String::as_str)
            .unwrap_or_default(),
    }))
}

/// What the preflight checks look at.
pub struct Preflight<'a> {
    /// `KubeadmControlPlane name`, for messages.
    pub control_plane: String,
    pub control_plane_version: &'a str,
    /// The versions the control plane's Machines run (status.versions, status.version).
    pub control_plane_reported: &'a [String],
    /// The set's Machines' version.
    pub version: Option<&'a str>,
    pub kubeadm_bootstrap: bool,
    /// The skip annotation's value: `All` or check names, comma-separated.
    pub skip: &'a str,
}

/// Upstream's MachineSet preflight checks: new workers wait while the control plane is being
/// provisioned or upgraded, and never run a newer minor than it, more than three minors
/// behind it, or (with kubeadm) another minor at all.
pub fn preflight(p: &Preflight<'_>) -> Vec<String> {
    let skipped = |check: &str| {
        p.skip
            .split(',')
            .map(str::trim)
            .any(|s| s == "All" || s == check)
    };
    let minor = |v: &str| crate::api::common::kubernetes_version(v).map(|(_, m, _)| m);
    let mut problems = Vec::new();
    if !skipped("ControlPlaneIsStable") {
        if p.control_plane_reported.is_empty() {
            problems.push(format!("{} is provisioning", p.control_plane));
        } else if p.control_plane_reported.iter().any(|v| {
            crate::api::common::kubernetes_version(v)
                < crate::api::common::kubernetes_version(p.control_plane_version)
        }) {
            problems.push(format!("{} is upgrading", p.control_plane));
        }
    }
    let (Some(version), Some(cp_minor)) = (p.version, minor(p.control_plane_version)) else {
        return problems;
    };
    let Some(ms_minor) = minor(version) else {
        return problems;
    };
    let incompatible = |why: &str| {
        format!(
            "MachineSet version ({version}) and {} version ({}) are not compatible: {why}",
            p.control_plane, p.control_plane_version
        )
    };
    if !skipped("KubernetesVersionSkew") {
        if ms_minor > cp_minor {
            problems.push(incompatible(
                "MachineSet version cannot be higher than the control plane version",
            ));
        } else if ms_minor + 3 < cp_minor {
            problems.push(incompatible(
                "MachineSet version cannot be more than 3 minor versions older than the control plane version",
            ));
        }
    }
    if !skipped("KubeadmVersionSkew") && p.kubeadm_bootstrap && ms_minor != cp_minor {
        problems.push(incompatible(
            "kubeadm's skew policy needs the same minor version (upgrade the control plane first)",
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::expect_condition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn machine(name: &str, age_days: i64, annotations: Value, node: bool) -> Machine {
        let created = Timestamp::from_second(1_700_000_000 - age_days * 86_400).unwrap();
        let status = if node {
            json!({"nodeRef": {"name": name}})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created.to_string(), "annotations": annotations},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": status,
        }))
        .unwrap()
    }

    /// A Machine whose Ready, Available and UpToDate conditions have these statuses.
    fn machine_in(
        name: &str,
        ready: &str,
        available: &str,
        up_to_date: &str,
        deleting: bool,
    ) -> Machine {
        let condition = |t: &str, status: &str| {
            let message = if status == "True" {
                String::new()
            } else {
                format!("{t} is {status}")
            };
            json!({"type": t, "status": status, "reason": "R", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": message})
        };
        let mut m: Machine = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "version": "v1.30.4", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"conditions": [condition("Ready", ready), condition("Available", available), condition("UpToDate", up_to_date)]},
        }))
        .unwrap();
        if deleting {
            m.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
            );
        }
        m
    }

    #[test]
    fn status_table() {
        struct Case {
            name: &'static str,
            replicas: i32,
            machines: Vec<Machine>,
            preflight: Vec<String>,
            /// (ready, available, up to date) replicas.
            counters: (i32, i32, i32),
            /// (condition type, status, message) for the ones that say something.
            conditions: Vec<(&'static str, &'static str, &'static str)>,
        }
        let ok = |n: &str| machine_in(n, "True", "True", "True", false);
        let cases = [
            Case {
                name: "all Machines there and ready",
                replicas: 2,
                machines: vec![ok("a"), ok("b")],
                preflight: vec![],
                counters: (2, 2, 2),
                conditions: vec![
                    ("ScalingUp", "False", ""),
                    ("ScalingDown", "False", ""),
                    ("MachinesReady", "True", ""),
                    ("Deleting", "False", ""),
                ],
            },
            Case {
                name: "a Machine being deleted is not live: scaling up to replace it",
                replicas: 2,
                machines: vec![ok("a"), machine_in("b", "False", "False", "True", true)],
                preflight: vec![],
                counters: (1, 1, 2),
                conditions: vec![("ScalingUp", "True", "Scaling up from 1 to 2 replicas")],
            },
            Case {
                name: "preflight checks block the scale-up and say why",
                replicas: 2,
                machines: vec![ok("a")],
                preflight: vec!["KubeadmControlPlane cp is upgrading".into()],
                counters: (1, 1, 1),
                conditions: vec![(
                    "ScalingUp",
                    "True",
                    "Scaling up from 1 to 2 replicas is blocked because:\n* KubeadmControlPlane cp is upgrading",
                )],
            },
            Case {
                name: "scaling down",
                replicas: 1,
                machines: vec![ok("a"), ok("b"), ok("c")],
                preflight: vec![],
                counters: (3, 3, 3),
                conditions: vec![("ScalingDown", "True", "Scaling down from 3 to 1 replicas")],
            },
            Case {
                name: "a Machine not ready makes MachinesReady false",
                replicas: 2,
                machines: vec![ok("a"), machine_in("b", "False", "False", "False", false)],
                preflight: vec![],
                counters: (1, 1, 1),
                conditions: vec![("MachinesReady", "False", "* Machine b: Ready is False")],
            },
        ];
        for case in cases {
            let ms: MachineSet = serde_json::from_value(json!({
                "metadata": {"name": "ms", "namespace": "ns", "generation": 4},
                "spec": {"clusterName": "c", "replicas": case.replicas, "selector": {"matchLabels": {"pool": "a"}}, "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"}}}},
            }))
            .unwrap();
            let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
            let status = compute_status(&ms, &case.machines, &case.preflight, paused);
            let name = case.name;
            assert_eq!(status.replicas, Some(case.machines.len() as i32), "{name}");
            assert_eq!(
                (
                    status.ready_replicas,
                    status.available_replicas,
                    status.up_to_date_replicas
                ),
                (
                    Some(case.counters.0),
                    Some(case.counters.1),
                    Some(case.counters.2)
                ),
                "{name}"
            );
            assert_eq!(status.selector.as_deref(), Some("pool=a"), "{name}");
            assert_eq!(status.observed_generation, Some(4), "{name}");
            for (type_, want, message) in case.conditions {
                let c = expect_condition(status.conditions.as_ref(), type_, name);
                assert_eq!(
                    (c.status.as_str(), c.message.as_str()),
                    (want, message),
                    "{name}: {type_}"
                );
            }
        }
    }

    #[test]
    fn preflight_checks_hold_new_workers_back() {
        let reported = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Control plane's reported versions, its spec.version, the set's version, kubeadm
        // bootstrap, the skip annotation, and the problems expected.
        type Case<'a> = (
            &'a [&'a str],
            &'a str,
            Option<&'a str>,
            bool,
            &'a str,
            &'a [&'a str],
        );
        let cases: &[Case<'_>] = &[
            (&["v1.30.4"], "v1.30.4", Some("v1.30.4"), true, "", &[]),
            (
                &[],
                "v1.30.4",
                Some("v1.30.4"),
                true,
                "",
                &["KubeadmControlPlane cp is provisioning"],
            ),
            (
                &["v1.29.10", "v1.30.4"],
                "v1.30.4",
                Some("v1.30.4"),
                true,
                "",
                &["KubeadmControlPlane cp is upgrading"],
            ),
            (
                &["v1.30.4"],
                "v1.30.4",
                Some("v1.31.0"),
                false,
                "",
                &[
                    "MachineSet version (v1.31.0) and KubeadmControlPlane cp version (v1.30.4) are not compatible: MachineSet version cannot be higher than the control plane version",
                ],
            ),
            (
                &["v1.30.4"],
                "v1.30.4",
                Some("v1.26.0"),
                false,
                "",
                &[
                    "MachineSet version (v1.26.0) and KubeadmControlPlane cp version (v1.30.4) are not compatible: MachineSet version cannot be more than 3 minor versions older than the control plane version",
                ],
            ),
            (&["v1.30.4"], "v1.30.4", Some("v1.27.0"), false, "", &[]),
            (
                &["v1.30.4"],
                "v1.30.4",
                Some("v1.29.0"),
                true,
                "",
                &[
                    "MachineSet version (v1.29.0) and KubeadmControlPlane cp version (v1.30.4) are not compatible: kubeadm's skew policy needs the same minor version (upgrade the control plane first)",
                ],
            ),
            (
                &["v1.30.4"],
                "v1.30.4",
                Some("v1.29.0"),
                true,
                "KubeadmVersionSkew",
                &[],
            ),
            (&[], "v1.30.4", Some("v1.31.0"), true, "All", &[]),
        ];
        for (cp_reported, cp_version, version, kubeadm, skip, want) in cases {
            let reported = reported(cp_reported);
            let got = preflight(&Preflight {
                control_plane: "KubeadmControlPlane cp".into(),
                control_plane_version: cp_version,
                control_plane_reported: &reported,
                version: *version,
                kubeadm_bootstrap: *kubeadm,
                skip,
            });
            assert_eq!(got, *want, "{cp_reported:?} {version:?} skip={skip}");
        }
    }

    #[test]
    fn remediation_goes_as_far_as_max_in_flight_allows() {
        let asked = |name: &str, deleting: bool| {
            let mut m = machine(name, 1, json!({}), true);
            m.status.as_mut().unwrap().conditions = Some(vec![Condition {
                type_: api::OWNER_REMEDIATED.into(),
                status: "False".into(),
                reason: "WaitingForRemediation".into(),
                message: String::new(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    Timestamp::from_second(1_700_000_000).unwrap(),
                ),
                observed_generation: None,
            }]);
            if deleting {
                m.metadata.deletion_timestamp = m.metadata.creation_timestamp.clone();
            }
            m
        };
        let machines = vec![
            asked("c", false),
            asked("a", false),
            machine("healthy", 1, json!({}), true),
            asked("going", true),
            asked("b", false),
        ];
        for (limit, want) in [
            (None, vec!["a", "b", "c"]),
            (Some(3), vec!["a", "b"]),
            (Some(2), vec!["a"]),
            (Some(1), vec![]),
        ] {
            assert_eq!(
                to_remediate(&machines, limit),
                want,
                "maxInFlight {limit:?}"
            );
        }
    }

    #[test]
    fn scale_down_picks_by_priority_then_policy() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let machines = vec![
            machine("a-old", 30, json!({}), true),
            machine("b-new", 1, json!({}), true),
            machine(
                "c-marked",
                5,
                json!({(api::DELETE_MACHINE_ANNOTATION): "yes"}),
                true,
            ),
            machine("d-nonode", 2, json!({}), false),
        ];
        // Marked first, then Machines without a Node, then by policy.
        assert_eq!(
            machines_to_delete(&machines, 3, DeletionOrder::Oldest, now),
            ["c-marked", "d-nonode", "a-old"]
        );
        assert_eq!(
            machines_to_delete(&machines, 3, DeletionOrder::Newest, now),
            ["c-marked", "d-nonode", "b-new"]
        );
        // Random treats the healthy ones alike; names break the tie.
        assert_eq!(
            machines_to_delete(&machines, 3, DeletionOrder::Random, now),
            ["c-marked", "d-nonode", "a-old"]
        );
    }
}
