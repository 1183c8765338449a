//! A KubeadmControlPlane's status, computed from what one reconcile gathered: its Machines,
//! which of them are outdated, their health (see [`super::health`]), what holds scaling, and
//! any remediation; the v1beta2 conditions.

use std::collections::BTreeMap;

use kube::Resource;

use super::health::Health;
use crate::api;
use crate::api::kubeadm_control_plane::{
    KubeadmControlPlaneInitializationStatus, KubeadmControlPlaneStatus, LastRemediationStatus,
};
use crate::api::{KubeadmControlPlane, Machine};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::common::machine_condition_true as is_true;
use crate::workload::etcd::{self, Alarm, Member};

/// What was read of a workload cluster's etcd: its members and alarms.
pub type EtcdSeen = etcd::Result<(Vec<Member>, Vec<Alarm>)>;

/// What the remediation phase did.
#[derive(Debug)]
pub struct Remediation {
    /// `Remediating`: what is being remediated, or why it may not be.
    pub condition: NewCondition,
    /// The remediation started now, for `status.lastRemediation`.
    pub started: Option<LastRemediationStatus>,
}

/// What one reconcile gathered and did.
pub struct Facts<'a> {
    pub cluster_name: &'a str,
    pub machines: &'a [Machine],
    /// The Machines that are not up to date, with the reasons.
    pub outdated: &'a BTreeMap<String, Vec<String>>,
    /// `kube-system/kubeadm-config` exists in the workload cluster (kubeadm init uploaded it).
    pub initialized: bool,
    pub health: &'a Health,
    /// Why no scaling step may be taken now (the preflight checks), `* ...` lines.
    pub blocked: &'a [String],
    pub remediation: Option<Remediation>,
}

/// How far the reconcile got.
pub enum Progress<'a> {
    /// The Cluster's infrastructure or endpoint is not there yet; nothing was done.
    WaitingForCluster,
    /// A certificate Secret the user brought cannot be used: what is wrong with it.
    CertificatesUnusable(String),
    Reconciled(Box<Facts<'a>>),
}

/// The status of a reconcile that stopped before the Machines: not Available, saying why.
fn stopped(
    mut status: KubeadmControlPlaneStatus,
    generation: Option<i64>,
    mut conds: Vec<NewCondition>,
    waiting_for: &str,
) -> KubeadmControlPlaneStatus {
    conds.push(
        NewCondition::new(
            conditions::types::AVAILABLE,
            Status::False,
            conditions::reasons::NOT_AVAILABLE,
        )
        .message(waiting_for),
    );
    common::set_conditions(&mut status.conditions, generation, conds);
    status
}

pub fn compute(
    kcp: &KubeadmControlPlane,
    paused: NewCondition,
    progress: Progress<'_>,
) -> KubeadmControlPlaneStatus {
    let generation = kcp.meta().generation;
    let mut status = kcp.status.clone().unwrap_or_default();
    let mut conds = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
    ];
    let facts = match progress {
        Progress::CertificatesUnusable(problem) => {
            conds.push(
                NewCondition::new(
                    api::kubeadm_control_plane::conditions::CERTIFICATES_AVAILABLE,
                    Status::False,
                    conditions::reasons::INTERNAL_ERROR,
                )
                .message(problem),
            );
            return stopped(
                status,
                generation,
                conds,
                "Waiting for usable cluster certificates",
            );
        }
        Progress::WaitingForCluster => {
            return stopped(
                status,
                generation,
                conds,
                "Waiting for the Cluster's infrastructure and control plane endpoint",
            );
        }
        Progress::Reconciled(facts) => *facts,
    };
    let machines = facts.machines;
    conds.push(NewCondition::new(
        api::kubeadm_control_plane::conditions::CERTIFICATES_AVAILABLE,
        Status::True,
        conditions::reasons::AVAILABLE,
    ));
    let desired = kcp.spec.replicas.unwrap_or(1).max(0) as usize;
    let live = machines.iter().filter(|m| !common::deleting(*m)).count();
    let count = |t: &str| machines.iter().filter(|m| is_true(m, t)).count() as i32;
    status.replicas = Some(machines.len() as i32);
    status.ready_replicas = Some(count(conditions::types::READY));
    status.available_replicas = Some(count(conditions::types::AVAILABLE));
    status.up_to_date_replicas = Some((machines.len() - facts.outdated.len()) as i32);
    let versions =
        super::super::machines::versions(machines.iter().filter_map(|m| m.spec.version.clone()));
    status.version = versions.first().map(|v| v.version.clone());
    status.versions = Some(versions);
    status.selector = Some(format!(
        "{}={},{}",
        api::CLUSTER_NAME_LABEL,
        facts.cluster_name,
        api::CONTROL_PLANE_LABEL
    ));
    if facts.initialized || status.initialization.is_some() {
        status.initialization = Some(KubeadmControlPlaneInitializationStatus {
            control_plane_initialized: Some(true),
        });
    }
    conds.push(facts.health.etcd_cluster.clone());
    conds.push(facts.health.components.clone());
    conds.push(
        if status.available_replicas.unwrap_or(0) > 0 && status.initialization.is_some() {
            NewCondition::new(
                conditions::types::AVAILABLE,
                Status::True,
                conditions::reasons::AVAILABLE,
            )
        } else {
            NewCondition::new(
                conditions::types::AVAILABLE,
                Status::False,
                conditions::reasons::NOT_AVAILABLE,
            )
            .message("Waiting for a control plane Machine to be Available")
        },
    );
    conds.extend(super::super::machines::machines_ready_and_up_to_date(
        machines,
    ));
    conds.push(NewCondition::activity(
        conditions::types::ROLLING_OUT,
        !facts.outdated.is_empty(),
        || {
            format!(
                "Rolling out {} not up-to-date replicas",
                facts.outdated.len()
            )
        },
    ));
    let blocked = if facts.blocked.is_empty() {
        String::new()
    } else {
        format!(" is blocked because:\n{}", facts.blocked.join("\n"))
    };
    conds.push(NewCondition::activity(
        conditions::types::SCALING_UP,
        live < desired,
        || format!("Scaling up from {live} to {desired} replicas{blocked}"),
    ));
    conds.push(NewCondition::activity(
        conditions::types::SCALING_DOWN,
        live > desired,
        || format!("Scaling down from {live} to {desired} replicas{blocked}"),
    ));
    match facts.remediation {
        Some(remediation) => {
            if let Some(started) = remediation.started {
                status.last_remediation = Some(started);
            }
            conds.push(remediation.condition);
        }
        None => conds.push(NewCondition::new(
            conditions::types::REMEDIATING,
            Status::False,
            conditions::reasons::NOT_REMEDIATING,
        )),
    }
    common::set_conditions(&mut status.conditions, generation, conds);
    status.observed_generation = generation;
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kcp(replicas: i32) -> KubeadmControlPlane {
        serde_json::from_value(json!({
            "metadata": {"name": "cp", "namespace": "ns", "generation": 5},
            "spec": {"replicas": replicas, "version": "v1.30.4", "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "g", "kind": "InMemoryMachineTemplate", "name": "t"}}}},
        }))
        .unwrap()
    }

    /// A control-plane Machine whose Node is `node-<name>`, Ready and Available or not.
    fn machine(name: &str, ready: bool) -> Machine {
        let status = if ready { "True" } else { "False" };
        let condition = |t: &str| json!({"type": t, "status": status, "reason": "R", "message": if ready { "" } else { "not yet" }, "lastTransitionTime": "2026-01-01T00:00:00Z"});
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "version": "v1.30.4", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"nodeRef": {"name": format!("node-{name}")}, "conditions": [condition("Ready"), condition("Available"), condition("UpToDate")]},
        }))
        .unwrap()
    }

    /// A control plane whose Pods and etcd members are all healthy.
    fn healthy() -> Health {
        let healthy = |t: &str| NewCondition::new(t, Status::True, conditions::reasons::HEALTHY);
        Health {
            machines: BTreeMap::new(),
            components: healthy(
                api::kubeadm_control_plane::conditions::CONTROL_PLANE_COMPONENTS_HEALTHY,
            ),
            etcd_cluster: healthy(api::kubeadm_control_plane::conditions::ETCD_CLUSTER_HEALTHY),
        }
    }

    fn get(status: &KubeadmControlPlaneStatus, type_: &str) -> (String, String, String) {
        let c = common::expect_condition(status.conditions.as_ref(), type_, "the status");
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    fn not_paused() -> NewCondition {
        NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused")
    }

    #[test]
    fn a_ca_that_cannot_sign_is_said_by_name() {
        let status = compute(
            &kcp(3),
            not_paused(),
            Progress::CertificatesUnusable(
                "Secret c-ca: tls.key: the private key cannot be used".into(),
            ),
        );
        assert_eq!(
            get(&status, "CertificatesAvailable"),
            (
                "False".into(),
                "InternalError".into(),
                "Secret c-ca: tls.key: the private key cannot be used".into()
            )
        );
        assert_eq!(get(&status, "Available").0, "False");
    }

    #[test]
    fn waiting_for_the_cluster_says_so() {
        let status = compute(&kcp(3), not_paused(), Progress::WaitingForCluster);
        assert_eq!(
            get(&status, "Available"),
            (
                "False".into(),
                "NotAvailable".into(),
                "Waiting for the Cluster's infrastructure and control plane endpoint".into()
            )
        );
        assert_eq!(status.replicas, None);
    }

    #[test]
    fn status_table() {
        let three = || vec![machine("a", true), machine("b", true), machine("c", true)];
        struct Case {
            name: &'static str,
            replicas: i32,
            machines: Vec<Machine>,
            outdated: Vec<&'static str>,
            blocked: Vec<&'static str>,
            remediation: Option<Remediation>,
            /// (replicas, ready, up to date)
            counters: (i32, i32, i32),
            /// (condition type, status, reason, message); "*" matches any message.
            conditions: Vec<(&'static str, &'static str, &'static str, &'static str)>,
        }
        let cases = vec![
            Case {
                name: "three healthy members",
                replicas: 3,
                machines: three(),
                outdated: vec![],
                blocked: vec![],
                remediation: None,
                counters: (3, 3, 3),
                conditions: vec![
                    ("Available", "True", "Available", ""),
                    ("EtcdClusterHealthy", "True", "Healthy", ""),
                    ("ControlPlaneComponentsHealthy", "True", "Healthy", ""),
                    ("RollingOut", "False", "NotRollingOut", ""),
                    ("Remediating", "False", "NotRemediating", ""),
                ],
            },
            Case {
                name: "an upgrade rolls out one Machine at a time",
                replicas: 3,
                machines: three(),
                outdated: vec!["a"],
                blocked: vec![],
                remediation: None,
                counters: (3, 3, 2),
                conditions: vec![(
                    "RollingOut",
                    "True",
                    "RollingOut",
                    "Rolling out 1 not up-to-date replicas",
                )],
            },
            Case {
                name: "scaling up from one",
                replicas: 3,
                machines: vec![machine("a", true)],
                outdated: vec![],
                blocked: vec![],
                remediation: None,
                counters: (1, 1, 1),
                conditions: vec![(
                    "ScalingUp",
                    "True",
                    "ScalingUp",
                    "Scaling up from 1 to 3 replicas",
                )],
            },
            Case {
                name: "scaling up waits for a learner's promotion",
                replicas: 3,
                machines: vec![machine("a", true), machine("b", true)],
                outdated: vec![],
                blocked: vec!["* waiting for etcd cluster to become healthy"],
                remediation: None,
                counters: (2, 2, 2),
                conditions: vec![(
                    "ScalingUp",
                    "True",
                    "ScalingUp",
                    "Scaling up from 2 to 3 replicas is blocked because:\n* waiting for etcd cluster to become healthy",
                )],
            },
            Case {
                name: "a Machine not ready",
                replicas: 3,
                machines: vec![machine("a", true), machine("b", true), machine("c", false)],
                outdated: vec![],
                blocked: vec![],
                remediation: None,
                counters: (3, 2, 3),
                conditions: vec![("MachinesReady", "False", "NotReady", "* Machine c: not yet")],
            },
        ];
        for case in cases {
            let outdated: BTreeMap<String, Vec<String>> = case
                .outdated
                .iter()
                .map(|n| {
                    (
                        n.to_string(),
                        vec!["* Version v1.30.4 required".to_string()],
                    )
                })
                .collect();
            let status = compute(
                &kcp(case.replicas),
                not_paused(),
                Progress::Reconciled(Box::new(Facts {
                    cluster_name: "c",
                    machines: &case.machines,
                    outdated: &outdated,
                    initialized: true,
                    health: &healthy(),
                    blocked: &case
                        .blocked
                        .iter()
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>(),
                    remediation: case.remediation,
                })),
            );
            let name = case.name;
            assert_eq!(
                (
                    status.replicas,
                    status.ready_replicas,
                    status.up_to_date_replicas
                ),
                (
                    Some(case.counters.0),
                    Some(case.counters.1),
                    Some(case.counters.2)
                ),
                "{name}"
            );
            assert_eq!(status.version.as_deref(), Some("v1.30.4"), "{name}");
            assert_eq!(
                status.selector.as_deref(),
                Some("cluster.x-k8s.io/cluster-name=c,cluster.x-k8s.io/control-plane"),
                "{name}"
            );
            assert_eq!(status.observed_generation, Some(5), "{name}");
            for (type_, want, reason, message) in case.conditions {
                let (s, r, m) = get(&status, type_);
                assert_eq!((s.as_str(), r.as_str()), (want, reason), "{name}: {type_}");
                if message != "*" {
                    assert_eq!(m, message, "{name}: {type_}");
                }
            }
        }
    }

    #[test]
    fn a_remediation_is_recorded() {
        let machines = vec![machine("a", true), machine("b", true), machine("c", false)];
        let started = LastRemediationStatus {
            machine: "c".into(),
            time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
            retry_count: 0,
        };
        let remediation = Remediation {
            condition: NewCondition::new(
                conditions::types::REMEDIATING,
                Status::True,
                "RemediationInProgress",
            )
            .message("Deleting unhealthy Machine c; a new one replaces it"),
            started: Some(started),
        };
        let status = compute(
            &kcp(3),
            not_paused(),
            Progress::Reconciled(Box::new(Facts {
                cluster_name: "c",
                machines: &machines,
                outdated: &BTreeMap::new(),
                initialized: true,
                health: &healthy(),
                blocked: &[],
                remediation: Some(remediation),
            })),
        );
        assert_eq!(get(&status, "Remediating").1, "RemediationInProgress");
        assert_eq!(
            status.last_remediation.map(|r| r.machine).as_deref(),
            Some("c")
        );
    }
}
