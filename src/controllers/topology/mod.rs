//! The topology controller: Clusters with `spec.topology` get the objects their ClusterClass
//! describes, kept as the class and the topology say, as upstream's
//! `topology/cluster` reconciler does.
//!
//! Each reconcile reads the class (which must be reconciled: `VariablesReady`, its
//! observedGeneration current), resolves the Cluster's variables against the class's schemas
//! ([`crate::topology::variables`]), reads the class's templates and what exists, computes the desired objects
//! ([`desired`], with [`patches`] and [`versions`]), and applies them with server-side apply
//! as field manager `capi-topology`. A template whose spec would change is not changed: a new
//! copy is made and the object using it is pointed at it (template rotation), which rolls its
//! Machines. MachineDeployments removed from the topology are deleted with their templates
//! and health checks. The Cluster's `TopologyReconciled` condition says how it went: what is
//! upgrading, pending, deferred, or why the reconcile failed.
//!
//! [`plan`] runs the same computation and applies everything as a server-side dry run: what
//! `capictl topology plan` shows.

pub mod desired;
mod hooks;
pub mod patches;
pub mod versions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::api;
use crate::api::cluster_class::{
    ClusterClass, TOPOLOGY_DEPLOYMENT_NAME_LABEL, TOPOLOGY_MANAGER, TOPOLOGY_OWNED_LABEL,
    TOPOLOGY_POOL_NAME_LABEL, topology as reasons,
};
use crate::api::common::TemplateReference;
use crate::api::{Cluster, KubeadmControlPlane, MachineDeployment, MachinePool};
use crate::conditions::{NewCondition, Status};
use crate::reconcile::events::Severity;
use crate::reconcile::external::group_of;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Error, Result, common};
use crate::topology::variables;
use desired::{Blueprint, Current, DeploymentNow, Desired};
use versions::ControlPlaneNow;

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "topology/cluster";

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<Cluster>(CONTROLLER);
    let clusters = controller.store();
    // A class's change wakes the Clusters of that class.
    let of_class = move |class: ClusterClass| {
        let namespace = class.namespace().unwrap_or_default();
        let name = class.name_any();
        clusters
            .state()
            .into_iter()
            .filter(|c| {
                c.spec.topology.as_ref().is_some_and(|t| {
                    t.class_ref.name == name
                        && t.class_ref.namespace.clone().or(c.namespace()).as_deref()
                            == Some(namespace.as_str())
                })
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    };
    let controller = controller
        .watches(
            Api::<ClusterClass>::all(w.client.clone()),
            watcher::Config::default(),
            of_class,
        )
        .watches(
            Api::<KubeadmControlPlane>::all(w.client.clone()),
            watcher::Config::default(),
            |cp| labelled_cluster(&cp),
        )
        .watches(
            Api::<MachineDeployment>::all(w.client.clone()),
            watcher::Config::default().labels(TOPOLOGY_OWNED_LABEL),
            |md| labelled_cluster(&md),
        )
        .watches(
            Api::<MachinePool>::all(w.client.clone()),
            watcher::Config::default().labels(TOPOLOGY_OWNED_LABEL),
            |mp| labelled_cluster(&mp),
        );
    w.run(CONTROLLER, controller, reconcile)
}

/// The Cluster an object is labelled with, to wake.
fn labelled_cluster<K: Resource>(object: &K) -> Option<ObjectRef<Cluster>> {
    let cluster = object
        .meta()
        .labels
        .as_ref()?
        .get(api::CLUSTER_NAME_LABEL)?;
    crate::reconcile::runtime::cluster_of(object, cluster)
}

/// What a reconcile of a topology found to say.
enum Outcome {
    /// Not for this controller, or nothing to do now.
    Skip(Action),
    /// Write this condition, then act.
    Report(NewCondition, Action),
}

fn failed(message: impl Into<String>) -> NewCondition {
    NewCondition::new(
        reasons::TOPOLOGY_RECONCILED,
        Status::False,
        reasons::RECONCILE_FAILED,
    )
    .message(message)
}

pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action> {
    let outcome = match reconcile_topology(&cluster, &ctx, Mode::Apply).await {
        Ok(o) => o,
        // A failure the user can act on goes in the condition; the reconcile is retried.
        Err(e) => Outcome::Report(
            failed(e.to_string()),
            Action::requeue(Duration::from_secs(10)),
        ),
    };
    match outcome {
        Outcome::Skip(action) => Ok(action),
        Outcome::Report(condition, action) => {
            record(&ctx, &cluster, condition).await?;
            Ok(action)
        }
    }
}

/// Writes the Cluster's TopologyReconciled condition (only that one, with the resourceVersion
/// as a precondition, so that the Cluster controller's conditions are neither lost nor
/// overwritten).
async fn record(ctx: &Context, cluster: &Cluster, condition: NewCondition) -> Result<()> {
    let mut status = cluster.status.clone().unwrap_or_default();
    let before = status.conditions.clone();
    common::set_conditions(
        &mut status.conditions,
        cluster.metadata.generation,
        vec![condition],
    );
    if status.conditions == before {
        return Ok(());
    }
    let api: Api<Cluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let patch = json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "status": {"conditions": status.conditions},
    });
    match api
        .patch_status(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        // The Cluster changed meanwhile: that change wakes this controller again.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other.map(|_| ()).map_err(Error::from),
    }
}

/// Writes the versions the control plane and the workers have yet to go through in the
/// Cluster's `status.controlPlane.upgradePlan` and `status.workers.upgradePlan`, when they
/// changed (the Cluster controller keeps them).
async fn record_upgrade_plan(
    ctx: &Context,
    cluster: &Cluster,
    progress: &versions::Progress,
) -> Result<()> {
    let status = cluster.status.as_ref();
    let now = |plan: Option<&Vec<crate::api::common::UpgradeStep>>| -> Vec<String> {
        plan.into_iter()
            .flatten()
            .map(|s| s.version.clone())
            .collect()
    };
    let control_plane = now(status
        .and_then(|s| s.control_plane.as_ref())
        .and_then(|c| c.upgrade_plan.as_ref()));
    let workers = now(status
        .and_then(|s| s.workers.as_ref())
        .and_then(|w| w.upgrade_plan.as_ref()));
    if control_plane == progress.control_plane_plan && workers == progress.workers_plan {
        return Ok(());
    }
    let steps = |plan: &[String]| -> Value {
        if plan.is_empty() {
            Value::Null
        } else {
            json!(
                plan.iter()
                    .map(|v| json!({"version": v}))
                    .collect::<Vec<_>>()
            )
        }
    };
    let api: Api<Cluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    api.patch_status(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "controlPlane": {"upgradePlan": steps(&progress.control_plane_plan)},
            "workers": {"upgradePlan": steps(&progress.workers_plan)},
        }})),
    )
    .await?;
    Ok(())
}

/// Whether objects are written or only dry-run (for a plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Apply,
    DryRun,
}

/// What one object's apply did, for a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub action: ChangeAction,
    /// The object before (None when created) and after (None when deleted).
    pub before: Option<Value>,
    pub after: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeAction {
    Created,
    Modified,
    Deleted,
}

/// Applies objects as the topology controller; in a plan, records what would change.
struct Applier<'a> {
    ctx: &'a Context,
    /// The Cluster whose topology this is: its Events tell what the topology changed.
    cluster: &'a Cluster,
    mode: Mode,
    changes: Vec<Change>,
}

/// An object without what the server keeps for itself, to compare a before with an after.
pub fn comparable(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(meta) = o["metadata"].as_object_mut() {
        for field in [
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
        ] {
            meta.remove(field);
        }
    }
    if let Some(map) = o.as_object_mut() {
        map.remove("status");
    }
    o
}

impl Applier<'_> {
    async fn api_for(&self, object: &Value) -> Result<Api<DynamicObject>> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let resource: ApiResource = self
            .ctx
            .external
            .resource(group_of(api_version), kind)
            .await?;
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        Ok(Api::namespaced_with(
            self.ctx.client.clone(),
            namespace,
            &resource,
        ))
    }

    /// Server-side applies an object as `capi-topology` (a dry run in a plan, or `dry` asked).
    /// A plan records what changed; a reconcile only writes (no read before each apply).
    async fn apply_as(&mut self, object: &Value, dry: bool) -> Result<Value> {
        let api = self.api_for(object).await?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let planning = self.mode == Mode::DryRun;
        let before = if planning && !dry {
            api.get_opt(&name).await?
        } else {
            None
        };
        let mut params = PatchParams::apply(TOPOLOGY_MANAGER).force();
        params.dry_run = dry || planning;
        let after = api.patch(&name, &params, &Patch::Apply(object)).await?;
        let after = serde_json::to_value(&after).map_err(|e| Error::Invalid(e.to_string()))?;
        if planning && !dry {
            let before = before.map(|b| serde_json::to_value(b).expect("objects serialize"));
            let action = match &before {
                None => Some(ChangeAction::Created),
                Some(b) if comparable(b) != comparable(&after) => Some(ChangeAction::Modified),
                Some(_) => None,
            };
            if let Some(action) = action {
                self.changes.push(Change {
                    kind: object["kind"].as_str().unwrap_or_default().into(),
                    namespace: object["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                    name,
                    action,
                    before,
                    after: Some(after.clone()),
                });
            }
        }
        Ok(after)
    }

    /// An Event on the Cluster about what its topology changed.
    fn record(&self, reason: &'static str, note: String) {
        self.ctx
            .events
            .publish(CONTROLLER, self.cluster, Severity::Normal, reason, note);
    }

    async fn apply(&mut self, object: &Value) -> Result<Value> {
        self.apply_as(object, false).await
    }

    /// Applies a template copy, unless its spec would change: then a new copy is made under a
    /// new name (template rotation) and that name is returned, to be referenced instead.
    async fn template(
        &mut self,
        desired: &Value,
        current: Option<&Value>,
        prefix: &str,
    ) -> Result<String> {
        let mut desired = desired.clone();
        if let Some(current) = current {
            let after = self.apply_as(&desired, true).await?;
            if after["spec"] == current["spec"] {
                self.apply(&desired).await?;
                return Ok(current["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string());
            }
            // Named after its spec: a plan names the copy the reconcile then makes.
            let new_name = format!("{prefix}{}", desired::suffix(&desired["spec"].to_string()));
            tracing::info!(
                kind = %desired["kind"].as_str().unwrap_or_default(),
                old = %current["metadata"]["name"].as_str().unwrap_or_default(),
                new = %new_name,
                "rotating a template whose spec changed"
            );
            desired["metadata"]["name"] = json!(new_name);
            self.apply(&desired).await?;
            if self.mode == Mode::Apply {
                let note = format!(
                    "Rotated {} {:?} to {new_name:?}: its spec changed",
                    desired["kind"].as_str().unwrap_or_default(),
                    current["metadata"]["name"].as_str().unwrap_or_default(),
                );
                self.record("TopologyUpdate", note);
            }
            return Ok(new_name);
        }
        self.apply(&desired).await?;
        Ok(desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    async fn delete(&mut self, object: &Value) -> Result<()> {
        let api = self.api_for(object).await?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let params = DeleteParams {
            dry_run: self.mode == Mode::DryRun,
            ..DeleteParams::background()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        if self.mode != Mode::DryRun {
            let note = format!(
                "Deleted {} {:?}",
                object["kind"].as_str().unwrap_or_default(),
                name
            );
            self.record("TopologyDelete", note);
            return Ok(());
        }
        self.changes.push(Change {
            kind: object["kind"].as_str().unwrap_or_default().into(),
            namespace: object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name,
            action: ChangeAction::Deleted,
            before: Some(object.clone()),
            after: None,
        });
        Ok(())
    }
}

/// Reads a template a class references (in the class's namespace).
async fn read_template(
    ctx: &Context,
    namespace: &str,
    reference: &TemplateReference,
) -> Result<Value> {
    let (api, _) = ctx.external.template_api(namespace, reference).await?;
    let template = api.get_opt(&reference.name).await?.ok_or_else(|| {
        Error::Invalid(format!(
            "{} {namespace}/{} does not exist: create it, or point the ClusterClass at one that does",
            reference.kind, reference.name
        ))
    })?;
    Ok(serde_json::to_value(template).expect("objects serialize"))
}

/// An object a contract reference names, if it exists.
async fn read_ref(
    ctx: &Context,
    namespace: &str,
    reference: Option<&api::common::ContractVersionedObjectReference>,
) -> Result<Option<Value>> {
    let Some(r) = reference else { return Ok(None) };
    Ok(ctx
        .external
        .get(namespace, r)
        .await?
        .map(|o| serde_json::to_value(o).expect("objects serialize")))
}

fn reference_at(
    object: &Value,
    path: &[&str],
) -> Option<api::common::ContractVersionedObjectReference> {
    let r = path.iter().try_fold(object, |v, k| v.get(*k))?;
    serde_json::from_value(r.clone()).ok()
}

/// The bootstrap and infrastructure templates of a class's worker classes, by class.
async fn worker_templates<'a>(
    ctx: &Context,
    namespace: &str,
    classes: impl Iterator<
        Item = (
            &'a String,
            &'a api::cluster_class::TemplateRefHolder,
            &'a api::cluster_class::TemplateRefHolder,
        ),
    >,
) -> Result<BTreeMap<String, (Value, Value)>> {
    let mut templates = BTreeMap::new();
    for (class, bootstrap, infrastructure) in classes {
        templates.insert(
            class.clone(),
            (
                read_template(ctx, namespace, &bootstrap.template_ref).await?,
                read_template(ctx, namespace, &infrastructure.template_ref).await?,
            ),
        );
    }
    Ok(templates)
}

/// The class's templates.
async fn blueprint(ctx: &Context, class: &ClusterClass) -> Result<Blueprint> {
    let namespace = class.namespace().unwrap_or_default();
    let spec = &class.spec;
    let workers = spec.workers.as_ref();
    let deployment_classes = worker_templates(
        ctx,
        &namespace,
        workers
            .and_then(|w| w.machine_deployments.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (&c.class, &c.bootstrap, &c.infrastructure)),
    )
    .await?;
    let pool_classes = worker_templates(
        ctx,
        &namespace,
        workers
            .and_then(|w| w.machine_pools.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (&c.class, &c.bootstrap, &c.infrastructure)),
    )
    .await?;
    Ok(Blueprint {
        class: class.clone(),
        pool_classes,
        infrastructure_cluster: read_template(ctx, &namespace, &spec.infrastructure.template_ref)
            .await?,
        control_plane: read_template(ctx, &namespace, &spec.control_plane.template_ref).await?,
        control_plane_machines: match &spec.control_plane.machine_infrastructure {
            Some(m) => Some(read_template(ctx, &namespace, &m.template_ref).await?),
            None => None,
        },
        deployment_classes,
    })
}

/// A MachineDeployment or MachinePool of the topology as it is: the object, whether its
/// Machines (by their `label` naming it) lag its version, and its bootstrap and infrastructure
/// objects.
async fn worker_now<K: Resource + serde::Serialize>(
    ctx: &Context,
    worker: &K,
    spec: &api::machine::MachineSpec,
    machines: &[Arc<api::Machine>],
    label: &str,
) -> Result<DeploymentNow> {
    let namespace = worker.meta().namespace.clone().unwrap_or_default();
    let name = worker.meta().name.clone().unwrap_or_default();
    Ok(DeploymentNow {
        object: serde_json::to_value(worker).expect("objects serialize"),
        upgrading: machines
            .iter()
            .any(|m| m.labels().get(label) == Some(&name) && m.spec.version != spec.version),
        bootstrap: read_ref(ctx, &namespace, spec.bootstrap.config_ref.as_ref()).await?,
        infrastructure: read_ref(ctx, &namespace, Some(&spec.infrastructure_ref)).await?,
    })
}

/// What exists of the Cluster's topology.
async fn current_state(ctx: &Context, cluster: &Cluster) -> Result<(Current, Vec<Value>)> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let machines = ctx
        .machines()
        .list_labelled(&namespace, &name, |m| m.spec.cluster_name == name)
        .await?;
    let infrastructure_cluster =
        read_ref(ctx, &namespace, cluster.spec.infrastructure_ref.as_ref()).await?;
    let control_plane_object =
        read_ref(ctx, &namespace, cluster.spec.control_plane_ref.as_ref()).await?;
    let mut control_plane_machines = None;
    let control_plane = match control_plane_object {
        None => None,
        Some(object) => {
            control_plane_machines = read_ref(
                ctx,
                &namespace,
                reference_at(
                    &object,
                    &["spec", "machineTemplate", "spec", "infrastructureRef"],
                )
                .as_ref(),
            )
            .await?;
            let cp_name = object["metadata"]["name"].as_str().unwrap_or_default();
            let version = object["spec"]["version"].as_str();
            let upgrading = machines.iter().any(|m| {
                m.labels()
                    .get(api::CONTROL_PLANE_NAME_LABEL)
                    .map(String::as_str)
                    == Some(cp_name)
                    && m.spec.version.as_deref() != version
            });
            Some(ControlPlaneNow {
                provisioning: object["status"]["version"]
                    .as_str()
                    .is_none_or(str::is_empty),
                upgrading,
                object,
            })
        }
    };
    let deployments_api: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let listed = deployments_api
        .list(&ListParams::default().labels(&format!(
            "{}={name},{TOPOLOGY_OWNED_LABEL}",
            api::CLUSTER_NAME_LABEL
        )))
        .await?;
    let mut deployments = BTreeMap::new();
    let mut health_checks = Vec::new();
    for md in listed.items {
        let Some(topology_name) = md.labels().get(TOPOLOGY_DEPLOYMENT_NAME_LABEL).cloned() else {
            continue;
        };
        let now = worker_now(
            ctx,
            &md,
            &md.spec.template.spec,
            &machines,
            api::DEPLOYMENT_NAME_LABEL,
        )
        .await?;
        deployments.insert(topology_name, now);
    }
    let pools_api: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut pools = BTreeMap::new();
    for mp in pools_api
        .list(&ListParams::default().labels(&format!(
            "{}={name},{TOPOLOGY_OWNED_LABEL}",
            api::CLUSTER_NAME_LABEL
        )))
        .await?
        .items
    {
        let Some(topology_name) = mp.labels().get(TOPOLOGY_POOL_NAME_LABEL).cloned() else {
            continue;
        };
        let now = worker_now(
            ctx,
            &mp,
            &mp.spec.template.spec,
            &machines,
            api::MACHINE_POOL_NAME_LABEL,
        )
        .await?;
        pools.insert(topology_name, now);
    }
    let checks: Api<api::MachineHealthCheck> = Api::namespaced(ctx.client.clone(), &namespace);
    for mhc in checks
        .list(&ListParams::default().labels(&format!(
            "{}={name},{TOPOLOGY_OWNED_LABEL}",
            api::CLUSTER_NAME_LABEL
        )))
        .await?
        .items
    {
        let mut value = serde_json::to_value(&mhc).expect("objects serialize");
        value["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
        value["kind"] = json!("MachineHealthCheck");
        health_checks.push(value);
    }
    Ok((
        Current {
            infrastructure_cluster,
            control_plane,
            control_plane_machines,
            deployments,
            pools,
            class_versions: Vec::new(),
            upgrade_hold: None,
            workers_hold: None,
            finish_hold: None,
        },
        health_checks,
    ))
}

/// The class of a Cluster, if it is reconciled; else the condition that says why not.
async fn class_of(
    ctx: &Context,
    cluster: &Cluster,
) -> Result<std::result::Result<ClusterClass, NewCondition>> {
    let topology = cluster.spec.topology.as_ref().expect("a managed topology");
    let namespace = topology
        .class_ref
        .namespace
        .clone()
        .or(cluster.namespace())
        .unwrap_or_default();
    let api: Api<ClusterClass> = Api::namespaced(ctx.client.clone(), &namespace);
    let not_reconciled = |message: String| {
        NewCondition::new(
            reasons::TOPOLOGY_RECONCILED,
            Status::False,
            reasons::CLUSTER_CLASS_NOT_RECONCILED,
        )
        .message(message)
    };
    let Some(class) = api.get_opt(&topology.class_ref.name).await? else {
        return Ok(Err(failed(format!(
            "failed to retrieve ClusterClass {namespace}/{}: it does not exist; create it, or correct spec.topology.classRef",
            topology.class_ref.name
        ))));
    };
    let status = class.status.clone().unwrap_or_default();
    let variables_ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == api::cluster_class::conditions::VARIABLES_READY);
    if variables_ready.is_none_or(|c| c.status != "True") {
        return Ok(Err(not_reconciled(
            "ClusterClass is not successfully reconciled: status of VariablesReady condition on ClusterClass must be \"True\"".into(),
        )));
    }
    if status.observed_generation != class.metadata.generation {
        let refs = status
            .conditions
            .iter()
            .flatten()
            .find(|c| {
                c.type_ == api::cluster_class::conditions::REF_VERSIONS_UP_TO_DATE
                    && c.status != "True"
            })
            .map(|c| format!(" ({})", c.message))
            .unwrap_or_default();
        return Ok(Err(not_reconciled(format!(
            "ClusterClass is not successfully reconciled: ClusterClass.status.observedGeneration must be {}, but is {}{refs}",
            class.metadata.generation.unwrap_or_default(),
            status.observed_generation.unwrap_or_default()
        ))));
    }
    Ok(Ok(class))
}

/// The Cluster's variables and their overrides, resolved against the class.
fn resolve_variables(
    cluster: &Cluster,
    class: &ClusterClass,
) -> std::result::Result<desired::Variables, String> {
    let topology = cluster.spec.topology.as_ref().expect("a managed topology");
    let definitions = class
        .status
        .as_ref()
        .and_then(|s| s.variables.clone())
        .unwrap_or_default();
    let mut causes = Vec::new();
    let mut out = desired::Variables::default();
    match variables::resolve(
        &definitions,
        topology.variables.as_deref().unwrap_or_default(),
        "spec.topology.variables",
    ) {
        Ok(v) => out.cluster = v,
        Err(c) => causes.extend(c),
    }
    if let Some(o) = topology
        .control_plane
        .as_ref()
        .and_then(|c| c.variables.as_ref())
        .and_then(|v| v.overrides.as_ref())
    {
        match variables::overrides(
            &definitions,
            o,
            "spec.topology.controlPlane.variables.overrides",
        ) {
            Ok(v) => out.control_plane = v,
            Err(c) => causes.extend(c),
        }
    }
    let workers = topology.workers.as_ref();
    let deployments: Vec<(&String, Option<&api::cluster::VariableOverrides>)> = workers
        .and_then(|w| w.machine_deployments.as_ref())
        .into_iter()
        .flatten()
        .map(|md| (&md.name, md.variables.as_ref()))
        .collect();
    let pools: Vec<(&String, Option<&api::cluster::VariableOverrides>)> = workers
        .and_then(|w| w.machine_pools.as_ref())
        .into_iter()
        .flatten()
        .map(|mp| (&mp.name, mp.variables.as_ref()))
        .collect();
    for (list, entries, resolved) in [
        ("machineDeployments", deployments, &mut out.deployments),
        ("machinePools", pools, &mut out.pools),
    ] {
        for (i, (name, variables)) in entries.into_iter().enumerate() {
            let Some(o) = variables.and_then(|v| v.overrides.as_ref()) else {
                continue;
            };
            let path = format!("spec.topology.workers.{list}[{i}].variables.overrides");
            match variables::overrides(&definitions, o, &path) {
                Ok(v) => {
                    resolved.insert(name.clone(), v);
                }
                Err(c) => causes.extend(c),
            }
        }
    }
    if causes.is_empty() {
        Ok(out)
    } else {
        Err(causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

/// The result of one topology computation and apply.
pub struct Reconciled {
    pub desired: Desired,
    /// In a plan, what would be created, modified and deleted (empty when applying).
    pub changes: Vec<Change>,
}

async fn reconcile_topology(cluster: &Cluster, ctx: &Context, mode: Mode) -> Result<Outcome> {
    if cluster.spec.topology.is_none() {
        return Ok(Outcome::Skip(Action::await_change()));
    }
    let in_progress = Action::requeue(Duration::from_secs(5));
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        Some(cluster),
        "Cluster",
        cluster.annotations(),
    );
    if is_paused {
        return Ok(Outcome::Report(
            NewCondition::new(reasons::TOPOLOGY_RECONCILED, Status::False, reasons::PAUSED)
                .message(paused.message),
            Action::await_change(),
        ));
    }
    if common::deleting(cluster) {
        let deleting = |message: String, action| {
            Outcome::Report(
                NewCondition::new(
                    reasons::TOPOLOGY_RECONCILED,
                    Status::False,
                    reasons::DELETING,
                )
                .message(message),
                action,
            )
        };
        if mode == Mode::Apply
            && let Some(hold) = hooks::before_cluster_delete(ctx, cluster).await?
        {
            return Ok(deleting(
                format!("Cluster is deleting. {}", hold.message),
                Action::requeue(hold.retry_after),
            ));
        }
        return Ok(deleting(
            "Cluster is deleting".into(),
            Action::await_change(),
        ));
    }
    let class = match class_of(ctx, cluster).await? {
        Ok(c) => c,
        Err(condition) => {
            return Ok(Outcome::Report(
                condition,
                Action::requeue(Duration::from_secs(10)),
            ));
        }
    };
    if mode == Mode::Apply
        && let Some(hold) = hooks::before_cluster_create(ctx, cluster).await?
    {
        return Ok(Outcome::Report(
            NewCondition::new(
                reasons::TOPOLOGY_RECONCILED,
                Status::False,
                reasons::CLUSTER_CREATING,
            )
            .message(hold.message),
            Action::requeue(hold.retry_after),
        ));
    }
    let reconciled = match topology_objects(cluster, ctx, &class, mode).await? {
        Ok(r) => r,
        Err(message) => {
            return Ok(Outcome::Report(
                failed(message),
                Action::requeue(Duration::from_secs(10)),
            ));
        }
    };
    if mode == Mode::Apply {
        hooks::after_control_plane_initialized(ctx, cluster).await?;
        record_upgrade_plan(ctx, cluster, &reconciled.desired.progress).await?;
    }
    let progress = &reconciled.desired.progress;
    let lines: String = progress
        .lines
        .iter()
        .map(|l| format!("\n  * {l}"))
        .collect();
    let condition = if progress.upgrading {
        NewCondition::new(
            reasons::TOPOLOGY_RECONCILED,
            Status::False,
            reasons::CLUSTER_UPGRADING,
        )
        .message(format!(
            "Cluster is upgrading to {}{lines}",
            progress.version
        ))
    } else if progress.creating {
        NewCondition::new(
            reasons::TOPOLOGY_RECONCILED,
            Status::False,
            reasons::CLUSTER_CREATING,
        )
        .message(format!("Cluster is creating{lines}"))
    } else {
        NewCondition::new(
            reasons::TOPOLOGY_RECONCILED,
            Status::True,
            reasons::RECONCILE_SUCCEEDED,
        )
    };
    let action = if progress.upgrading || progress.creating {
        in_progress
    } else {
        Action::requeue(Duration::from_secs(60))
    };
    Ok(Outcome::Report(condition, action))
}

/// Computes the desired objects and applies them; an error the user must fix comes back as
/// the message of a failed reconcile.
async fn topology_objects(
    cluster: &Cluster,
    ctx: &Context,
    class: &ClusterClass,
    mode: Mode,
) -> Result<std::result::Result<Reconciled, String>> {
    let variables = match resolve_variables(cluster, class) {
        Ok(v) => v,
        Err(message) => return Ok(Err(message)),
    };
    let blueprint = match blueprint(ctx, class).await {
        Ok(b) => b,
        Err(Error::Invalid(message)) => {
            return Ok(Err(format!(
                "failed to read the ClusterClass's templates: {message}"
            )));
        }
        Err(e) => return Err(e),
    };
    let (mut current, health_checks) = current_state(ctx, cluster).await?;
    current.class_versions = class.spec.kubernetes_versions.clone().unwrap_or_default();
    if mode == Mode::Apply {
        hooks::upgrade(ctx, cluster, &mut current).await?;
    }
    let extensions = hooks::PatchesOf {
        ctx,
        namespace: cluster.namespace().unwrap_or_default(),
    };
    let generated = desired::generate(cluster, &blueprint, &current, &variables, &extensions);
    let mut desired = match generated.await {
        Ok(d) => d,
        Err(message) => return Ok(Err(message)),
    };
    let mut applier = Applier {
        ctx,
        cluster,
        mode,
        changes: Vec::new(),
    };
    match apply_state(
        &mut applier,
        cluster,
        &current,
        &health_checks,
        &mut desired,
    )
    .await
    {
        Ok(()) => {}
        // The API server refused an object: that is the user's to fix (a patch that makes an
        // invalid object, a webhook rule), so it is reported, not retried blindly.
        Err(Error::Kube(kube::Error::Api(s))) if s.code == 422 || s.code == 400 => {
            return Ok(Err(format!(
                "the API server refused a topology object: {}",
                s.message
            )));
        }
        Err(e) => return Err(e),
    }
    Ok(Ok(Reconciled {
        desired,
        changes: applier.changes,
    }))
}

async fn apply_state(
    applier: &mut Applier<'_>,
    cluster: &Cluster,
    current: &Current,
    health_checks: &[Value],
    desired: &mut Desired,
) -> Result<()> {
    let cluster_name = cluster.name_any();
    applier.apply(&desired.infrastructure_cluster).await?;

    // The control plane, its machine template first (rotated when its spec changed).
    if let Some(machines) = &desired.control_plane_machines {
        let name = applier
            .template(
                machines,
                current.control_plane_machines.as_ref(),
                &format!("{cluster_name}-"),
            )
            .await?;
        desired.control_plane["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"] =
            json!(name);
    }
    applier.apply(&desired.control_plane).await?;
    if let (Some(old), Some(new)) = (
        &current.control_plane_machines,
        &desired.control_plane_machines,
    ) {
        let in_use = desired.control_plane["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
            ["name"]
            .clone();
        if old["metadata"]["name"] != in_use
            && old["metadata"]["labels"][TOPOLOGY_OWNED_LABEL].is_string()
            && new["kind"] == old["kind"]
        {
            // The control plane's Machines are made from their own copies: the old template
            // is no longer needed.
            applier.delete(old).await?;
        }
    }
    let mut wanted_checks = Vec::new();
    if let Some(check) = &desired.control_plane_health_check {
        applier.apply(check).await?;
        wanted_checks.push(check["metadata"]["name"].clone());
    }
    applier.apply(&desired.cluster).await?;

    // The MachineDeployments, with their templates and health checks.
    for md in &mut desired.deployments {
        let now = current.deployments.get(&md.topology_name);
        let prefix = format!("{cluster_name}-{}-", md.topology_name);
        let bootstrap = applier
            .template(
                &md.bootstrap,
                now.and_then(|d| d.bootstrap.as_ref()),
                &prefix,
            )
            .await?;
        let infrastructure = applier
            .template(
                &md.infrastructure,
                now.and_then(|d| d.infrastructure.as_ref()),
                &prefix,
            )
            .await?;
        let spec = &mut md.object["spec"]["template"]["spec"];
        spec["bootstrap"]["configRef"]["name"] = json!(bootstrap);
        spec["infrastructureRef"]["name"] = json!(infrastructure);
        applier.apply(&md.object).await?;
        if now.is_some() {
            collect_unused_templates(applier, &md.object, &md.topology_name).await?;
        }
        if let Some(check) = &md.health_check {
            applier.apply(check).await?;
            wanted_checks.push(check["metadata"]["name"].clone());
        }
    }

    // The MachinePools, their bootstrap configs and infrastructure changed in place.
    for mp in &desired.pools {
        applier.apply(&mp.bootstrap).await?;
        applier.apply(&mp.infrastructure).await?;
        applier.apply(&mp.object).await?;
    }

    // MachineDeployments and MachinePools no longer in the topology go, with their templates.
    let topology = cluster.spec.topology.as_ref().expect("a managed topology");
    let listed: Vec<&str> = topology
        .workers
        .iter()
        .flat_map(|w| w.machine_deployments.iter().flatten())
        .map(|md| md.name.as_str())
        .collect();
    for (name, now) in &current.deployments {
        if listed.contains(&name.as_str()) {
            continue;
        }
        let mut object = now.object.clone();
        object["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
        object["kind"] = json!("MachineDeployment");
        applier.delete(&object).await?;
        for template in [&now.bootstrap, &now.infrastructure].into_iter().flatten() {
            applier.delete(template).await?;
        }
    }
    let listed: Vec<&str> = topology
        .workers
        .iter()
        .flat_map(|w| w.machine_pools.iter().flatten())
        .map(|mp| mp.name.as_str())
        .collect();
    for (name, now) in &current.pools {
        if !listed.contains(&name.as_str()) {
            // The pool's controller deletes its bootstrap config and infrastructure.
            let mut object = now.object.clone();
            object["apiVersion"] = json!("cluster.x-k8s.io/v1beta2");
            object["kind"] = json!("MachinePool");
            applier.delete(&object).await?;
        }
    }
    // Health checks that are no longer wanted.
    for check in health_checks {
        if !wanted_checks.contains(&check["metadata"]["name"]) {
            applier.delete(check).await?;
        }
    }
    Ok(())
}

/// Deletes a MachineDeployment's earlier template copies (left by rotations) once neither it
/// nor any of its MachineSets refers to them, as upstream's MachineDeployment and MachineSet
/// topology finalizers do.
async fn collect_unused_templates(
    applier: &mut Applier<'_>,
    md: &Value,
    topology_name: &str,
) -> Result<()> {
    let namespace = md["metadata"]["namespace"].as_str().unwrap_or_default();
    let md_name = md["metadata"]["name"].as_str().unwrap_or_default();
    let cluster = md["spec"]["clusterName"].as_str().unwrap_or_default();
    let sets: Api<api::MachineSet> = Api::namespaced(applier.ctx.client.clone(), namespace);
    let sets = sets
        .list(&ListParams::default().labels(&format!("{}={md_name}", api::DEPLOYMENT_NAME_LABEL)))
        .await?;
    let spec = &md["spec"]["template"]["spec"];
    let mut in_use: Vec<String> = [
        &spec["bootstrap"]["configRef"]["name"],
        &spec["infrastructureRef"]["name"],
    ]
    .iter()
    .filter_map(|v| v.as_str().map(str::to_string))
    .collect();
    for set in &sets.items {
        in_use.extend(
            set.spec
                .template
                .spec
                .bootstrap
                .config_ref
                .as_ref()
                .map(|r| r.name.clone()),
        );
        in_use.push(set.spec.template.spec.infrastructure_ref.name.clone());
    }
    let selector = format!(
        "{}={cluster},{TOPOLOGY_DEPLOYMENT_NAME_LABEL}={topology_name},{TOPOLOGY_OWNED_LABEL}",
        api::CLUSTER_NAME_LABEL
    );
    for reference in [&spec["bootstrap"]["configRef"], &spec["infrastructureRef"]] {
        let (Some(group), Some(kind)) =
            (reference["apiGroup"].as_str(), reference["kind"].as_str())
        else {
            continue;
        };
        let resource = applier.ctx.external.resource(group, kind).await?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(applier.ctx.client.clone(), namespace, &resource);
        for template in api
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
        {
            if !in_use.contains(&template.name_any()) {
                let mut value = serde_json::to_value(&template).expect("objects serialize");
                value["apiVersion"] = json!(resource.api_version);
                value["kind"] = json!(resource.kind);
                applier.delete(&value).await?;
            }
        }
    }
    Ok(())
}

/// A dry run of the topology controller for one Cluster as it is stored (or as a dry-run
/// apply of the user's file left it): every object it would create, change or delete, computed
/// by the same code and checked by the API server (defaulting, validation, webhooks and
/// server-side apply) without being written.
pub async fn plan(
    ctx: &Context,
    cluster: &Cluster,
) -> Result<std::result::Result<Reconciled, String>> {
    if cluster.spec.topology.is_none() {
        return Ok(Err(format!(
            "Cluster {} has no spec.topology",
            cluster.name_any()
        )));
    }
    let class = match class_of(ctx, cluster).await? {
        Ok(c) => c,
        Err(condition) => return Ok(Err(condition.message)),
    };
    topology_objects(cluster, ctx, &class, Mode::DryRun).await
}
