//! A Machine's status, computed from what one reconcile gathered: its providers, its Node,
//! whether it is up to date; the v1beta2 conditions and the phase.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::api;
use crate::api::Machine;
use crate::api::common::{ConditionPolarity, MachineAddress};
use crate::api::machine::{MachineNodeReference, MachineStatus};
use crate::conditions::{self, MergeReasons, NewCondition, Status, SummaryOptions};
use crate::reconcile::common;
use crate::reconcile::external::{self, condition, initialization_flag};

/// The provider objects a Machine brings together, as one reconcile read them.
pub struct Providers {
    /// None without a configRef (the data Secret is named directly); `Some(None)` while the
    /// config does not exist.
    pub bootstrap: Option<Option<DynamicObject>>,
    pub infrastructure: Option<DynamicObject>,
}

/// What is known of the Machine's Node.
#[derive(Debug)]
pub enum NodeState {
    Found(Arc<Node>),
    /// The workload cluster has no Node with the Machine's providerID (yet).
    Absent,
    /// The Cluster's kubeconfig Secret does not exist yet.
    NoKubeconfig,
    /// The workload cluster could not be asked: why.
    Unreachable(String),
    /// The control plane is not initialized, so workers do not look yet; the providerID.
    WaitingForControlPlane(String),
    /// The infrastructure has not reported a providerID yet.
    WaitingForProviderId,
}

impl NodeState {
    /// When to look again. Node changes reach the reconciler through the workload cluster's
    /// Node watch, changes of its provider objects through their watches, and the Cluster
    /// watch wakes waiting workers when the control plane is initialized; these are safety
    /// nets.
    pub fn requeue(&self) -> Duration {
        Duration::from_secs(match self {
            NodeState::Found(_) => common::RESYNC.as_secs(),
            NodeState::Absent | NodeState::WaitingForControlPlane(_) => 10,
            NodeState::NoKubeconfig | NodeState::Unreachable(_) => 2,
            NodeState::WaitingForProviderId => 1,
        })
    }
}

/// The Machine's phase, as upstream computes it.
pub fn phase(machine: &Machine) -> &'static str {
    let status = machine.status.clone().unwrap_or_default();
    let init = status.initialization.unwrap_or_default();
    if common::deleting(machine) {
        "Deleting"
    } else if status.node_ref.is_some() && init.infrastructure_provisioned == Some(true) {
        "Running"
    } else if machine.spec.provider_id.is_some() {
        "Provisioned"
    } else if init.bootstrap_data_secret_created == Some(true) {
        "Provisioning"
    } else {
        "Pending"
    }
}

/// The Machine's status, and how long until it may become Available (minReadySeconds).
pub fn compute(
    machine: &Machine,
    paused: NewCondition,
    providers: &Providers,
    node: &NodeState,
    up_to_date: Option<NewCondition>,
) -> (MachineStatus, Option<Duration>) {
    let generation = machine.meta().generation;
    let mut status = machine.status.clone().unwrap_or_default();
    let mut init = status.initialization.clone().unwrap_or_default();
    let mut conds = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
    ];

    // Bootstrap.
    let bootstrap_kind = machine
        .spec
        .bootstrap
        .config_ref
        .as_ref()
        .map(|r| r.kind.as_str())
        .unwrap_or_default();
    match &providers.bootstrap {
        None => {
            let provided = machine.spec.bootstrap.data_secret_name.is_some();
            init.bootstrap_data_secret_created = Some(provided);
            conds.push(if provided {
                NewCondition::new(
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Status::True,
                    api::machine::reasons::DATA_SECRET_PROVIDED,
                )
            } else {
                NewCondition::new(
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Status::False,
                    conditions::reasons::NOT_READY,
                )
                .message("Waiting for spec.bootstrap.dataSecretName to be set")
            });
        }
        Some(None) => conds.push(
            NewCondition::new(
                api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                Status::False,
                conditions::reasons::OBJECT_DOES_NOT_EXIST,
            )
            .message(format!("{bootstrap_kind} does not exist")),
        ),
        Some(Some(config)) => {
            if machine.spec.bootstrap.data_secret_name.is_some() {
                init.bootstrap_data_secret_created = Some(true);
            }
            conds.push(mirror_provider(
                config,
                "dataSecretCreated",
                bootstrap_kind,
                api::machine::conditions::BOOTSTRAP_CONFIG_READY,
            ));
        }
    }

    // Infrastructure.
    let infra_kind = &machine.spec.infrastructure_ref.kind;
    match &providers.infrastructure {
        None => conds.push(
            NewCondition::new(
                api::machine::conditions::INFRASTRUCTURE_READY,
                Status::False,
                conditions::reasons::OBJECT_DOES_NOT_EXIST,
            )
            .message(format!("{infra_kind} does not exist")),
        ),
        Some(infra) => {
            if initialization_flag(infra, "provisioned")
                && external::field(infra, &["spec", "providerID"]).is_some_and(Value::is_string)
            {
                init.infrastructure_provisioned = Some(true);
                status.addresses = external::field(infra, &["status", "addresses"])
                    .and_then(|a| serde_json::from_value::<Vec<MachineAddress>>(a.clone()).ok());
                status.failure_domain = external::field(infra, &["status", "failureDomain"])
                    .and_then(Value::as_str)
                    .map(String::from);
            }
            conds.push(mirror_provider(
                infra,
                "provisioned",
                infra_kind,
                api::machine::conditions::INFRASTRUCTURE_READY,
            ));
        }
    }

    // The Node.
    match node {
        NodeState::Found(node) => {
            status.node_ref = Some(MachineNodeReference {
                name: node.name_any(),
            });
            status.node_info = node.status.as_ref().and_then(|s| s.node_info.clone());
            conds.extend(node_conditions(Some(node)));
        }
        NodeState::Absent => conds.extend(node_conditions(None)),
        NodeState::NoKubeconfig => conds.push(node_inspection_failed(
            api::machine::reasons::INSPECTION_FAILED,
            "Waiting for the Cluster's kubeconfig Secret".into(),
        )),
        NodeState::Unreachable(e) => conds.push(node_inspection_failed(
            api::machine::reasons::CONNECTION_DOWN,
            format!("Cannot reach the workload cluster: {e}"),
        )),
        NodeState::WaitingForControlPlane(id) => conds.push(node_inspection_failed(
            api::machine::reasons::INSPECTION_FAILED,
            format!("Waiting for Cluster control plane to be initialized to find the Node with spec.providerID {id}"),
        )),
        NodeState::WaitingForProviderId => conds.push(node_inspection_failed(
            api::machine::reasons::INSPECTION_FAILED,
            format!("Waiting for {infra_kind} to report spec.providerID"),
        )),
    }

    status.initialization = Some(init);
    common::set_conditions(&mut status.conditions, generation, conds);

    // What sums the above up.
    let list = status.conditions.clone().unwrap_or_default();
    // spec.readinessGates come after the Machine's own conditions, each with its polarity.
    let gates = machine.spec.readiness_gates.as_deref().unwrap_or_default();
    let mut ready_from = vec![
        conditions::types::DELETING,
        api::machine::conditions::BOOTSTRAP_CONFIG_READY,
        api::machine::conditions::INFRASTRUCTURE_READY,
        api::machine::conditions::NODE_HEALTHY,
        api::machine::conditions::HEALTH_CHECK_SUCCEEDED,
    ];
    for gate in gates {
        if !ready_from.contains(&gate.condition_type.as_str()) {
            ready_from.push(&gate.condition_type);
        }
    }
    let ready = conditions::summary(
        &list,
        conditions::types::READY,
        &ready_from,
        &SummaryOptions {
            ignore_if_missing: &[api::machine::conditions::HEALTH_CHECK_SUCCEEDED],
            negative: gates
                .iter()
                .filter(|g| g.polarity == Some(ConditionPolarity::Negative))
                .map(|g| g.condition_type.as_str())
                .collect(),
            reasons: MergeReasons::new(
                conditions::reasons::NOT_READY,
                conditions::reasons::READY_UNKNOWN,
                conditions::reasons::READY,
            ),
            ..Default::default()
        },
    );
    let (available, available_wait) = available_condition(machine, &list, &ready);
    let mut summary = vec![ready, available];
    // Stand-alone Machines and sets are up to date by definition.
    match up_to_date {
        Some(c) => summary.push(c),
        None if common::controller_of(machine.owner_references()).is_none() => {
            summary.push(NewCondition::new(
                conditions::types::UP_TO_DATE,
                Status::True,
                conditions::reasons::UP_TO_DATE,
            ));
        }
        None => {}
    }
    common::set_conditions(&mut status.conditions, generation, summary);

    let mut with_status = machine.clone();
    with_status.status = Some(status.clone());
    let new_phase = phase(&with_status).to_string();
    if status.phase.as_deref() != Some(new_phase.as_str()) {
        status.last_updated = Some(Time(Timestamp::now()));
    }
    status.phase = Some(new_phase);
    status.observed_generation = generation;
    status.certificates_expiry_date = certificates_expiry(machine, providers);
    (status, available_wait)
}

/// When the Machine's certificates expire: its own annotation, else its bootstrap config's
/// (where the control plane provider records it), as upstream reads them.
fn certificates_expiry(machine: &Machine, providers: &Providers) -> Option<Time> {
    let annotation = |annotations: &std::collections::BTreeMap<String, String>| {
        annotations
            .get(api::CERTIFICATES_EXPIRY_ANNOTATION)
            .and_then(|v| v.parse::<Timestamp>().ok())
    };
    annotation(machine.annotations())
        .or_else(|| {
            providers
                .bootstrap
                .as_ref()
                .and_then(|b| b.as_ref())
                .and_then(|b| annotation(b.annotations()))
        })
        .map(Time)
        .or_else(|| {
            machine
                .status
                .as_ref()
                .and_then(|s| s.certificates_expiry_date.clone())
        })
}

/// A provider object's Ready condition mirrored as the Machine's `into` condition, or, when
/// the provider reports none, its initialization flag.
fn mirror_provider(object: &DynamicObject, flag: &str, kind: &str, into: &str) -> NewCondition {
    let fallback = if initialization_flag(object, flag) {
        NewCondition::new("", Status::True, conditions::reasons::READY)
    } else {
        NewCondition::new("", Status::False, conditions::reasons::NOT_READY)
            .message(format!("{kind} status.initialization.{flag} is false"))
    };
    conditions::mirror(
        condition(object, conditions::types::READY).as_ref(),
        conditions::types::READY,
        into,
        Some(fallback),
    )
}

fn node_inspection_failed(reason: &str, message: String) -> NewCondition {
    NewCondition::new(
        api::machine::conditions::NODE_HEALTHY,
        Status::Unknown,
        reason,
    )
    .message(message)
}

/// NodeReady and NodeHealthy from the Node's conditions (None: there is no Node).
fn node_conditions(node: Option<&Node>) -> Vec<NewCondition> {
    let Some(node) = node else {
        return vec![
            NewCondition::new(
                api::machine::conditions::NODE_READY,
                Status::Unknown,
                api::machine::reasons::NODE_DOES_NOT_EXIST,
            )
            .message("Node does not exist"),
            NewCondition::new(
                api::machine::conditions::NODE_HEALTHY,
                Status::Unknown,
                api::machine::reasons::NODE_DOES_NOT_EXIST,
            )
            .message("Node does not exist"),
        ];
    };
    let list = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let get = |t: &str| list.iter().find(|c| c.type_ == t);
    let ready = match get("Ready") {
        Some(c) if c.status == "True" => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::True,
            api::machine::reasons::NODE_READY,
        ),
        Some(c) => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::parse(&c.status),
            if c.status == "False" {
                api::machine::reasons::NODE_NOT_READY
            } else {
                api::machine::reasons::NODE_READY_UNKNOWN
            },
        )
        .message(format!(
            "* Node.Ready: {}",
            c.message
                .clone()
                .unwrap_or_else(|| format!("Condition is {}", c.status))
        )),
        None => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::Unknown,
            api::machine::reasons::NODE_READY_UNKNOWN,
        )
        .message("* Node.Ready: Condition not yet reported"),
    };
    let mut problems = Vec::new();
    let mut unknown = false;
    for (t, good) in [
        ("Ready", "True"),
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
    ] {
        match get(t) {
            Some(c) if c.status == good => {}
            Some(c) if c.status == "Unknown" => {
                unknown = true;
                problems.push(format!("* Node.{t}: Condition is Unknown"));
            }
            Some(c) => problems.push(format!(
                "* Node.{t}: {}",
                c.message
                    .clone()
                    .unwrap_or_else(|| format!("Condition is {}", c.status))
            )),
            None if t == "Ready" => {
                unknown = true;
                problems.push("* Node.Ready: Condition not yet reported".into());
            }
            None => {}
        }
    }
    let healthy = if problems.is_empty() {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::True,
            api::machine::reasons::NODE_HEALTHY,
        )
    } else if unknown && problems.len() == 1 {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::Unknown,
            api::machine::reasons::NODE_HEALTHY_UNKNOWN,
        )
        .message(problems.join("\n"))
    } else {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::False,
            api::machine::reasons::NODE_NOT_HEALTHY,
        )
        .message(problems.join("\n"))
    };
    vec![ready, healthy]
}

/// Available: Ready for at least minReadySeconds. Returns the condition and when to look again.
/// The Ready and Available conditions of a Machine being deleted, as upstream sums them up
/// while a deletion step (`stage`, the Deleting condition's reason) is in progress: not ready,
/// saying what is going on, so that the MachineSet, MachineDeployment and `describe` show it.
pub fn deleting_summary(machine: &Machine, stage: &str) -> Vec<NewCondition> {
    let ready = NewCondition::new(
        conditions::types::READY,
        Status::False,
        conditions::reasons::NOT_READY,
    )
    .message(format!(
        "* Deleting: Machine deletion in progress, stage: {stage}"
    ));
    let list = machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let (available, _) = available_condition(machine, &list, &ready);
    vec![ready, available]
}

fn available_condition(
    machine: &Machine,
    list: &[Condition],
    ready: &NewCondition,
) -> (NewCondition, Option<Duration>) {
    if ready.status != Status::True {
        return (
            NewCondition::new(
                conditions::types::AVAILABLE,
                Status::False,
                conditions::reasons::NOT_READY,
            ),
            None,
        );
    }
    let min = i64::from(machine.spec.min_ready_seconds.unwrap_or(0));
    let since = conditions::get(list, "Ready")
        .filter(|c| c.status == "True")
        .map(|c| common::seconds_since(&c.last_transition_time))
        .unwrap_or(0);
    if since >= min {
        (
            NewCondition::new(
                conditions::types::AVAILABLE,
                Status::True,
                conditions::reasons::AVAILABLE,
            ),
            None,
        )
    } else {
        (
            NewCondition::new(
                conditions::types::AVAILABLE,
                Status::False,
                api::machine::reasons::WAITING_FOR_MIN_READY_SECONDS,
            ),
            Some(Duration::from_secs((min - since) as u64)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(spec: Value, status: Value) -> Machine {
        let mut full = json!({"clusterName": "c", "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m"}}, "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachine", "name": "m"}});
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        serde_json::from_value(json!({"metadata": {"name": "m", "namespace": "ns", "generation": 1}, "spec": full, "status": status})).unwrap()
    }

    fn provider(kind: &str, spec: Value, status: Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "x/v1", "kind": kind, "metadata": {"name": "m"}, "spec": spec, "status": status})).unwrap()
    }

    fn ready_node() -> Arc<Node> {
        Arc::new(serde_json::from_value(json!({
            "metadata": {"name": "node-m"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.30.4", "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}},
        })).unwrap())
    }

    fn get<'a>(status: &'a MachineStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
        let c = common::expect_condition(status.conditions.as_ref(), type_, "the status");
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn a_machine_being_deleted_is_not_ready_and_says_which_stage() {
        let m = machine(
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-12-06T08:00:00Z"}]}),
        );
        let summary = deleting_summary(&m, "DrainingNode");
        let found: Vec<(&str, Status, &str, &str)> = summary
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status,
                    c.reason.as_str(),
                    c.message.as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "Ready",
                    Status::False,
                    "NotReady",
                    "* Deleting: Machine deletion in progress, stage: DrainingNode"
                ),
                ("Available", Status::False, "NotReady", ""),
            ]
        );
    }

    #[test]
    fn status_table() {
        let created = || {
            Some(Some(provider(
                "KubeadmConfig",
                json!({}),
                json!({"initialization": {"dataSecretCreated": true}, "dataSecretName": "m"}),
            )))
        };
        let provisioned = || {
            Some(provider(
                "InMemoryMachine",
                json!({"providerID": "in-memory://ns/m"}),
                json!({"initialization": {"provisioned": true}, "addresses": [{"type": "InternalIP", "address": "10.0.0.4"}]}),
            ))
        };
        let with_data_and_id = json!({"bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m"}, "dataSecretName": "m"}, "providerID": "in-memory://ns/m"});
        struct Case {
            name: &'static str,
            machine: Machine,
            providers: Providers,
            node: NodeState,
            phase: &'static str,
            /// (condition type, status, reason, message); "*" matches any message.
            conditions: Vec<(&'static str, &'static str, &'static str, &'static str)>,
        }
        let cases = vec![
            Case {
                name: "bootstrapped, provisioned, its Node ready",
                machine: machine(with_data_and_id.clone(), json!({})),
                providers: Providers {
                    bootstrap: created(),
                    infrastructure: provisioned(),
                },
                node: NodeState::Found(ready_node()),
                phase: "Running",
                conditions: vec![
                    ("BootstrapConfigReady", "True", "Ready", ""),
                    ("InfrastructureReady", "True", "Ready", ""),
                    ("NodeReady", "True", "NodeReady", ""),
                    ("NodeHealthy", "True", "NodeHealthy", ""),
                    ("Ready", "True", "Ready", ""),
                    ("Available", "True", "Available", ""),
                    ("UpToDate", "True", "UpToDate", ""),
                ],
            },
            Case {
                name: "waiting for the infrastructure",
                machine: machine(
                    json!({"bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m"}, "dataSecretName": "m"}}),
                    json!({}),
                ),
                providers: Providers {
                    bootstrap: created(),
                    infrastructure: Some(provider("InMemoryMachine", json!({}), json!({}))),
                },
                node: NodeState::WaitingForProviderId,
                phase: "Provisioning",
                conditions: vec![
                    (
                        "InfrastructureReady",
                        "False",
                        "NotReady",
                        "InMemoryMachine status.initialization.provisioned is false",
                    ),
                    (
                        "NodeHealthy",
                        "Unknown",
                        "InspectionFailed",
                        "Waiting for InMemoryMachine to report spec.providerID",
                    ),
                    ("Ready", "False", "NotReady", "*"),
                    ("Available", "False", "NotReady", ""),
                ],
            },
            Case {
                name: "the bootstrap config and infrastructure machine do not exist",
                machine: machine(json!({}), json!({})),
                providers: Providers {
                    bootstrap: Some(None),
                    infrastructure: None,
                },
                node: NodeState::WaitingForProviderId,
                phase: "Pending",
                conditions: vec![
                    (
                        "BootstrapConfigReady",
                        "False",
                        "ObjectDoesNotExist",
                        "KubeadmConfig does not exist",
                    ),
                    (
                        "InfrastructureReady",
                        "False",
                        "ObjectDoesNotExist",
                        "InMemoryMachine does not exist",
                    ),
                ],
            },
            Case {
                name: "a data Secret named directly needs no config",
                machine: machine(json!({"bootstrap": {"dataSecretName": "given"}}), json!({})),
                providers: Providers {
                    bootstrap: None,
                    infrastructure: None,
                },
                node: NodeState::WaitingForProviderId,
                phase: "Provisioning",
                conditions: vec![("BootstrapConfigReady", "True", "DataSecretProvided", "")],
            },
            Case {
                name: "the Node is not there (yet)",
                machine: machine(with_data_and_id.clone(), json!({})),
                providers: Providers {
                    bootstrap: created(),
                    infrastructure: provisioned(),
                },
                node: NodeState::Absent,
                phase: "Provisioned",
                conditions: vec![
                    (
                        "NodeReady",
                        "Unknown",
                        "NodeDoesNotExist",
                        "Node does not exist",
                    ),
                    (
                        "NodeHealthy",
                        "Unknown",
                        "NodeDoesNotExist",
                        "Node does not exist",
                    ),
                ],
            },
            Case {
                name: "the workload cluster cannot be reached",
                machine: machine(with_data_and_id.clone(), json!({})),
                providers: Providers {
                    bootstrap: created(),
                    infrastructure: provisioned(),
                },
                node: NodeState::Unreachable("connection refused".into()),
                phase: "Provisioned",
                conditions: vec![(
                    "NodeHealthy",
                    "Unknown",
                    "ConnectionDown",
                    "Cannot reach the workload cluster: connection refused",
                )],
            },
            Case {
                name: "a worker waits for the control plane before it looks for its Node",
                machine: machine(with_data_and_id, json!({})),
                providers: Providers {
                    bootstrap: created(),
                    infrastructure: provisioned(),
                },
                node: NodeState::WaitingForControlPlane("in-memory://ns/m".into()),
                phase: "Provisioned",
                conditions: vec![(
                    "NodeHealthy",
                    "Unknown",
                    "InspectionFailed",
                    "Waiting for Cluster control plane to be initialized to find the Node with spec.providerID in-memory://ns/m",
                )],
            },
        ];
        for case in cases {
            let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
            let (status, wait) = compute(&case.machine, paused, &case.providers, &case.node, None);
            let name = case.name;
            assert_eq!(status.phase.as_deref(), Some(case.phase), "{name}");
            assert_eq!(wait, None, "{name}");
            for (type_, want, reason, message) in case.conditions {
                let (s, r, m) = get(&status, type_);
                assert_eq!((s, r), (want, reason), "{name}: {type_}");
                if message != "*" {
                    assert_eq!(m, message, "{name}: {type_}");
                }
            }
        }
    }

    #[test]
    fn readiness_gates_hold_ready_with_their_polarity() {
        let now = Timestamp::now().to_string();
        let providers = Providers {
            bootstrap: None,
            infrastructure: Some(provider(
                "InMemoryMachine",
                json!({"providerID": "in-memory://ns/m"}),
                json!({"initialization": {"provisioned": true}}),
            )),
        };
        let condition = |t: &str, s: &str, message: &str| json!({"type": t, "status": s, "reason": "R", "message": message, "lastTransitionTime": now});
        let gates = json!([{"conditionType": "EtcdMemberHealthy"}, {"conditionType": "Degraded", "polarity": "Negative"}]);
        let ready = |conds: Vec<Value>| {
            let m = machine(
                json!({"bootstrap": {"dataSecretName": "given"}, "providerID": "in-memory://ns/m", "readinessGates": gates}),
                json!({"conditions": conds}),
            );
            let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
            let (status, _) = compute(
                &m,
                paused,
                &providers,
                &NodeState::Found(ready_node()),
                None,
            );
            let (s, _, message) = get(&status, "Ready");
            (s.to_string(), message.to_string())
        };
        let learner = ready(vec![
            condition(
                "EtcdMemberHealthy",
                "False",
                "Waiting for learner etcd member to be promoted",
            ),
            condition("Degraded", "False", ""),
        ]);
        assert_eq!(
            learner,
            (
                "False".into(),
                "* EtcdMemberHealthy: Waiting for learner etcd member to be promoted".into()
            )
        );
        let degraded = ready(vec![
            condition("EtcdMemberHealthy", "True", ""),
            condition("Degraded", "True", "disk slow"),
        ]);
        assert_eq!(degraded, ("False".into(), "* Degraded: disk slow".into()));
        let healthy = ready(vec![
            condition("EtcdMemberHealthy", "True", ""),
            condition("Degraded", "False", ""),
        ]);
        assert_eq!(healthy.0, "True");
        // A gate nobody has reported yet holds the Machine too.
        assert_eq!(ready(vec![condition("Degraded", "False", "")]).0, "Unknown");
    }

    #[test]
    fn available_waits_for_min_ready_seconds() {
        let now = Timestamp::now().to_string();
        let m = machine(
            json!({"bootstrap": {"dataSecretName": "given"}, "providerID": "in-memory://ns/m", "minReadySeconds": 60}),
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": now}]}),
        );
        let providers = Providers {
            bootstrap: None,
            infrastructure: Some(provider(
                "InMemoryMachine",
                json!({"providerID": "in-memory://ns/m"}),
                json!({"initialization": {"provisioned": true}}),
            )),
        };
        let paused = NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused");
        let (status, wait) = compute(
            &m,
            paused,
            &providers,
            &NodeState::Found(ready_node()),
            None,
        );
        assert_eq!(get(&status, "Available").1, "WaitingForMinReadySeconds");
        let wait = wait.expect("a time to look again");
        assert!(
            wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        assert_eq!(status.addresses, None, "no addresses reported");
        assert_eq!(status.node_ref.map(|n| n.name).as_deref(), Some("node-m"));
    }

    #[test]
    fn phase_table() {
        let base = json!({"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}});
        let machine = |spec: Value, status: Value| -> Machine {
            serde_json::from_value(
                json!({"metadata": {"name": "m"}, "spec": spec, "status": status}),
            )
            .unwrap()
        };
        let mut with_id = base.clone();
        with_id["providerID"] = json!("in-memory://ns/m");
        for (spec, status, want) in [
            (base.clone(), json!({}), "Pending"),
            (
                base.clone(),
                json!({"initialization": {"bootstrapDataSecretCreated": true}}),
                "Provisioning",
            ),
            (
                with_id.clone(),
                json!({"initialization": {"bootstrapDataSecretCreated": true}}),
                "Provisioned",
            ),
            (
                with_id,
                json!({"initialization": {"infrastructureProvisioned": true}, "nodeRef": {"name": "n"}}),
                "Running",
            ),
        ] {
            assert_eq!(phase(&machine(spec, status.clone())), want, "{status}");
        }
    }
}
