//! The reconciler of a MachinePool's infrastructure, for DevMachinePools (both back ends) and
//! DockerMachinePools: a pool's instances are infrastructure machines (DevMachines with the
//! pool's back end, DockerMachines from its template), each provisioned by its own provider's
//! machine reconciler once the MachinePool made their Machines, kept at the MachinePool's
//! replicas. Outdated instances (another version or back end) are replaced: new ones first,
//! old ones deleted once enough are ready, as upstream's Docker pool back end does. Instances
//! go by deleting their Machines, so their Nodes are drained and deleted first.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api;
use crate::api::dev::{DevMachinePoolInstanceStatus, DevMachinePoolStatus, DevMachineSpec};
use crate::api::docker::{
    DockerMachineBackend, DockerMachineSpec, DockerMachineStatus, ProvisionedStatus,
};
use crate::api::{
    DevMachine, DevMachinePool, DockerMachine, DockerMachinePool, Machine, MachinePool,
};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::Result;
use crate::reconcile::common::{self, WithConditions};
use crate::reconcile::runtime::{Watched, Wiring};

/// The condition a pool reports for its instances.
const REPLICAS_READY: &str = "ReplicasReady";

/// Which back end's pools a provider reconciles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Docker,
    InMemory,
}

/// A MachinePool's infrastructure whose instances this reconciler keeps.
pub trait InfrastructurePool:
    WithConditions<Status = DevMachinePoolStatus>
    + Watched
    + serde::Serialize
    + Resource<Scope = kube::core::NamespaceResourceScope>
{
    /// Its instances' kind.
    type Instance: PoolInstance;
    /// Whether the provider of this back end keeps it.
    fn kept_by(&self, backend: Backend) -> bool;
    /// Whether `instance` is made as the pool makes instances now.
    fn made_as_now(&self, instance: &Self::Instance) -> bool;
    /// A new instance, its metadata given.
    fn new_instance(&self, metadata: ObjectMeta) -> Self::Instance;
    fn provider_id(&self) -> Option<&str>;
    fn provider_id_list(&self) -> Option<&Vec<String>>;
}

/// An instance: an infrastructure machine, whose status says whether it is provisioned.
pub trait PoolInstance:
    WithConditions<Status = DockerMachineStatus>
    + Watched
    + serde::Serialize
    + Resource<Scope = kube::core::NamespaceResourceScope>
{
    fn provider_id(&self) -> Option<&str>;
}

impl InfrastructurePool for DevMachinePool {
    type Instance = DevMachine;
    fn kept_by(&self, backend: Backend) -> bool {
        match backend {
            Backend::Docker => self.spec.backend.docker.is_some(),
            Backend::InMemory => self.spec.backend.in_memory.is_some(),
        }
    }
    fn made_as_now(&self, instance: &DevMachine) -> bool {
        instance.spec.backend == self.spec.backend
    }
    fn new_instance(&self, metadata: ObjectMeta) -> DevMachine {
        DevMachine {
            metadata,
            spec: DevMachineSpec {
                provider_id: None,
                backend: self.spec.backend.clone(),
            },
            status: None,
        }
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    fn provider_id_list(&self) -> Option<&Vec<String>> {
        self.spec.provider_id_list.as_ref()
    }
}

impl InfrastructurePool for DockerMachinePool {
    type Instance = DockerMachine;
    fn kept_by(&self, backend: Backend) -> bool {
        backend == Backend::Docker
    }
    fn made_as_now(&self, instance: &DockerMachine) -> bool {
        instance.spec.docker.node == self.spec.template
    }
    fn new_instance(&self, metadata: ObjectMeta) -> DockerMachine {
        DockerMachine {
            metadata,
            spec: DockerMachineSpec {
                provider_id: None,
                docker: DockerMachineBackend {
                    node: self.spec.template.clone(),
                    bootstrap_timeout: None,
                },
            },
            status: None,
        }
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    fn provider_id_list(&self) -> Option<&Vec<String>> {
        self.spec.provider_id_list.as_ref()
    }
}

impl PoolInstance for DevMachine {
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
}

impl PoolInstance for DockerMachine {
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
}

struct Pools {
    client: Client,
    backend: Backend,
}

/// The controller of one kind of pool for one back end, woken by the pool's instances and by
/// its MachinePool (replicas, version, bootstrap data).
pub fn controller<P: InfrastructurePool>(
    w: &Wiring,
    name: &'static str,
    backend: Backend,
) -> BoxFuture<'static, ()> {
    let kind = P::kind(&()).to_string();
    let of_instance = kind.clone();
    let controller = w
        .controller::<P>(name)
        .watches(
            Api::<P::Instance>::all(w.client.clone()),
            watcher::Config::default(),
            move |m: P::Instance| {
                let ns = m.namespace().unwrap_or_default();
                m.owner_references()
                    .iter()
                    .find(|r| r.kind == of_instance)
                    .map(|r| ObjectRef::new(&r.name).within(&ns))
            },
        )
        .watches(
            Api::<MachinePool>::all(w.client.clone()),
            watcher::Config::default(),
            move |p: MachinePool| {
                let r = &p.spec.template.spec.infrastructure_ref;
                (r.kind == kind)
                    .then(|| ObjectRef::new(&r.name).within(&p.namespace().unwrap_or_default()))
            },
        );
    let ctx = Arc::new(Pools {
        client: w.client.clone(),
        backend,
    });
    w.run_with(name, controller, reconcile::<P>, ctx)
}

/// One instance as the pool sees it: its infrastructure machine and the Machine made for it.
struct Instance<'a, I> {
    infra: &'a I,
    machine: Option<&'a Machine>,
}

impl<I: PoolInstance> Instance<'_, I> {
    fn ready(&self) -> bool {
        self.infra
            .status()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            == Some(true)
    }

    /// Made for another version or back end than the pool's now.
    fn outdated<P: InfrastructurePool<Instance = I>>(
        &self,
        pool: &P,
        version: Option<&str>,
    ) -> bool {
        !pool.made_as_now(self.infra)
            || self
                .machine
                .is_some_and(|m| m.spec.version.as_deref() != version)
    }

    fn marked_for_deletion(&self) -> bool {
        self.machine
            .is_some_and(|m| m.annotations().contains_key(api::DELETE_MACHINE_ANNOTATION))
    }
}

/// What to do with a pool's instances now.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// New instances to make.
    create: usize,
    /// Instances to delete (by their Machines), named.
    delete: Vec<String>,
}

/// The pool's plan towards `desired` up-to-date instances: as many new ones as up-to-date
/// ones are missing; then, once more are ready than wanted, the outdated ones first, then
/// those whose Machine carries `cluster.x-k8s.io/delete-machine`, then the newest. Nothing is
/// deleted while that would leave fewer ready instances than wanted.
fn plan<P: InfrastructurePool>(
    pool: &P,
    version: Option<&str>,
    desired: usize,
    instances: &[Instance<'_, P::Instance>],
) -> Plan {
    let live: Vec<&Instance<P::Instance>> = instances
        .iter()
        .filter(|i| !common::deleting(i.infra) && !i.machine.is_some_and(common::deleting))
        .collect();
    let current = live.iter().filter(|i| !i.outdated(pool, version)).count();
    let create = desired.saturating_sub(current);
    let ready = live.iter().filter(|i| i.ready()).count();
    let mut excess = ready.saturating_sub(desired);
    let mut ranked: Vec<&&Instance<P::Instance>> = live.iter().collect();
    // Outdated first, then marked, then the newest.
    ranked.sort_by_key(|i| {
        (
            !i.outdated(pool, version),
            !i.marked_for_deletion(),
            std::cmp::Reverse(i.infra.creation_timestamp()),
            i.infra.name_any(),
        )
    });
    let mut delete = Vec::new();
    for instance in ranked {
        if excess == 0 {
            break;
        }
        // An instance not yet ready is kept: it may be the one becoming ready next. Only a
        // ready one goes, or an outdated one that is not ready (it never will be what is
        // wanted).
        if instance.ready() || instance.outdated(pool, version) {
            delete.push(instance.infra.name_any());
            if instance.ready() {
                excess -= 1;
            }
        }
    }
    Plan { create, delete }
}

async fn reconcile<P: InfrastructurePool>(pool: Arc<P>, ctx: Arc<Pools>) -> Result<Action> {
    if !pool.kept_by(ctx.backend) {
        return Ok(Action::await_change());
    }
    let ns = pool.namespace().unwrap_or_default();
    let api: Api<P> = Api::namespaced(ctx.client.clone(), &ns);
    let infra_api: Api<P::Instance> = Api::namespaced(ctx.client.clone(), &ns);
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = pool.uid().unwrap_or_default();
    // Its instances carry their MachinePool's name; a pool that never had one has none.
    let Some(owner) = pool
        .owner_references()
        .iter()
        .find(|r| r.kind == "MachinePool")
        .cloned()
    else {
        if common::deleting(pool.as_ref()) {
            common::remove_finalizer(&api, pool.as_ref(), api::DEV_MACHINE_POOL_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    let selector = format!("{}={}", api::MACHINE_POOL_NAME_LABEL, owner.name);
    let infra_machines: Vec<P::Instance> = infra_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|m| common::has_owner(m.owner_references(), &uid))
        .collect();
    // The MachinePool's Machines carry the same label: one list, not a read per instance.
    let machines: BTreeMap<String, Machine> = machines_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .map(|m| (m.name_any(), m))
        .collect();
    let instances: Vec<Instance<P::Instance>> = infra_machines
        .iter()
        .map(|m| Instance {
            infra: m,
            machine: m
                .owner_references()
                .iter()
                .find(|r| r.kind == "Machine")
                .and_then(|r| machines.get(&r.name)),
        })
        .collect();

    if common::deleting(pool.as_ref()) {
        // Each instance goes with its Machine; one the MachinePool never made a Machine for
        // goes directly.
        for instance in instances.iter().filter(|i| !common::deleting(i.infra)) {
            match instance.machine {
                Some(m) if !common::deleting(m) => {
                    machines_api
                        .delete(&m.name_any(), &DeleteParams::background())
                        .await?;
                }
                Some(_) => {}
                None => {
                    infra_api
                        .delete(&instance.infra.name_any(), &DeleteParams::background())
                        .await?;
                }
            }
        }
        if infra_machines.is_empty() {
            common::remove_finalizer(&api, pool.as_ref(), api::DEV_MACHINE_POOL_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        return Ok(Action::requeue(Duration::from_secs(1)));
    }

    let Some(machine_pool) = Api::<MachinePool>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&owner.name)
        .await?
    else {
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    let cluster = common::labelled_cluster(&ctx.client, pool.as_ref()).await?;
    let (is_paused, paused) = common::paused_condition(common::paused_by_user(
        cluster.as_ref(),
        &P::kind(&()),
        pool.annotations(),
    ));
    if is_paused {
        return common::record_paused(&api, &pool, paused).await;
    }
    if common::ensure_finalizer(&api, pool.as_ref(), api::DEV_MACHINE_POOL_FINALIZER).await? {
        return Ok(Action::await_change());
    }

    // Phases: instances made and retired, once the bootstrap data is there.
    let template = &machine_pool.spec.template.spec;
    let desired = machine_pool.spec.replicas.unwrap_or(1).max(0) as usize;
    let has_data = template.bootstrap.data_secret_name.is_some();
    let plan = plan(
        pool.as_ref(),
        template.version.as_deref(),
        desired,
        &instances,
    );
    if has_data {
        for _ in 0..plan.create {
            create_instance(&infra_api, pool.as_ref(), &machine_pool).await?;
        }
        // An instance whose Machine the MachinePool has not made yet waits for it, so it is
        // not deleted just as its Machine comes (upstream waits alike).
        let doomed = instances
            .iter()
            .filter(|i| plan.delete.contains(&i.infra.name_any()))
            .filter_map(|i| i.machine);
        for machine in doomed {
            machines_api
                .delete(&machine.name_any(), &DeleteParams::background())
                .await?;
        }
    }
    let mut provider_ids: Vec<String> = infra_machines
        .iter()
        .filter_map(|m| m.provider_id().map(String::from))
        .collect();
    provider_ids.sort();
    let pool_id = format!(
        "dev:////{}-dmp-{}",
        machine_pool.spec.cluster_name,
        pool.name_any()
    );
    if pool.provider_id_list() != Some(&provider_ids)
        || pool.provider_id() != Some(pool_id.as_str())
    {
        common::patch_merge(
            &api,
            &pool.name_any(),
            json!({"spec": {"providerIDList": provider_ids, "providerID": pool_id}}),
        )
        .await?;
        return Ok(Action::await_change());
    }

    // Status.
    let status = pool_status(pool.as_ref(), &instances, desired, has_data, paused);
    let settled = plan == Plan::default() && status.ready == Some(true);
    common::write_status(&api, &pool.name_any(), pool.status(), &status).await?;
    Ok(Action::requeue(if settled {
        common::spread(pool.as_ref(), common::RESYNC)
    } else {
        Duration::from_secs(2)
    }))
}

/// Makes one instance as the pool makes them, labelled with the MachinePool and its Cluster and
/// owned by the pool until the MachinePool's Machine takes it over.
async fn create_instance<P: InfrastructurePool>(
    api: &Api<P::Instance>,
    pool: &P,
    machine_pool: &MachinePool,
) -> Result<()> {
    let name = crate::apiserver::object::generate_name(&format!("{}-", pool.name_any()));
    let instance = pool.new_instance(ObjectMeta {
        name: Some(name),
        namespace: pool.namespace(),
        labels: Some(BTreeMap::from([
            (
                api::CLUSTER_NAME_LABEL.to_string(),
                machine_pool.spec.cluster_name.clone(),
            ),
            (
                api::MACHINE_POOL_NAME_LABEL.to_string(),
                machine_pool.name_any(),
            ),
        ])),
        owner_references: Some(vec![common::owner_reference(pool, false)]),
        ..Default::default()
    });
    api.create(&PostParams::default(), &instance).await?;
    Ok(())
}

/// The pool's status: its instances, replicas, readiness once every wanted instance has its
/// provider ID (kept once reached, as upstream's), and the instances' kind for the
/// MachinePool to make Machines of.
fn pool_status<P: InfrastructurePool>(
    pool: &P,
    instances: &[Instance<'_, P::Instance>],
    desired: usize,
    has_data: bool,
    paused: NewCondition,
) -> DevMachinePoolStatus {
    let mut status = pool.status().cloned().unwrap_or_default();
    let with_id = instances
        .iter()
        .filter(|i| i.infra.provider_id().is_some())
        .count();
    let all_there = with_id == desired && instances.len() == desired;
    let ready = status.ready == Some(true) || all_there;
    status.ready = Some(ready);
    status.initialization = Some(ProvisionedStatus {
        provisioned: Some(ready),
    });
    status.replicas = Some(instances.len() as i32);
    status.infrastructure_machine_kind = Some(P::Instance::kind(&()).to_string());
    status.observed_generation = pool.meta().generation;
    let mut listed: Vec<DevMachinePoolInstanceStatus> = instances
        .iter()
        .map(|i| DevMachinePoolInstanceStatus {
            addresses: i.infra.status().and_then(|s| s.addresses.clone()),
            instance_name: Some(i.infra.name_any()),
            provider_id: i.infra.provider_id().map(String::from),
            version: i.machine.and_then(|m| m.spec.version.clone()),
            ready: Some(i.ready()),
        })
        .collect();
    listed.sort_by(|a, b| a.instance_name.cmp(&b.instance_name));
    status.instances = (!listed.is_empty()).then_some(listed);
    let replicas_ready = if all_there && instances.iter().all(|i| i.ready()) {
        NewCondition::new(REPLICAS_READY, Status::True, conditions::reasons::READY)
    } else if !has_data {
        NewCondition::new(
            REPLICAS_READY,
            Status::False,
            conditions::reasons::NOT_READY,
        )
        .message("Waiting for the MachinePool's bootstrap data")
    } else {
        let ready = instances.iter().filter(|i| i.ready()).count();
        NewCondition::new(
            REPLICAS_READY,
            Status::False,
            conditions::reasons::NOT_READY,
        )
        .message(format!("{ready} of {desired} instances are provisioned"))
    };
    let summary = NewCondition {
        type_: conditions::types::READY.into(),
        ..replicas_ready.clone()
    };
    common::set_conditions(
        &mut status.conditions,
        pool.meta().generation,
        vec![paused, replicas_ready, summary],
    );
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(backend: serde_json::Value) -> DevMachinePool {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"backend": backend},
        }))
        .unwrap()
    }

    fn dev_machine(name: &str, backend: serde_json::Value, ready: bool, age: i64) -> DevMachine {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": format!("2026-12-01T00:{age:02}:00Z")},
            "spec": {"backend": backend},
            "status": {"initialization": {"provisioned": ready}},
        }))
        .unwrap()
    }

    fn machine(name: &str, version: &str, marked: bool) -> Machine {
        let annotations = if marked {
            json!({(api::DELETE_MACHINE_ANNOTATION): "yes"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"clusterName": "c", "version": version, "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "DevMachine", "name": name}},
        }))
        .unwrap()
    }

    #[test]
    fn a_docker_pools_instances_are_docker_machines_of_its_template() {
        let pool: DockerMachinePool = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"template": {"customImage": "node:a", "extraMounts": [{"containerPath": "/x", "hostPath": "/y"}]}},
        }))
        .unwrap();
        let instance = pool.new_instance(ObjectMeta::default());
        assert_eq!(
            instance.spec.docker.node.custom_image.as_deref(),
            Some("node:a")
        );
        assert_eq!(
            instance
                .spec
                .docker
                .node
                .extra_mounts
                .as_ref()
                .map(Vec::len),
            Some(1)
        );
        assert!(pool.made_as_now(&instance));
        assert!(pool.kept_by(Backend::Docker) && !pool.kept_by(Backend::InMemory));
        let mut changed = pool.clone();
        changed.spec.template.custom_image = Some("node:b".into());
        assert!(
            !changed.made_as_now(&instance),
            "a new image makes it outdated"
        );
    }

    #[test]
    fn plan_table() {
        let sim = json!({"inMemory": {}});
        let other = json!({"inMemory": {"vm": {"provisioning": {"startupDuration": "1s"}}}});
        let p = pool(sim.clone());
        // (case, desired, instances as (name, backend, ready, minute created, machine version,
        // marked), want to create, want deleted)
        type Row = (
            &'static str,
            serde_json::Value,
            bool,
            i64,
            Option<&'static str>,
            bool,
        );
        type Case = (&'static str, usize, Vec<Row>, usize, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            ("empty pool grows", 2, vec![], 2, vec![]),
            (
                "a new instance without its Machine yet counts as current",
                1,
                vec![("a", sim.clone(), false, 1, None, false)],
                0,
                vec![],
            ),
            (
                "scale down: the newest ready one goes",
                1,
                vec![
                    ("a", sim.clone(), true, 1, Some("v1.33.0"), false),
                    ("b", sim.clone(), true, 2, Some("v1.33.0"), false),
                ],
                0,
                vec!["b"],
            ),
            (
                "scale down: a marked one goes first",
                1,
                vec![
                    ("a", sim.clone(), true, 1, Some("v1.33.0"), true),
                    ("b", sim.clone(), true, 2, Some("v1.33.0"), false),
                ],
                0,
                vec!["a"],
            ),
            (
                "a new version: a replacement first, the old one kept until it is ready",
                1,
                vec![("a", sim.clone(), true, 1, Some("v1.32.0"), false)],
                1,
                vec![],
            ),
            (
                "the replacement is ready: the outdated one goes",
                1,
                vec![
                    ("a", sim.clone(), true, 1, Some("v1.32.0"), false),
                    ("b", sim.clone(), true, 2, Some("v1.33.0"), false),
                ],
                0,
                vec!["a"],
            ),
            (
                "a changed back end is outdated too",
                1,
                vec![
                    ("a", other.clone(), true, 1, Some("v1.33.0"), false),
                    ("b", sim.clone(), false, 2, Some("v1.33.0"), false),
                ],
                0,
                vec![],
            ),
            (
                "none deleted while it would leave too few ready",
                2,
                vec![
                    ("a", sim.clone(), true, 1, Some("v1.32.0"), false),
                    ("b", sim.clone(), true, 2, Some("v1.33.0"), false),
                    ("c", sim.clone(), false, 3, Some("v1.33.0"), false),
                ],
                0,
                vec![],
            ),
        ];
        for (case, desired, rows, create, delete) in cases {
            let dev_machines: Vec<DevMachine> = rows
                .iter()
                .map(|(n, b, r, age, _, _)| dev_machine(n, b.clone(), *r, *age))
                .collect();
            let machines: Vec<Option<Machine>> = rows
                .iter()
                .map(|(n, _, _, _, v, marked)| v.map(|v| machine(n, v, *marked)))
                .collect();
            let instances: Vec<Instance<DevMachine>> = dev_machines
                .iter()
                .zip(&machines)
                .map(|(d, m)| Instance {
                    infra: d,
                    machine: m.as_ref(),
                })
                .collect();
            let got = plan(&p, Some("v1.33.0"), desired, &instances);
            assert_eq!(
                got,
                Plan {
                    create,
                    delete: delete.into_iter().map(String::from).collect()
                },
                "{case}"
            );
        }
    }
}
