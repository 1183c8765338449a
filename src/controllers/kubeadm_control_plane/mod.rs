//! The KubeadmControlPlane controller: the cluster certificates and admin kubeconfig, and
//! control-plane Machines created, scaled, upgraded and removed one at a time, moving etcd
//! leadership off a machine and removing its etcd member before it goes.
//!
//! `mod.rs` gathers what a reconcile needs and runs the phases, as upstream's KCP controller is
//! split: [`certificates`], [`upgrade`] (what makes a Machine out of date), [`scale`],
//! [`remediation`] and [`members`] (a leaving etcd member released); [`health`] judges each Machine's
//! static Pods and etcd member and what holds scaling; [`status`] computes the status from what
//! was gathered; [`deletion`] waits for the workers, then removes the control-plane Machines.

mod addons;
mod certificates;
mod deletion;
mod health;
mod members;
mod remediation;
mod scale;
mod status;
mod upgrade;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::machines::node_name;
use crate::reconcile::common;
use crate::reconcile::common::machine_condition_true as is_true;
use crate::reconcile::events::Severity;
use futures::future::BoxFuture;

use crate::api;
use crate::api::common::{ConditionGate, ContractVersionedObjectReference};
use crate::api::kubeadm_control_plane::LastRemediationStatus;
use crate::api::machine::{Bootstrap, MachineSpec};
use crate::api::{Cluster, KubeadmConfig, KubeadmControlPlane, Machine};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::runtime::{Wiring, controllers_of};
use crate::reconcile::{Context, Result, StepContext};
use crate::workload::clusters::NodeLookup;
use crate::workload::etcd::{self, EtcdError};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use certificates::{ensure_certificates, record_certificate_expiries};
use health::{Health, WorkloadSeen};
use members::{read_etcd, release_members};
use remediation::remediate;
use scale::{remove_machine, scale};
pub use status::EtcdSeen;
use status::{Facts, Progress, Remediation};
use upgrade::mark_machines;

/// What one reconcile knows of a KubeadmControlPlane's world, gathered once.
struct Scope {
    api: Api<KubeadmControlPlane>,
    machines_api: Api<Machine>,
    /// From the cluster-name label the Cluster controller puts on its control plane.
    cluster_name: Option<String>,
    cluster: Option<Cluster>,
    /// The control plane's Machines, by the control-plane-name label.
    machines: Vec<Machine>,
}

impl Scope {
    async fn gather(kcp: &KubeadmControlPlane, ctx: &Context) -> Result<Scope> {
        let ns = kcp.namespace().unwrap_or_default();
        let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        let cluster_name = kcp.labels().get(api::CLUSTER_NAME_LABEL).cloned();
        let cluster = match &cluster_name {
            Some(name) => {
                Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
                    .get_opt(name)
                    .await?
            }
            None => None,
        };
        let machines: Vec<Machine> = machines_api
            .list(&ListParams::default().labels(&format!(
                "{}={}",
                api::CONTROL_PLANE_NAME_LABEL,
                kcp.name_any()
            )))
            .await?
            .items;
        Ok(Scope {
            api: Api::namespaced(ctx.client.clone(), &ns),
            machines_api,
            cluster_name,
            cluster,
            machines,
        })
    }

    /// The Machines not being deleted.
    fn live(&self) -> Vec<&Machine> {
        self.machines
            .iter()
            .filter(|m| !common::deleting(*m))
            .collect()
    }
}

/// Whether the Cluster is far enough along for control-plane Machines: its infrastructure
/// is provisioned and its control plane endpoint known.
fn cluster_ready(cluster: &Cluster) -> bool {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.infrastructure_provisioned)
        == Some(true)
        && cluster
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_some_and(|e| e.is_valid())
}

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "kubeadmcontrolplane";

/// The KubeadmControlPlane controller: KubeadmControlPlanes, woken by changes of their Machines.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w
        .controller::<KubeadmControlPlane>("kubeadmcontrolplane")
        .reconcile_on(controllers_of(w.ctx.machines().changes()))
        .reconcile_on(control_planes_of_health_changes(&w.ctx));
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

/// The KubeadmControlPlanes whose workload cluster became reachable or unreachable (upstream's
/// KCP watches the ClusterCache's probe failures alike).
fn control_planes_of_health_changes(
    ctx: &Context,
) -> impl futures::Stream<Item = ObjectRef<KubeadmControlPlane>> + Send + 'static {
    let clusters = ctx.clusters().store();
    ctx.workloads.health_changes().filter_map(move |change| {
        let control_plane = clusters
            .get(&ObjectRef::new(&change.cluster).within(&change.namespace))
            .and_then(|c| c.spec.control_plane_ref.clone())
            .filter(|r| r.kind == KubeadmControlPlane::kind(&()))
            .map(|r| ObjectRef::new(&r.name).within(&change.namespace));
        std::future::ready(control_plane)
    })
}

pub async fn reconcile(kcp: Arc<KubeadmControlPlane>, ctx: Arc<Context>) -> Result<Action> {
    let scope = Scope::gather(&kcp, &ctx)
        .await
        .step("reading the Cluster and the control-plane Machines")?;
    // Guards; a paused control plane is not even deleted (see the Cluster controller).
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        scope.cluster.as_ref(),
        "KubeadmControlPlane",
        kcp.annotations(),
    );
    if is_paused {
        return common::record_paused(&scope.api, &kcp, paused).await;
    }
    if common::deleting(kcp.as_ref()) {
        return deletion::reconcile_delete(
            &ctx,
            &kcp,
            &scope.api,
            scope.cluster_name.as_deref(),
            &scope.machines,
        )
        .await
        .step("deleting the control plane");
    }
    let Some(cluster) = &scope.cluster else {
        // The Cluster controller labels the control plane once the Cluster refers to it.
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if common::ensure_finalizer(
        &scope.api,
        kcp.as_ref(),
        api::KUBEADM_CONTROL_PLANE_FINALIZER,
    )
    .await?
    {
        return Ok(Action::await_change());
    }
    // The certificates come before the infrastructure is waited for (upstream makes them after):
    // an infrastructure provider that serves the API server itself, as the in-memory one does,
    // waits for the CA, made with this control plane's encryptionAlgorithm. The admin
    // kubeconfig follows once the endpoint is known.
    match ensure_certificates(&ctx, &kcp, cluster).await {
        Ok(()) => {}
        // A CA the user brought that cannot sign: said on the control plane, looked at again.
        Err(crate::reconcile::Error::Certs(
            e @ crate::kubeadm::certs::CertsError::UnusableCa { .. },
        )) => {
            let status =
                status::compute(&kcp, paused, Progress::CertificatesUnusable(e.to_string()));
            common::write_status(&scope.api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e).step("writing the cluster certificates and admin kubeconfig"),
    }
    if !cluster_ready(cluster) {
        let status = status::compute(&kcp, paused, Progress::WaitingForCluster);
        common::write_status(&scope.api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }

    // Phases.
    ctx.external
        .adopt_template(
            &kcp.namespace().unwrap_or_default(),
            &kcp.spec.machine_template.spec.infrastructure_ref,
            cluster,
        )
        .await
        .step("making the Cluster an owner of the machine template")?;
    release_members(&ctx, &kcp, cluster, &scope.machines)
        .await
        .step("removing the etcd members of deleted Machines")?;
    let initialized = initialized(&ctx, &kcp, cluster).await;
    let etcd = if initialized {
        read_etcd(&ctx, cluster).await
    } else {
        Err(EtcdError::Unreachable(
            "the control plane is not initialized yet".into(),
        ))
    };
    let workload = read_workload(&ctx, cluster, &scope.machines, initialized).await;
    let health = health::assess(&scope.machines, &workload, &etcd);
    record_certificate_expiries(&ctx, cluster, &scope.machines)
        .await
        .step("recording when the control plane's certificates expire")?;
    let outdated = mark_machines(&ctx, &kcp, &scope, &health)
        .await
        .step("recording the Machines' health and whether they are up to date")?;
    let live = scope.live();
    let any_deleting = scope.machines.iter().any(common::deleting);
    let settling = any_deleting || live.iter().any(|m| !is_true(m, conditions::types::READY));
    // Remediation first, one Machine at a time: nothing else moves while it runs.
    let remediation = if any_deleting {
        None
    } else {
        let last = kcp
            .status
            .as_ref()
            .and_then(|s| s.last_remediation.as_ref());
        remediate(&ctx, &kcp, cluster, &live, last)
            .await
            .step("remediating an unhealthy Machine")?
    };
    let desired = kcp.spec.replicas.unwrap_or(1).max(0) as usize;
    let rolling = !outdated.is_empty();
    let stable = !rolling && !settling && live.len() == desired;
    if initialized
        && (rolling || stable)
        && let Ok(Some(workload)) = ctx
            .workloads
            .client(
                &cluster.namespace().unwrap_or_default(),
                &cluster.name_any(),
            )
            .await
    {
        if rolling {
            // Before a Machine of the new version joins: kubeadm join reads it.
            addons::sync_kubeadm_config(&workload, &kcp)
                .await
                .step("updating kube-system/kubeadm-config in the workload cluster")?;
        } else {
            addons::sync_addons(&workload, &kcp)
                .await
                .step("updating kube-proxy and CoreDNS in the workload cluster")?;
        }
    }
    // Upstream's preflight checks: no step while a Machine goes or any is unhealthy (a
    // joining etcd member is promoted before the next one joins or another one leaves).
    let blocked = health::preflight(&scope.machines, &health, None);
    if remediation.is_none() && blocked.is_empty() && (!settling || live.is_empty()) {
        scale(&ctx, &kcp, cluster, &live, &outdated)
            .await
            .step("scaling and rolling out the Machines")?;
    }

    // Status, computed once from what this reconcile gathered.
    let cluster_name = cluster.name_any();
    let status = status::compute(
        &kcp,
        paused,
        Progress::Reconciled(Box::new(Facts {
            cluster_name: &cluster_name,
            machines: &scope.machines,
            outdated: &outdated,
            initialized,
            health: &health,
            blocked: &blocked,
            remediation,
        })),
    );
    common::write_status(&scope.api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
    // Stable and healthy, the workload cluster's etcd and Pods are looked at again at the sync
    // period, as upstream does (its Machines' Nodes and its reachability wake it sooner);
    // while something is unhealthy, often.
    Ok(Action::requeue(if stable && blocked.is_empty() {
        common::spread(kcp.as_ref(), common::RESYNC)
    } else if stable {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(1)
    }))
}

/// Lets a deleting control-plane Machine go on to its infrastructure's deletion.
pub(super) async fn drop_cleanup_hook(api: &Api<Machine>, machine: &Machine) -> Result<()> {
    let hook = api::kubeadm_control_plane::KCP_CLEANUP_HOOK;
    if machine.annotations().contains_key(hook) {
        common::patch_merge(
            api,
            &machine.name_any(),
            serde_json::json!({"metadata": {"annotations": {hook: null}}}),
        )
        .await?;
    }
    Ok(())
}

/// Whether the control plane is initialized: recorded once `kube-system/kubeadm-config`
/// exists in the workload cluster (kubeadm init uploads it last), as upstream decides.
async fn initialized(ctx: &Context, kcp: &KubeadmControlPlane, cluster: &Cluster) -> bool {
    let recorded = kcp
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    if recorded {
        return true;
    }
    let ns = cluster.namespace().unwrap_or_default();
    let Ok(Some(client)) = ctx.workloads.client(&ns, &cluster.name_any()).await else {
        return false;
    };
    Api::<ConfigMap>::namespaced(client, "kube-system")
        .get_opt("kubeadm-config")
        .await
        .is_ok_and(|c| c.is_some())
}

/// The control-plane Machines' Nodes (from the Node cache) and kube-system's control-plane
/// Pods, from the workload cluster.
async fn read_workload(
    ctx: &Context,
    cluster: &Cluster,
    machines: &[Machine],
    initialized: bool,
) -> WorkloadSeen {
    if !initialized {
        return WorkloadSeen::NotInitialized;
    }
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let client = match ctx.workloads.client(&ns, &name).await {
        Ok(Some(client)) => client,
        Ok(None) => {
            return WorkloadSeen::Unreachable(format!(
                "the Secret {} does not exist",
                crate::kubeadm::certs::kubeconfig_secret_name(&name)
            ));
        }
        Err(e) => return WorkloadSeen::Unreachable(e.to_string()),
    };
    let pods = match Api::<Pod>::namespaced(client, "kube-system")
        .list(&ListParams::default().labels("tier=control-plane"))
        .await
    {
        Ok(list) => list.items,
        Err(e) => return WorkloadSeen::Unreachable(e.to_string()),
    };
    let mut nodes = BTreeMap::new();
    for node in machines.iter().filter_map(node_name) {
        let found = match ctx.workloads.node(&ns, &name, node).await {
            Ok(NodeLookup::Found(n)) => Some(n),
            Ok(NodeLookup::Absent) => None,
            Ok(NodeLookup::NoKubeconfig) => {
                return WorkloadSeen::Unreachable("the kubeconfig Secret is gone".into());
            }
            Err(e) => return WorkloadSeen::Unreachable(e.to_string()),
        };
        nodes.insert(node.to_string(), found);
    }
    WorkloadSeen::Read { nodes, pods }
}

#[cfg(test)]
mod tests {
    use super::remediation::quorum_refusal;
    use super::scale::pick_for_removal;
    use super::upgrade::outdated_reasons;
    use super::*;
    use serde_json::json;

    fn machine(name: &str, created: i64, domain: Option<&str>, version: &str) -> Machine {
        let t = k8s_openapi::jiff::Timestamp::from_second(created).unwrap();
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": t.to_string()},
            "spec": {"clusterName": "c", "version": version, "failureDomain": domain, "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}}
        }))
        .unwrap()
    }

    fn kcp(version: &str) -> KubeadmControlPlane {
        serde_json::from_value(json!({
            "metadata": {"name": "cp"},
            "spec": {"version": version, "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "g", "kind": "InMemoryMachineTemplate", "name": "t2"}}}}
        }))
        .unwrap()
    }

    #[test]
    fn outdated_machines_say_why() {
        let m = machine("a", 100, None, "v1.28.13");
        assert!(outdated_reasons(&kcp("v1.28.13"), &m, Some("t2")).is_empty());
        assert_eq!(
            outdated_reasons(&kcp("v1.29.10"), &m, Some("t1")),
            [
                "* Version v1.29.10 required",
                "* InMemoryMachine is not up-to-date"
            ]
        );
    }

    #[test]
    fn remediation_keeps_etcd_quorum() {
        // (members, healthy others) → allowed
        let table = [
            (3, 2, true),
            (3, 1, false),
            (5, 3, true),
            (5, 2, false),
            (1, 0, false),
            (2, 1, true),
        ];
        for (members, healthy, allowed) in table {
            assert_eq!(
                quorum_refusal(members, healthy).is_none(),
                allowed,
                "{members} members, {healthy} healthy others"
            );
        }
        assert!(
            quorum_refusal(1, 0)
                .unwrap()
                .contains("scale the control plane up first")
        );
        assert!(
            quorum_refusal(3, 1)
                .unwrap()
                .contains("below its quorum of 2")
        );
    }

    #[test]
    fn scale_down_takes_the_oldest_of_the_busiest_failure_domain() {
        let (a, b, c) = (
            machine("a", 100, Some("fd1"), "v1"),
            machine("b", 50, Some("fd2"), "v1"),
            machine("c", 200, Some("fd1"), "v1"),
        );
        let all = [&a, &b, &c];
        assert_eq!(
            pick_for_removal(&all, &BTreeSet::new()).unwrap().name_any(),
            "a"
        );
        let prefer = BTreeSet::from(["b".to_string()]);
        assert_eq!(
            pick_for_removal(&all, &prefer).unwrap().name_any(),
            "b",
            "outdated Machines go first"
        );
    }

    #[test]
    fn scale_down_honours_the_delete_machine_annotation() {
        let mark = |mut m: Machine| {
            m.metadata.annotations = Some(BTreeMap::from([(
                api::DELETE_MACHINE_ANNOTATION.to_string(),
                "yes".to_string(),
            )]));
            m
        };
        let (a, b, c) = (
            machine("a", 100, Some("fd1"), "v1"),
            mark(machine("b", 50, Some("fd2"), "v1")),
            mark(machine("c", 200, Some("fd1"), "v1")),
        );
        let all = [&a, &b, &c];
        let none = BTreeSet::new();
        let outdated =
            |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
        // (case, outdated Machines, the one that goes)
        let cases = [
            (
                "marked ones go before the others, the oldest first",
                none.clone(),
                "b",
            ),
            (
                "a marked outdated one before a marked up-to-date one",
                outdated(&["c"]),
                "c",
            ),
            (
                "a marked one before an outdated unmarked one",
                outdated(&["a"]),
                "b",
            ),
        ];
        for (case, outdated, want) in cases {
            assert_eq!(
                pick_for_removal(&all, &outdated).unwrap().name_any(),
                want,
                "{case}"
            );
        }
    }
}
