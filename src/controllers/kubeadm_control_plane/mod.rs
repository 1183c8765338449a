//! The KubeadmControlPlane controller: the cluster certificates and admin kubeconfig, and
//! control-plane Machines created, scaled, upgraded and removed one at a time, moving etcd
//! leadership off a machine and removing its etcd member before it goes.
//!
//! `mod.rs` gathers, decides and acts; [`health`] judges each Machine's static Pods and etcd
//! member and what holds scaling; [`status`] computes the status from what was gathered;
//! [`deletion`] waits for the workers, then removes the control-plane Machines.

mod addons;
mod deletion;
mod health;
mod status;

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

use super::common;
use super::common::machine_condition_true as is_true;
use super::events::Severity;
use super::machines::node_name;
use futures::future::BoxFuture;

use super::runtime::{Wiring, controllers_of};
use super::{Context, Result, StepContext};
use crate::api;
use crate::api::common::{ConditionGate, ContractVersionedObjectReference};
use crate::api::kubeadm_control_plane::LastRemediationStatus;
use crate::api::machine::{Bootstrap, MachineSpec};
use crate::api::{Cluster, KubeadmConfig, KubeadmControlPlane, Machine};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::workload::clusters::NodeLookup;
use crate::workload::etcd::{self, EtcdError};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use health::{Health, WorkloadSeen};
pub use status::EtcdSeen;
use status::{Facts, Progress, Remediation};

/// Why a control-plane Machine is not what the KubeadmControlPlane asks for; empty when it is.
pub fn outdated_reasons(
    kcp: &KubeadmControlPlane,
    machine: &Machine,
    infra_template: Option<&str>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if machine.spec.version.as_deref() != Some(kcp.spec.version.as_str()) {
        reasons.push(format!("* Version {} required", kcp.spec.version));
    }
    let wanted = &kcp.spec.machine_template.spec.infrastructure_ref.name;
    if infra_template.is_some_and(|t| t != wanted) {
        reasons.push(format!(
            "* {} is not up-to-date",
            kcp.spec
                .machine_template
                .spec
                .infrastructure_ref
                .kind
                .trim_end_matches("Template")
        ));
    }
    if kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.after.as_ref())
        .is_some_and(|after| {
            machine
                .meta()
                .creation_timestamp
                .as_ref()
                .is_some_and(|c| c.0 < after.0)
                && after.0 <= k8s_openapi::jiff::Timestamp::now()
        })
    {
        reasons.push("* KubeadmControlPlane spec.rolloutAfter expired".into());
    }
    if let Some(days) = kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.before.as_ref())
        .and_then(|b| b.certificates_expiry_days)
        && let Some(expiry) = machine
            .status
            .as_ref()
            .and_then(|s| s.certificates_expiry_date.as_ref())
        && expiry.0
            < k8s_openapi::jiff::Timestamp::now()
                + k8s_openapi::jiff::SignedDuration::from_hours(24 * i64::from(days))
    {
        reasons.push(format!(
            "* Certificates expire at {}, within spec.rollout.before.certificatesExpiryDays ({days} days)",
            expiry.0
        ));
    }
    reasons
}

/// Records on each control-plane Machine's KubeadmConfig when its API server's certificate
/// expires, read from the API server itself once it runs (upstream's
/// reconcileCertificateExpiries). An API server that cannot be reached yet is tried again on
/// a later reconcile.
async fn record_certificate_expiries(
    ctx: &Context,
    cluster: &Cluster,
    machines: &[Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    let configs: Api<KubeadmConfig> = Api::namespaced(ctx.client.clone(), &ns);
    for m in machines {
        let known = m
            .annotations()
            .contains_key(api::CERTIFICATES_EXPIRY_ANNOTATION)
            || m.status
                .as_ref()
                .is_some_and(|s| s.certificates_expiry_date.is_some());
        let running = m.status.as_ref().is_some_and(|s| s.node_ref.is_some());
        let Some(config) = m.spec.bootstrap.config_ref.as_ref() else {
            continue;
        };
        if known || !running || common::deleting(m) {
            continue;
        }
        let Some(address) = api_server_address(m, cluster) else {
            continue;
        };
        match crate::workload::certificates::serving_certificate_expiry(&address).await {
            Ok(expiry) => {
                common::patch_merge(
                    &configs,
                    &config.name,
                    serde_json::json!({"metadata": {"annotations": {(api::CERTIFICATES_EXPIRY_ANNOTATION): expiry.to_string()}}}),
                )
                .await?;
            }
            Err(e) => {
                tracing::debug!(machine = %m.name_any(), error = %e, "reading the API server's certificate");
            }
        }
    }
    Ok(())
}

/// Where a control-plane Machine's own API server answers: its InternalIP on kubeadm's port
/// (each Docker node runs one), else the cluster's endpoint (the in-memory provider runs one
/// API server for all of a cluster's Machines, on loopback).
fn api_server_address(machine: &Machine, cluster: &Cluster) -> Option<String> {
    let internal = machine
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| {
            a.iter()
                .find(|a| a.type_ == crate::api::common::MachineAddressType::InternalIp)
        })
        .map(|a| a.address.clone())
        .filter(|ip| {
            ip.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| !ip.is_loopback())
        });
    match internal {
        Some(ip) if ip.contains(':') => Some(format!("[{ip}]:6443")),
        Some(ip) => Some(format!("{ip}:6443")),
        None => {
            let endpoint = cluster.spec.control_plane_endpoint.as_ref()?;
            Some(format!("{}:{}", endpoint.host.as_ref()?, endpoint.port?))
        }
    }
}

/// Which Machine goes when scaling down, as upstream picks it: among the outdated Machines a
/// user marked with `cluster.x-k8s.io/delete-machine`, else any marked one, else the outdated
/// ones (`outdated`, during a rollout), else all; of those, the oldest in the failure domain
/// with the most Machines.
pub fn pick_for_removal<'a>(
    machines: &[&'a Machine],
    outdated: &BTreeSet<String>,
) -> Option<&'a Machine> {
    let marked = |m: &&&Machine| m.annotations().contains_key(api::DELETE_MACHINE_ANNOTATION);
    let is_outdated = |m: &&&Machine| outdated.contains(&m.name_any());
    let choices: [Vec<&&Machine>; 4] = [
        machines
            .iter()
            .filter(|m| marked(m) && is_outdated(m))
            .collect(),
        machines.iter().filter(marked).collect(),
        machines.iter().filter(is_outdated).collect(),
        machines.iter().collect(),
    ];
    let candidates = choices.into_iter().find(|c| !c.is_empty())?;
    let mut per_domain: BTreeMap<Option<String>, usize> = BTreeMap::new();
    for m in &candidates {
        *per_domain.entry(m.spec.failure_domain.clone()).or_default() += 1;
    }
    let busiest = per_domain
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| d.clone())?;
    candidates
        .into_iter()
        .filter(|m| m.spec.failure_domain == busiest)
        .min_by(|a, b| {
            a.meta()
                .creation_timestamp
                .cmp(&b.meta().creation_timestamp)
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .copied()
}

/// Why removing one etcd member now would cost etcd its quorum; None when it is safe. After the
/// removal the cluster has `members - 1` members and needs a majority of them healthy.
pub fn quorum_refusal(members: usize, healthy_others: usize) -> Option<String> {
    let remaining = members.saturating_sub(1);
    let quorum = remaining / 2 + 1;
    (healthy_others < quorum).then(|| {
        if members <= 1 {
            "cannot remediate the only control-plane Machine: etcd would lose its last member; scale the control plane up first".to_string()
        } else {
            format!(
                "cannot remediate: etcd would keep {healthy_others} healthy of {remaining} members, below its quorum of {quorum}; waiting for other control-plane Machines to become healthy"
            )
        }
    })
}

fn owner_remediation_requested(m: &Machine) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == api::OWNER_REMEDIATED))
        .is_some_and(|c| c.status == "False")
}

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
    match ensure_certificates(&ctx, &kcp, cluster).await {
        Ok(()) => {}
        // A CA the user brought that cannot sign: said on the control plane, looked at again.
        Err(super::Error::Certs(e @ crate::kubeadm::certs::CertsError::UnusableCa { .. })) => {
            let status =
                status::compute(&kcp, paused, Progress::CertificatesUnusable(e.to_string()));
            common::write_status(&scope.api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e).step("writing the cluster certificates and admin kubeconfig"),
    }
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

/// Marks each Machine UpToDate or not (version, infrastructure template, rolloutAfter), with
/// its health conditions, in one write; the reasons of those not up to date, by name.
async fn mark_machines(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    scope: &Scope,
    health: &Health,
) -> Result<BTreeMap<String, Vec<String>>> {
    let ns = kcp.namespace().unwrap_or_default();
    let mut outdated = BTreeMap::new();
    for m in &scope.machines {
        let template = ctx
            .external
            .get(&ns, &m.spec.infrastructure_ref)
            .await?
            .and_then(|i| {
                i.annotations()
                    .get(api::CLONED_FROM_NAME_ANNOTATION)
                    .cloned()
            });
        let reasons = outdated_reasons(kcp, m, template.as_deref());
        let mut conditions = vec![super::machines::up_to_date(&reasons)];
        conditions.extend(
            health
                .machines
                .get(&m.name_any())
                .cloned()
                .unwrap_or_default(),
        );
        super::machines::set_machine_conditions(&scope.machines_api, m, conditions).await?;
        if !reasons.is_empty() {
            outdated.insert(m.name_any(), reasons);
        }
    }
    Ok(outdated)
}

/// One step towards `spec.replicas` Machines that are all up to date: create one (scaling up,
/// or surging during a rollout), else remove one (scaling down, or an outdated one).
async fn scale(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
    live: &[&Machine],
    outdated: &BTreeMap<String, Vec<String>>,
) -> Result<()> {
    let desired = kcp.spec.replicas.unwrap_or(1).max(0) as usize;
    let max_surge = match kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.as_ref())
    {
        Some(IntOrString::Int(n)) => *n as usize,
        _ => 1,
    };
    let rolling = !outdated.is_empty();
    let outdated_names: BTreeSet<String> = outdated.keys().cloned().collect();
    if live.len() < desired || (rolling && live.len() < desired + max_surge && max_surge > 0) {
        let name = create_machine(ctx, kcp, cluster).await?;
        let why = if rolling {
            format!("to replace {} outdated", outdated.len())
        } else {
            format!("towards {desired} replicas")
        };
        let note = format!("Created control plane Machine {name:?} {why}");
        ctx.events
            .publish(CONTROLLER, kcp, Severity::Normal, "SuccessfulScaleUp", note);
    } else if (live.len() > desired || rolling)
        && let Some(victim) = pick_for_removal(live, &outdated_names)
    {
        let keep: Vec<&Machine> = live
            .iter()
            .copied()
            .filter(|m| m.name_any() != victim.name_any())
            .collect();
        remove_machine(ctx, cluster, victim, &keep).await?;
        let why = match outdated.get(&victim.name_any()) {
            Some(reasons) => format!("it is outdated: {}", reasons.join("; ")),
            None => format!("scaling down to {desired} replicas"),
        };
        let note = format!(
            "Deleting control plane Machine {:?}: {why}",
            victim.name_any()
        );
        ctx.events.publish(
            CONTROLLER,
            kcp,
            Severity::Normal,
            "SuccessfulScaleDown",
            note,
        );
    }
    Ok(())
}

/// Remediates the control-plane Machine a MachineHealthCheck marked, when etcd can spare it:
/// one at a time, the Machine goes (its etcd member first) and scaling up replaces it.
async fn remediate(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
    machines: &[&Machine],
    last: Option<&LastRemediationStatus>,
) -> Result<Option<Remediation>> {
    let Some(victim) = machines
        .iter()
        .copied()
        .find(|m| owner_remediation_requested(m))
    else {
        return Ok(None);
    };
    let ns = cluster.namespace().unwrap_or_default();
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let others: Vec<&Machine> = machines
        .iter()
        .copied()
        .filter(|m| m.name_any() != victim.name_any())
        .collect();
    let healthy_others = others
        .iter()
        .filter(|m| is_true(m, "Ready") && !owner_remediation_requested(m))
        .count();
    let members = read_etcd(ctx, cluster)
        .await
        .map_or(machines.len(), |(members, _)| members.len());
    if let Some(refusal) = quorum_refusal(members, healthy_others) {
        super::machines::set_machine_conditions(
            &machines_api,
            victim,
            vec![
                NewCondition::new(
                    api::OWNER_REMEDIATED,
                    Status::False,
                    api::kubeadm_control_plane::reasons::REMEDIATION_NOT_ALLOWED,
                )
                .message(refusal.clone()),
            ],
        )
        .await?;
        let note = format!(
            "Machine {:?} needs remediation, but {refusal}",
            victim.name_any()
        );
        ctx.events.publish(
            CONTROLLER,
            kcp,
            Severity::Warning,
            "RemediationRestricted",
            note,
        );
        return Ok(Some(Remediation {
            condition: NewCondition::new(
                conditions::types::REMEDIATING,
                Status::True,
                api::kubeadm_control_plane::reasons::REMEDIATION_NOT_ALLOWED,
            )
            .message(format!(
                "Machine {} needs remediation, but {refusal}",
                victim.name_any()
            )),
            started: None,
        }));
    }
    tracing::info!(machine = %victim.name_any(), "remediating an unhealthy control-plane Machine");
    super::machines::set_machine_conditions(
        &machines_api,
        victim,
        vec![
            NewCondition::new(
                api::OWNER_REMEDIATED,
                Status::False,
                conditions::reasons::MACHINE_DELETION_IN_PROGRESS,
            )
            .message("Machine is being deleted; a new one replaces it"),
        ],
    )
    .await?;
    remove_machine(ctx, cluster, victim, &others).await?;
    let retry_count = last
        .filter(|r| r.machine == victim.name_any())
        .map_or(0, |r| r.retry_count + 1);
    let note = format!(
        "Deleting unhealthy control plane Machine {:?}; a new one replaces it",
        victim.name_any()
    );
    ctx.events
        .publish(CONTROLLER, kcp, Severity::Normal, "Remediating", note);
    Ok(Some(Remediation {
        condition: NewCondition::new(
            conditions::types::REMEDIATING,
            Status::True,
            api::kubeadm_control_plane::reasons::REMEDIATION_IN_PROGRESS,
        )
        .message(format!(
            "Deleting unhealthy Machine {}; a new one replaces it",
            victim.name_any()
        )),
        started: Some(LastRemediationStatus {
            machine: victim.name_any(),
            time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
            retry_count,
        }),
    }))
}

/// The cluster certificates and the admin kubeconfig, owned by the control plane.
async fn ensure_certificates(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
) -> Result<()> {
    super::secrets::cluster_certificates(
        &ctx.client,
        cluster,
        Some(common::owner_reference(kcp, true)),
    )
    .await?;
    super::secrets::reconcile_kubeconfig(&ctx.client, cluster, common::owner_reference(kcp, true))
        .await?;
    Ok(())
}

/// Creates one control-plane Machine with its KubeadmConfig and infrastructure machine.
async fn create_machine(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
) -> Result<String> {
    let ns = kcp.namespace().unwrap_or_default();
    let name = format!(
        "{}-{}",
        &kcp.name_any()[..kcp.name_any().len().min(58)],
        crate::apiserver::object::random_suffix()
    );
    let mut labels = kcp
        .spec
        .machine_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(api::CLUSTER_NAME_LABEL.into(), cluster.name_any());
    labels.insert(api::CONTROL_PLANE_LABEL.into(), String::new());
    labels.insert(api::CONTROL_PLANE_NAME_LABEL.into(), kcp.name_any());
    let owner = common::owner_reference(kcp, true);
    let template = &kcp.spec.machine_template.spec;
    let infrastructure_ref = super::external::clone_template(
        ctx,
        &ns,
        &template.infrastructure_ref,
        &name,
        &labels,
        owner.clone(),
    )
    .await?;
    let config = KubeadmConfig {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        spec: kcp.spec.kubeadm_config_spec.clone().unwrap_or_default(),
        status: None,
    };
    Api::<KubeadmConfig>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &config)
        .await?;
    let machine = Machine {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels),
            annotations: Some({
                let mut annotations = kcp
                    .spec
                    .machine_template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.clone())
                    .unwrap_or_default();
                annotations.insert(
                    api::kubeadm_control_plane::KCP_CLEANUP_HOOK.into(),
                    String::new(),
                );
                annotations
            }),
            owner_references: Some(vec![owner]),
            finalizers: Some(vec![api::MACHINE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: MachineSpec {
            cluster_name: cluster.name_any(),
            version: Some(kcp.spec.version.clone()),
            bootstrap: Bootstrap {
                config_ref: Some(ContractVersionedObjectReference {
                    api_group: "bootstrap.cluster.x-k8s.io".into(),
                    kind: "KubeadmConfig".into(),
                    name: name.clone(),
                }),
                data_secret_name: None,
            },
            infrastructure_ref,
            readiness_gates: Some(readiness_gates(template.readiness_gates.as_deref())),
            deletion: template.deletion.clone(),
            taints: template.taints.clone(),
            ..Default::default()
        },
        status: None,
    };
    Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &machine)
        .await?;
    Ok(name)
}

/// Removes a control-plane Machine, as upstream does: leadership moves off its etcd member
/// first (a leaderless etcd stalls writes while it elects), then the Machine is deleted; its
/// member goes in the pre-terminate hook ([`release_members`]), once the Machine is drained and
/// the load balancer sends it nothing new, so its API server never serves without etcd.
async fn remove_machine(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    keep: &[&Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    if let (Some(clients), Some(member)) = (&ctx.etcd, node_name(machine)) {
        let etcd = clients.connect(&ns, &cluster.name_any()).await?;
        let successor = keep
            .iter()
            .filter(|m| is_true(m, "Ready"))
            .find_map(|m| node_name(m));
        etcd::forward_leadership(etcd.as_ref(), member, successor).await?;
    }
    Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .delete(&machine.name_any(), &DeleteParams::background())
        .await?;
    Ok(())
}

/// A control-plane Machine is Ready only with its static Pods and etcd member healthy (the
/// conditions [`health`] sets), then whatever gates the template adds.
fn readiness_gates(from_template: Option<&[ConditionGate]>) -> Vec<ConditionGate> {
    let mut gates: Vec<ConditionGate> = health::MACHINE_CONDITIONS
        .iter()
        .map(|t| ConditionGate {
            condition_type: t.to_string(),
            polarity: None,
        })
        .collect();
    for gate in from_template.unwrap_or_default() {
        if !gates
            .iter()
            .any(|g| g.condition_type == gate.condition_type)
        {
            gates.push(gate.clone());
        }
    }
    gates
}

/// The pre-terminate hook of deleting control-plane Machines: once a Machine waits for it, its
/// etcd member is released (leadership moved, member removed; never the last), then the hook
/// goes and the Machine's infrastructure with it. When the whole control plane goes, or the
/// Machine is the last one, there is nothing to keep and the hook just goes.
async fn release_members(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
    machines: &[Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    let hook = api::kubeadm_control_plane::KCP_CLEANUP_HOOK;
    let remaining: Vec<&Machine> = machines.iter().filter(|m| !common::deleting(*m)).collect();
    for machine in machines.iter().filter(|m| common::deleting(*m)) {
        if !machine.annotations().contains_key(hook) {
            continue;
        }
        let waiting = machine
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == conditions::types::DELETING))
            .is_some_and(|c| c.reason == api::machine::reasons::WAITING_FOR_PRE_TERMINATE_HOOK);
        let everything_goes =
            common::deleting(kcp) || common::deleting(cluster) || remaining.is_empty();
        if !waiting && !everything_goes {
            continue;
        }
        if !everything_goes && let (Some(clients), Some(member)) = (&ctx.etcd, node_name(machine)) {
            let etcd = clients.connect(&ns, &cluster.name_any()).await?;
            let successor = remaining
                .iter()
                .filter(|m| is_true(m, "Ready"))
                .find_map(|m| node_name(m));
            etcd::release_member(etcd.as_ref(), member, successor).await?;
        }
        drop_cleanup_hook(
            &Api::<Machine>::namespaced(ctx.client.clone(), &ns),
            machine,
        )
        .await?;
    }
    Ok(())
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

/// The members and alarms of the cluster's etcd, read over one connection.
async fn read_etcd(ctx: &Context, cluster: &Cluster) -> EtcdSeen {
    let Some(clients) = &ctx.etcd else {
        return Err(EtcdError::Unreachable(
            "no infrastructure provider in this manager reaches workload etcd".into(),
        ));
    };
    let ns = cluster.namespace().unwrap_or_default();
    let etcd = clients.connect(&ns, &cluster.name_any()).await?;
    Ok((etcd.members().await?, etcd.alarms().await?))
}

#[cfg(test)]
mod tests {
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
