//! A Cluster's status, computed from what one reconcile gathered: its infrastructure cluster,
//! its control plane, its MachineDeployments, MachineSets and Machines, and whether the
//! workload cluster answers; the v1beta2 conditions and the phase.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};

use crate::api;
use crate::api::cluster::{ClusterStatus, ReplicasSummary};
use crate::api::common::{ApiEndpoint, StatusVersion};
use crate::api::{Cluster, Machine, MachineDeployment, MachinePool, MachineSet};
use crate::conditions::{self, AggregateInput, MergeReasons, NewCondition, Status, SummaryOptions};
use crate::reconcile::common;
use crate::reconcile::common::machine_condition_true as is_true;
use crate::reconcile::external::{self, condition, initialization_flag};
use crate::workload::clusters::Health;

/// The objects of a Cluster, found by its cluster-name label.
pub struct Descendants {
    pub pools: Vec<MachinePool>,
    pub deployments: Vec<MachineDeployment>,
    pub sets: Vec<MachineSet>,
    /// Shared with the Machine cache: a Cluster of thousands of Machines is not copied on
    /// every reconcile.
    pub control_plane: Vec<Arc<Machine>>,
    pub workers: Vec<Arc<Machine>>,
}

/// The provider objects a Cluster follows, as one reconcile read them.
pub struct Providers {
    /// None without an infrastructureRef; `Some(None)` while it does not exist.
    pub infrastructure: Option<Option<DynamicObject>>,
    /// None without a controlPlaneRef; `Some(None)` while it does not exist.
    pub control_plane: Option<Option<DynamicObject>>,
}

/// RemoteConnectionProbe, from the workload cluster's health checks: None while its kubeconfig
/// Secret does not exist, or why they could not be read.
pub fn remote_connection(health: Result<Option<Health>, String>) -> NewCondition {
    let failed = |message: String| {
        NewCondition::new(
            api::cluster::conditions::REMOTE_CONNECTION_PROBE,
            Status::False,
            api::cluster::reasons::PROBE_FAILED,
        )
        .message(message)
    };
    match health {
        Ok(Some(health)) if health.reachable() => NewCondition::new(
            api::cluster::conditions::REMOTE_CONNECTION_PROBE,
            Status::True,
            api::cluster::reasons::PROBE_SUCCEEDED,
        ),
        Ok(Some(health)) => {
            let error = health.last_error.unwrap_or_default();
            match health.last_success {
                None => failed(format!("Remote connection not established yet: {error}")),
                Some(at) => failed(format!(
                    "Remote connection probe failed, probe last succeeded at {at}: {error}"
                )),
            }
        }
        Ok(None) => failed(
            "Remote connection not established yet: the kubeconfig Secret does not exist".into(),
        ),
        Err(e) => failed(e),
    }
}

/// Whether the control plane is initialized (once, it stays so): the provider says so, or,
/// without one, a control-plane Machine has a Node.
pub fn control_plane_initialized(
    cluster: &Cluster,
    providers: &Providers,
    d: &Descendants,
) -> bool {
    let before = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    before
        || match &providers.control_plane {
            None => d
                .control_plane
                .iter()
                .any(|m| super::super::machines::node_name(m).is_some()),
            Some(Some(cp)) => initialization_flag(cp, "controlPlaneInitialized"),
            Some(None) => false,
        }
}

/// The Cluster's status, and whether it is settled (nothing is waited for, so the next look
/// can wait longer).
pub fn compute(
    cluster: &Cluster,
    paused: NewCondition,
    providers: &Providers,
    d: &Descendants,
    probe: Option<NewCondition>,
) -> (ClusterStatus, bool) {
    let generation = cluster.meta().generation;
    let mut status = cluster.status.clone().unwrap_or_default();
    let mut init = status.initialization.clone().unwrap_or_default();
    let mut settled = true;
    let mut new_conditions = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
    ];

    // Infrastructure.
    match (&cluster.spec.infrastructure_ref, &providers.infrastructure) {
        (Some(reference), Some(None)) => {
            settled = false;
            new_conditions.push(
                NewCondition::new(
                    api::cluster::conditions::INFRASTRUCTURE_READY,
                    Status::False,
                    conditions::reasons::OBJECT_DOES_NOT_EXIST,
                )
                .message(format!(
                    "{} {} does not exist",
                    reference.kind, reference.name
                )),
            );
        }
        (Some(reference), Some(Some(infra))) => {
            let provisioned = initialization_flag(infra, "provisioned");
            if provisioned {
                init.infrastructure_provisioned = Some(true);
                let domains = external::field(infra, &["status", "failureDomains"]).cloned();
                status.failure_domains = domains.and_then(|d| serde_json::from_value(d).ok());
            } else {
                settled = false;
            }
            let fallback = if provisioned {
                NewCondition::new("", Status::True, conditions::reasons::READY)
            } else {
                NewCondition::new("", Status::False, conditions::reasons::NOT_READY).message(
                    format!(
                        "{} status.initialization.provisioned is false",
                        reference.kind
                    ),
                )
            };
            new_conditions.push(conditions::mirror(
                condition(infra, conditions::types::READY).as_ref(),
                conditions::types::READY,
                api::cluster::conditions::INFRASTRUCTURE_READY,
                Some(fallback),
            ));
        }
        _ => {
            init.infrastructure_provisioned = Some(true);
            new_conditions.push(NewCondition::new(
                api::cluster::conditions::INFRASTRUCTURE_READY,
                Status::True,
                api::cluster::reasons::NO_INFRASTRUCTURE,
            ));
        }
    }

    // Control plane.
    if control_plane_initialized(cluster, providers, d) {
        init.control_plane_initialized = Some(true);
    }
    let initialized = init.control_plane_initialized == Some(true);
    let mut control_plane_conditions: Option<(String, String, Vec<Condition>)> = None;
    let initialized_condition = |waiting_for: &str| {
        if initialized {
            NewCondition::new(
                api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                Status::True,
                api::cluster::reasons::INITIALIZED,
            )
        } else {
            NewCondition::new(
                api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                Status::False,
                api::cluster::reasons::NOT_INITIALIZED,
            )
            .message(waiting_for)
        }
    };
    match (&cluster.spec.control_plane_ref, &providers.control_plane) {
        (Some(reference), Some(None)) => {
            settled = false;
            new_conditions.push(
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                    Status::Unknown,
                    conditions::reasons::OBJECT_DOES_NOT_EXIST,
                )
                .message(format!("{} does not exist", reference.kind)),
            );
            status.control_plane = None;
        }
        (Some(reference), Some(Some(cp))) => {
            settled &= initialized;
            control_plane_conditions = Some((
                reference.kind.clone(),
                cp.name_any(),
                [
                    conditions::types::ROLLING_OUT,
                    conditions::types::SCALING_UP,
                    conditions::types::SCALING_DOWN,
                ]
                .into_iter()
                .filter_map(|t| external::condition(cp, t))
                .collect(),
            ));
            new_conditions.push(initialized_condition("Control plane not yet initialized"));
            let num = |path: &[&str]| {
                external::field(cp, path)
                    .and_then(|v| v.as_i64())
                    .map(|v| v as i32)
            };
            status.control_plane = Some(ReplicasSummary {
                desired_replicas: num(&["spec", "replicas"]),
                replicas: num(&["status", "replicas"]),
                ready_replicas: num(&["status", "readyReplicas"]),
                available_replicas: num(&["status", "availableReplicas"]),
                up_to_date_replicas: num(&["status", "upToDateReplicas"]),
                versions: external::field(cp, &["status", "versions"])
                    .and_then(|v| serde_json::from_value(v.clone()).ok()),
                // The topology controller's.
                upgrade_plan: cluster
                    .status
                    .as_ref()
                    .and_then(|s| s.control_plane.as_ref())
                    .and_then(|c| c.upgrade_plan.clone()),
            });
            let fallback =
                NewCondition::new("", Status::Unknown, conditions::reasons::NOT_YET_REPORTED)
                    .message(format!("{} has not reported Available", reference.kind));
            new_conditions.push(conditions::mirror(
                condition(cp, conditions::types::AVAILABLE).as_ref(),
                conditions::types::AVAILABLE,
                api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                Some(fallback),
            ));
        }
        _ => {
            settled &= initialized;
            new_conditions.push(initialized_condition(
                "Waiting for the first control plane machine to have status.nodeRef set",
            ));
            status.control_plane = Some(count_machines(&d.control_plane));
            let available = d
                .control_plane
                .iter()
                .any(|m| is_true(m, conditions::types::AVAILABLE));
            new_conditions.push(if available {
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                    Status::True,
                    conditions::reasons::AVAILABLE,
                )
            } else {
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                    Status::False,
                    conditions::reasons::NOT_AVAILABLE,
                )
                .message("Waiting for a control plane Machine to be Available")
            });
        }
    }

    // Workers.
    let workers_plan = status.workers.as_ref().and_then(|w| w.upgrade_plan.clone());
    status.workers = Some(ReplicasSummary {
        upgrade_plan: workers_plan,
        ..count_workers(d)
    });
    let md_conditions: Vec<Option<Condition>> = d
        .deployments
        .iter()
        .map(|md| {
            md.status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .and_then(|c| conditions::get(c, conditions::types::AVAILABLE))
                .cloned()
        })
        .collect();
    let md_names: Vec<String> = d.deployments.iter().map(|m| m.name_any()).collect();
    new_conditions.push(if d.deployments.is_empty() {
        NewCondition::new(
            api::cluster::conditions::WORKERS_AVAILABLE,
            Status::True,
            api::cluster::reasons::NO_WORKERS,
        )
    } else {
        let inputs: Vec<AggregateInput<'_>> = md_names
            .iter()
            .zip(&md_conditions)
            .map(|(name, c)| AggregateInput {
                kind: "MachineDeployment",
                name,
                control_plane: false,
                condition: c.as_ref(),
            })
            .collect();
        conditions::aggregate(
            &inputs,
            conditions::types::AVAILABLE,
            api::cluster::conditions::WORKERS_AVAILABLE,
            &MergeReasons::new(
                conditions::reasons::NOT_AVAILABLE,
                conditions::reasons::AVAILABLE_UNKNOWN,
                conditions::reasons::AVAILABLE,
            ),
        )
    });
    new_conditions.extend(aggregated_conditions(
        control_plane_conditions.as_ref(),
        d,
        Timestamp::now(),
    ));
    new_conditions.extend(probe);

    status.initialization = Some(init);
    common::set_conditions(&mut status.conditions, generation, new_conditions);
    let available = {
        let list = status.conditions.clone().unwrap_or_default();
        let options = SummaryOptions {
            ignore_if_missing: &[api::cluster::conditions::REMOTE_CONNECTION_PROBE],
            reasons: MergeReasons::new(
                conditions::reasons::NOT_AVAILABLE,
                conditions::reasons::AVAILABLE_UNKNOWN,
                conditions::reasons::AVAILABLE,
            ),
            ..Default::default()
        };
        let mut summed = vec![
            conditions::types::DELETING,
            api::cluster::conditions::REMOTE_CONNECTION_PROBE,
            api::cluster::conditions::INFRASTRUCTURE_READY,
            api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
            api::cluster::conditions::WORKERS_AVAILABLE,
        ];
        // A managed topology that cannot be reconciled makes the Cluster unavailable, as
        // upstream's; one that is upgrading or still creating its parts does not.
        use api::cluster_class::topology as t;
        let topology_broken = cluster.spec.topology.is_some()
            && list.iter().any(|c| {
                c.type_ == t::TOPOLOGY_RECONCILED
                    && c.status == "False"
                    && ![
                        t::CLUSTER_UPGRADING,
                        t::CLUSTER_CREATING,
                        t::PAUSED,
                        t::DELETING,
                    ]
                    .contains(&c.reason.as_str())
            });
        if topology_broken {
            summed.push(t::TOPOLOGY_RECONCILED);
        }
        conditions::summary(&list, conditions::types::AVAILABLE, &summed, &options)
    };
    common::set_conditions(&mut status.conditions, generation, vec![available]);
    let mut with_phase = cluster.clone();
    with_phase.status = Some(status.clone());
    status.phase = Some(phase(&with_phase).to_string());
    status.observed_generation = generation;
    (status, settled)
}

/// The conditions a Cluster sums up from what it is made of, as upstream's v1beta2 Cluster
/// does: its Machines' Ready and UpToDate (control plane and workers apart), whether the
/// control plane or any MachineDeployment (or stand-alone MachineSet) is rolling out or
/// scaling, and which Machines a MachineHealthCheck asked their owner to remediate.
/// `control_plane` is the control plane's kind, name and RollingOut/Scaling* conditions.
fn aggregated_conditions(
    control_plane: Option<&(String, String, Vec<Condition>)>,
    d: &Descendants,
    now: Timestamp,
) -> Vec<NewCondition> {
    use super::super::machines::{aggregate, condition_of};
    let ready = || {
        MergeReasons::new(
            conditions::reasons::NOT_READY,
            conditions::reasons::READY_UNKNOWN,
            conditions::reasons::READY,
        )
    };
    let up_to_date = || {
        MergeReasons::new(
            conditions::reasons::NOT_UP_TO_DATE,
            conditions::reasons::UP_TO_DATE_UNKNOWN,
            conditions::reasons::UP_TO_DATE,
        )
    };
    // A Machine just made has not had the time to say whether it is up to date.
    let settled = |machines: &[Arc<Machine>]| -> Vec<Arc<Machine>> {
        machines
            .iter()
            .filter(|m| {
                condition_of(m, "UpToDate").is_some()
                    || m.meta()
                        .creation_timestamp
                        .as_ref()
                        .is_some_and(|t| now.as_second() - t.0.as_second() > 10)
            })
            .cloned()
            .collect()
    };
    let mut out = vec![
        aggregate(
            &d.control_plane,
            "Ready",
            api::cluster::conditions::CONTROL_PLANE_MACHINES_READY,
            ready(),
        ),
        aggregate(
            &d.workers,
            "Ready",
            api::cluster::conditions::WORKER_MACHINES_READY,
            ready(),
        ),
        aggregate(
            &settled(&d.control_plane),
            "UpToDate",
            api::cluster::conditions::CONTROL_PLANE_MACHINES_UP_TO_DATE,
            up_to_date(),
        ),
        aggregate(
            &settled(&d.workers),
            "UpToDate",
            api::cluster::conditions::WORKER_MACHINES_UP_TO_DATE,
            up_to_date(),
        ),
    ];

    // RollingOut over the control plane and the MachineDeployments; ScalingUp/Down also over
    // stand-alone MachineSets.
    // (kind, name, conditions, whether a stand-alone MachineSet) of the workers' owners.
    let owners: Vec<(&str, String, Option<&[Condition]>, bool)> = d
        .deployments
        .iter()
        .map(|md| {
            let conds = md.status.as_ref().and_then(|s| s.conditions.as_deref());
            ("MachineDeployment", md.name_any(), conds, false)
        })
        .chain(
            d.sets
                .iter()
                .filter(|s| !s.labels().contains_key(api::DEPLOYMENT_NAME_LABEL))
                .map(|ms| {
                    let conds = ms.status.as_ref().and_then(|s| s.conditions.as_deref());
                    ("MachineSet", ms.name_any(), conds, true)
                }),
        )
        .collect();
    for (t, reasons, with_sets) in [
        (
            "RollingOut",
            MergeReasons::new(
                conditions::reasons::ROLLING_OUT,
                conditions::reasons::ROLLING_OUT_UNKNOWN,
                conditions::reasons::NOT_ROLLING_OUT,
            ),
            false,
        ),
        (
            "ScalingUp",
            MergeReasons::new(
                conditions::reasons::SCALING_UP,
                conditions::reasons::SCALING_UP_UNKNOWN,
                conditions::reasons::NOT_SCALING_UP,
            ),
            true,
        ),
        (
            "ScalingDown",
            MergeReasons::new(
                conditions::reasons::SCALING_DOWN,
                conditions::reasons::SCALING_DOWN_UNKNOWN,
                conditions::reasons::NOT_SCALING_DOWN,
            ),
            true,
        ),
    ] {
        let mut inputs = Vec::new();
        if let Some((kind, name, conds)) = control_plane
            && let Some(c) = conditions::get(conds, t)
        {
            inputs.push(AggregateInput {
                kind,
                name,
                control_plane: true,
                condition: Some(c),
            });
        }
        for (kind, name, conds, standalone_set) in &owners {
            if *standalone_set && !with_sets {
                continue;
            }
            inputs.push(AggregateInput {
                kind,
                name,
                control_plane: false,
                condition: conds.and_then(|c| conditions::get(c, t)),
            });
        }
        out.push(if inputs.is_empty() {
            NewCondition::new(t, Status::False, &reasons.info)
        } else {
            conditions::aggregate(&inputs, t, t, &reasons)
        });
    }

    // Remediating: the Machines whose owner was asked to replace them.
    let machines: Vec<&Arc<Machine>> = d.control_plane.iter().chain(&d.workers).collect();
    let unhealthy = |m: &Machine| {
        condition_of(m, api::machine::conditions::HEALTH_CHECK_SUCCEEDED)
            .is_some_and(|c| c.status == "False")
    };
    let to_remediate: Vec<Arc<Machine>> = machines
        .iter()
        .filter(|m| {
            unhealthy(m)
                && condition_of(m, api::OWNER_REMEDIATED).is_some_and(|c| c.status == "False")
        })
        .map(|m| Arc::clone(m))
        .collect();
    out.push(if to_remediate.is_empty() {
        let mut names: Vec<String> = machines
            .iter()
            .filter(|m| unhealthy(m))
            .map(|m| m.name_any())
            .collect();
        names.sort();
        let c = NewCondition::new(
            conditions::types::REMEDIATING,
            Status::False,
            conditions::reasons::NOT_REMEDIATING,
        );
        match names.len() {
            0 => c,
            1 => c.message(format!(
                "Machine {} is not healthy (not to be remediated)",
                names[0]
            )),
            _ => c.message(format!(
                "Machines {} are not healthy (not to be remediated)",
                names.join(", ")
            )),
        }
    } else {
        aggregate(
            &to_remediate,
            api::OWNER_REMEDIATED,
            "Remediating",
            MergeReasons::new(
                conditions::reasons::REMEDIATING,
                conditions::reasons::REMEDIATING_UNKNOWN,
                conditions::reasons::NOT_REMEDIATING,
            ),
        )
    });
    out
}

/// The Cluster's phase, as upstream computes it.
pub fn phase(cluster: &Cluster) -> &'static str {
    let init = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.clone())
        .unwrap_or_default();
    if common::deleting(cluster) {
        "Deleting"
    } else if init.infrastructure_provisioned == Some(true)
        && cluster
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_some_and(ApiEndpoint::is_valid)
    {
        "Provisioned"
    } else if cluster.spec.infrastructure_ref.is_some() || cluster.spec.control_plane_ref.is_some()
    {
        "Provisioning"
    } else {
        "Pending"
    }
}

/// Counts Machines into a replicas summary (control plane without a provider).
fn count_machines(machines: &[Arc<Machine>]) -> ReplicasSummary {
    let n = |t: &str| machines.iter().filter(|m| is_true(m, t)).count() as i32;
    ReplicasSummary {
        desired_replicas: Some(machines.len() as i32),
        replicas: Some(machines.len() as i32),
        ready_replicas: Some(n("Ready")),
        available_replicas: Some(n("Available")),
        up_to_date_replicas: Some(n("UpToDate")),
        ..Default::default()
    }
}

/// Sums the workers: MachineDeployments, stand-alone MachineSets and Machines.
fn count_workers(d: &Descendants) -> ReplicasSummary {
    let mut sum = ReplicasSummary::default();
    let mut add = |desired: Option<i32>,
                   replicas: Option<i32>,
                   ready: Option<i32>,
                   available: Option<i32>,
                   up: Option<i32>| {
        let plus = |a: &mut Option<i32>, b: Option<i32>| *a = Some(a.unwrap_or(0) + b.unwrap_or(0));
        plus(&mut sum.desired_replicas, desired);
        plus(&mut sum.replicas, replicas);
        plus(&mut sum.ready_replicas, ready);
        plus(&mut sum.available_replicas, available);
        plus(&mut sum.up_to_date_replicas, up);
    };
    for md in &d.deployments {
        let s = md.status.clone().unwrap_or_default();
        add(
            md.spec.replicas,
            s.replicas,
            s.ready_replicas,
            s.available_replicas,
            s.up_to_date_replicas,
        );
    }
    let standalone_sets = d
        .sets
        .iter()
        .filter(|ms| !ms.labels().contains_key(api::DEPLOYMENT_NAME_LABEL));
    for ms in standalone_sets {
        let s = ms.status.clone().unwrap_or_default();
        add(
            ms.spec.replicas,
            s.replicas,
            s.ready_replicas,
            s.available_replicas,
            s.up_to_date_replicas,
        );
    }
    let standalone_machines = d
        .workers
        .iter()
        .filter(|m| common::controller_of(m.owner_references()).is_none());
    // The versions the workers run: their MachineDeployments' and standalone MachineSets'
    // `status.versions`, and each standalone Machine's.
    let mut versions: Vec<StatusVersion> = d
        .deployments
        .iter()
        .filter_map(|md| md.status.as_ref()?.versions.clone())
        .flatten()
        .collect();
    versions.extend(
        d.sets
            .iter()
            .filter(|ms| !ms.labels().contains_key(api::DEPLOYMENT_NAME_LABEL))
            .filter_map(|ms| ms.status.as_ref()?.versions.clone())
            .flatten(),
    );
    for m in standalone_machines {
        if let Some(version) = &m.spec.version {
            versions.push(StatusVersion {
                version: version.clone(),
                replicas: Some(1),
            });
        }
        let one = |t: &str| Some(i32::from(is_true(m, t)));
        add(
            Some(1),
            Some(1),
            one("Ready"),
            one("Available"),
            one("UpToDate"),
        );
    }
    sum.versions = Some(crate::controllers::machines::merge_versions(
        versions.into_iter(),
    ));
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::expect_condition;
    use serde_json::json;

    #[test]
    fn the_remote_connection_is_down_only_after_five_failed_probes_in_a_row() {
        let at: Timestamp = "2026-12-02T10:00:00Z".parse().unwrap();
        let health = |last_success: Option<Timestamp>, failures: u32| {
            Ok(Some(Health {
                last_success,
                failures,
                last_error: (failures > 0).then(|| "connection refused".to_string()),
            }))
        };
        type Case = (
            &'static str,
            Result<Option<Health>, String>,
            Status,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            ("answered", health(Some(at), 0), Status::True, ""),
            ("four failures since", health(Some(at), 4), Status::True, ""),
            (
                "five failures since",
                health(Some(at), 5),
                Status::False,
                "Remote connection probe failed, probe last succeeded at 2026-12-02T10:00:00Z: connection refused",
            ),
            (
                "never answered",
                health(None, 1),
                Status::False,
                "Remote connection not established yet: connection refused",
            ),
            (
                "no kubeconfig",
                Ok(None),
                Status::False,
                "Remote connection not established yet: the kubeconfig Secret does not exist",
            ),
            (
                "unreadable",
                Err("bad kubeconfig".into()),
                Status::False,
                "bad kubeconfig",
            ),
        ];
        for (case, health, status, message) in cases {
            let condition = remote_connection(health);
            assert_eq!(condition.type_, "RemoteConnectionProbe", "{case}");
            assert_eq!(condition.status, status, "{case}");
            assert_eq!(condition.message, message, "{case}");
        }
    }

    fn cluster(spec: serde_json::Value, status: serde_json::Value, deleting: bool) -> Cluster {
        let mut meta = json!({"name": "c"});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "spec": spec, "status": status})).unwrap()
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
        json!({"type": t, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-11-30T00:00:00Z"})
    }

    fn machine(name: &str, control_plane: bool, conditions: serde_json::Value) -> Arc<Machine> {
        let labels = if control_plane {
            json!({(api::CONTROL_PLANE_LABEL): ""})
        } else {
            json!({})
        };
        serde_json::from_value::<Machine>(json!({
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-11-30T00:00:00Z"},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
        .into()
    }

    fn provider(kind: &str, spec: serde_json::Value, status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "x/v1", "kind": kind, "metadata": {"name": "n"}, "spec": spec, "status": status})).unwrap()
    }

    fn no_descendants() -> Descendants {
        Descendants {
            pools: Vec::new(),
            deployments: Vec::new(),
            sets: Vec::new(),
            control_plane: Vec::new(),
            workers: Vec::new(),
        }
    }

    #[test]
    fn status_table() {
        let refs = json!({
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryCluster", "name": "n"},
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "n"},
            "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
        });
        let provisioned = || {
            Some(Some(provider(
                "InMemoryCluster",
                json!({}),
                json!({"initialization": {"provisioned": true}, "conditions": [cond("Ready", "True", "Ready", "")]}),
            )))
        };
        let available_cp = || {
            Some(Some(provider(
                "KubeadmControlPlane",
                json!({"replicas": 3}),
                json!({
                    "initialization": {"controlPlaneInitialized": true}, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 3,
                    "conditions": [cond("Available", "True", "Available", "")],
                }),
            )))
        };
        let probe_ok = || {
            Some(NewCondition::new(
                api::cluster::conditions::REMOTE_CONNECTION_PROBE,
                Status::True,
                "ProbeSucceeded",
            ))
        };
        struct Case {
            name: &'static str,
            spec: serde_json::Value,
            providers: Providers,
            probe: Option<NewCondition>,
            settled: bool,
            phase: &'static str,
            /// (condition type, status, reason, message); "*" matches any message.
            conditions: Vec<(&'static str, &'static str, &'static str, &'static str)>,
        }
        let cases = vec![
            Case {
                name: "nothing but Machines",
                spec: json!({}),
                providers: Providers {
                    infrastructure: None,
                    control_plane: None,
                },
                probe: None,
                settled: false,
                phase: "Pending",
                conditions: vec![
                    ("InfrastructureReady", "True", "NoInfrastructure", ""),
                    (
                        "ControlPlaneInitialized",
                        "False",
                        "NotInitialized",
                        "Waiting for the first control plane machine to have status.nodeRef set",
                    ),
                    (
                        "ControlPlaneAvailable",
                        "False",
                        "NotAvailable",
                        "Waiting for a control plane Machine to be Available",
                    ),
                    ("WorkersAvailable", "True", "NoWorkers", ""),
                ],
            },
            Case {
                name: "the infrastructure cluster does not exist",
                spec: refs.clone(),
                providers: Providers {
                    infrastructure: Some(None),
                    control_plane: available_cp(),
                },
                probe: probe_ok(),
                settled: false,
                phase: "Provisioning",
                conditions: vec![
                    (
                        "InfrastructureReady",
                        "False",
                        "ObjectDoesNotExist",
                        "InMemoryCluster n does not exist",
                    ),
                    ("Available", "False", "NotAvailable", "*"),
                ],
            },
            Case {
                name: "the control plane is not initialized yet",
                spec: refs.clone(),
                providers: Providers {
                    infrastructure: provisioned(),
                    control_plane: Some(Some(provider(
                        "KubeadmControlPlane",
                        json!({"replicas": 1}),
                        json!({}),
                    ))),
                },
                probe: None,
                settled: false,
                phase: "Provisioned",
                conditions: vec![
                    (
                        "ControlPlaneInitialized",
                        "False",
                        "NotInitialized",
                        "Control plane not yet initialized",
                    ),
                    (
                        "ControlPlaneAvailable",
                        "Unknown",
                        "NotYetReported",
                        "KubeadmControlPlane has not reported Available",
                    ),
                ],
            },
            Case {
                name: "everything up and the workload cluster answers",
                spec: refs.clone(),
                providers: Providers {
                    infrastructure: provisioned(),
                    control_plane: available_cp(),
                },
                probe: probe_ok(),
                settled: true,
                phase: "Provisioned",
                conditions: vec![
                    ("InfrastructureReady", "True", "Ready", ""),
                    ("ControlPlaneInitialized", "True", "Initialized", ""),
                    ("ControlPlaneAvailable", "True", "Available", ""),
                    ("RemoteConnectionProbe", "True", "ProbeSucceeded", ""),
                    ("Available", "True", "Available", ""),
                ],
            },
            Case {
                name: "the workload cluster does not answer",
                spec: refs,
                providers: Providers {
                    infrastructure: provisioned(),
                    control_plane: available_cp(),
                },
                probe: Some(
                    NewCondition::new(
                        api::cluster::conditions::REMOTE_CONNECTION_PROBE,
                        Status::False,
                        "ProbeFailed",
                    )
                    .message("Remote connection probe failed: refused"),
                ),
                settled: true,
                phase: "Provisioned",
                conditions: vec![
                    (
                        "RemoteConnectionProbe",
                        "False",
                        "ProbeFailed",
                        "Remote connection probe failed: refused",
                    ),
                    ("Available", "False", "NotAvailable", "*"),
                ],
            },
        ];
        for case in cases {
            let c = cluster(case.spec, json!({}), false);
            let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
            let (status, settled) =
                compute(&c, paused, &case.providers, &no_descendants(), case.probe);
            let name = case.name;
            assert_eq!(settled, case.settled, "{name}");
            assert_eq!(status.phase.as_deref(), Some(case.phase), "{name}");
            for (type_, want, reason, message) in case.conditions {
                let got = expect_condition(status.conditions.as_ref(), type_, name);
                assert_eq!(
                    (got.status.as_str(), got.reason.as_str()),
                    (want, reason),
                    "{name}: {type_}"
                );
                if message != "*" {
                    assert_eq!(got.message, message, "{name}: {type_}");
                }
            }
            if case.name == "everything up and the workload cluster answers" {
                let cp = status.control_plane.unwrap();
                assert_eq!(
                    (cp.desired_replicas, cp.available_replicas),
                    (Some(3), Some(3))
                );
            }
        }
    }

    #[test]
    fn a_cluster_sums_up_its_machines_rollouts_and_remediations() {
        let ready = cond("Ready", "True", "Ready", "");
        let d = Descendants {
            pools: Vec::new(),
            deployments: vec![serde_json::from_value(json!({
                "metadata": {"name": "md-0"},
                "spec": {"clusterName": "c", "selector": {}, "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"}}}},
                "status": {"conditions": [
                    cond("RollingOut", "True", "RollingOut", "Rolling out 2 not up-to-date replicas"),
                    cond("ScalingUp", "False", "NotScalingUp", ""),
                ]}
            }))
            .unwrap()],
            sets: Vec::new(),
            control_plane: vec![machine("cp-0", true, json!([ready, cond("UpToDate", "True", "UpToDate", "")]))],
            workers: vec![
                machine("w-0", false, json!([ready])),
                machine("w-1", false, json!([
                    cond("Ready", "False", "NotReady", "* NodeHealthy: Node not ready"),
                    cond("HealthCheckSucceeded", "False", "UnhealthyNode", "Node not ready for 300s"),
                    cond("OwnerRemediated", "False", "WaitingForRemediation", "Waiting for MachineSet ms to remediate this Machine"),
                ])),
            ],
        };
        let cp = (
            "KubeadmControlPlane".to_string(),
            "cp".to_string(),
            serde_json::from_value::<Vec<Condition>>(json!([cond(
                "ScalingUp",
                "True",
                "ScalingUp",
                "Scaling up from 1 to 3 replicas"
            )]))
            .unwrap(),
        );
        let now: Timestamp = "2026-11-30T00:01:00Z".parse().unwrap();
        let got: Vec<(String, Status, String)> = aggregated_conditions(Some(&cp), &d, now)
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason))
            .collect();
        let want = [
            ("ControlPlaneMachinesReady", Status::True, "Ready"),
            ("WorkerMachinesReady", Status::False, "NotReady"),
            ("ControlPlaneMachinesUpToDate", Status::True, "UpToDate"),
            // The workers never said: old enough to count, so Unknown.
            ("WorkerMachinesUpToDate", Status::Unknown, "UpToDateUnknown"),
            ("RollingOut", Status::True, "RollingOut"),
            ("ScalingUp", Status::True, "ScalingUp"),
            // Neither the control plane nor md-0 reports it.
            ("ScalingDown", Status::Unknown, "ScalingDownUnknown"),
            ("Remediating", Status::True, "Remediating"),
        ];
        let want: Vec<(String, Status, String)> = want
            .into_iter()
            .map(|(t, s, r)| (t.to_string(), s, r.to_string()))
            .collect();
        assert_eq!(got, want);

        // Nothing to remediate, but an unhealthy Machine is named.
        let mut d = d;
        Arc::make_mut(&mut d.workers[1])
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .pop();
        let remediating = aggregated_conditions(None, &d, now).pop().unwrap();
        assert_eq!(
            (remediating.status, remediating.message.as_str()),
            (
                Status::False,
                "Machine w-1 is not healthy (not to be remediated)"
            )
        );
    }

    #[test]
    fn phase_table() {
        let infra = json!({"infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}});
        let endpoint = json!({"infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}, "controlPlaneEndpoint": {"host": "h", "port": 6443}});
        let provisioned = json!({"initialization": {"infrastructureProvisioned": true}});
        for (spec, status, deleting, want) in [
            (json!({}), json!({}), false, "Pending"),
            (infra.clone(), json!({}), false, "Provisioning"),
            (infra, provisioned.clone(), false, "Provisioning"),
            (endpoint.clone(), provisioned.clone(), false, "Provisioned"),
            (endpoint, provisioned, true, "Deleting"),
        ] {
            assert_eq!(
                phase(&cluster(spec.clone(), status.clone(), deleting)),
                want,
                "{spec} {status}"
            );
        }
    }
}
