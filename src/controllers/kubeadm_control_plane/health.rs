//! A control plane's health as upstream's KubeadmControlPlane reads it from the workload
//! cluster: on each Machine, its Node's static Pods (`APIServerPodHealthy`,
//! `ControllerManagerPodHealthy`, `SchedulerPodHealthy`, `EtcdPodHealthy`) and its etcd member
//! (`EtcdMemberHealthy`); over the control plane, `ControlPlaneComponentsHealthy` and
//! `EtcdClusterHealthy`; and the preflight checks that hold every scaling step until the
//! Machines are healthy, so that a joining member is promoted before another one goes.
//!
//! Pure functions of what one reconcile read; `mod.rs` does the reading.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;

use super::super::machines::node_name;
use super::status::EtcdSeen;
use crate::api::Machine;
use crate::api::kubeadm_control_plane::{conditions as types, reasons};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::workload::etcd::Alarm;

/// The static Pods checked on each control-plane Node: the condition each sets, and the
/// Pod's name before `-<node>` (kubelet names a mirror Pod `<manifest name>-<node>`).
pub const COMPONENTS: [(&str, &str); 4] = [
    (types::APISERVER_POD_HEALTHY, "kube-apiserver"),
    (
        types::CONTROLLER_MANAGER_POD_HEALTHY,
        "kube-controller-manager",
    ),
    (types::SCHEDULER_POD_HEALTHY, "kube-scheduler"),
    (types::ETCD_POD_HEALTHY, "etcd"),
];

/// Every per-Machine condition this module computes, in the order they are shown; also the
/// readiness gates of control-plane Machines.
pub const MACHINE_CONDITIONS: [&str; 5] = [
    types::APISERVER_POD_HEALTHY,
    types::CONTROLLER_MANAGER_POD_HEALTHY,
    types::SCHEDULER_POD_HEALTHY,
    types::ETCD_POD_HEALTHY,
    types::ETCD_MEMBER_HEALTHY,
];

/// What one reconcile read of the workload cluster.
pub enum WorkloadSeen {
    /// The control plane is not initialized: there is nothing to inspect yet.
    NotInitialized,
    /// The workload cluster's API could not be read.
    Unreachable(String),
    Read {
        /// The control-plane Machines' Nodes by name; None for a Node the cluster does not have.
        nodes: BTreeMap<String, Option<Arc<Node>>>,
        /// kube-system's control-plane Pods.
        pods: Vec<Pod>,
    },
}

/// The health of a control plane: each Machine's conditions, and the two aggregates.
pub struct Health {
    pub machines: BTreeMap<String, Vec<NewCondition>>,
    pub components: NewCondition,
    pub etcd_cluster: NewCondition,
}

pub fn assess(machines: &[Machine], workload: &WorkloadSeen, etcd: &EtcdSeen) -> Health {
    let per_machine: BTreeMap<String, Vec<NewCondition>> = machines
        .iter()
        .map(|m| (m.name_any(), machine_conditions(m, workload, etcd)))
        .collect();
    let live: Vec<&Machine> = machines.iter().filter(|m| !common::deleting(*m)).collect();
    Health {
        components: components_condition(&live, &per_machine, workload),
        etcd_cluster: etcd_cluster_condition(&live, &per_machine, workload, etcd),
        machines: per_machine,
    }
}

/// All five conditions of one Machine.
fn machine_conditions(
    machine: &Machine,
    workload: &WorkloadSeen,
    etcd: &EtcdSeen,
) -> Vec<NewCondition> {
    let all = |status: Status, reason: &str, message: &str| -> Vec<NewCondition> {
        MACHINE_CONDITIONS
            .iter()
            .map(|t| NewCondition::new(t, status, reason).message(message))
            .collect()
    };
    if common::deleting(machine) {
        return all(
            Status::False,
            reasons::MACHINE_DELETING,
            "Machine is deleting",
        );
    }
    let read = match workload {
        WorkloadSeen::NotInitialized => {
            return all(
                Status::Unknown,
                reasons::INSPECTION_FAILED,
                "Waiting for Cluster control plane to be initialized",
            );
        }
        WorkloadSeen::Unreachable(e) => Err(e),
        WorkloadSeen::Read { nodes, pods } => Ok((nodes, pods)),
    };
    let Some(node) = node_name(machine) else {
        return all(
            Status::Unknown,
            reasons::INSPECTION_FAILED,
            "Waiting for the Machine's Node to register",
        );
    };
    let mut conds: Vec<NewCondition> = COMPONENTS
        .iter()
        .map(|(t, pod)| match &read {
            Ok((nodes, pods)) => component_condition(t, pod, node, nodes, pods),
            Err(e) => NewCondition::new(t, Status::Unknown, reasons::CONNECTION_DOWN)
                .message(format!("Cannot read the workload cluster: {e}")),
        })
        .collect();
    conds.push(member_condition(node, etcd));
    conds
}

/// One static Pod's condition on `node`, from the workload cluster's Nodes and Pods.
fn component_condition(
    type_: &str,
    pod: &str,
    node: &str,
    nodes: &BTreeMap<String, Option<Arc<Node>>>,
    pods: &[Pod],
) -> NewCondition {
    let unknown = |reason: &str, message: String| {
        NewCondition::new(type_, Status::Unknown, reason).message(message)
    };
    let Some(Some(node_object)) = nodes.get(node) else {
        return unknown(
            reasons::INSPECTION_FAILED,
            format!("Node {node} does not exist"),
        );
    };
    if unreachable_node(node_object) {
        return unknown(
            reasons::INSPECTION_FAILED,
            format!("Node {node} is unreachable"),
        );
    }
    let name = format!("{pod}-{node}");
    match pods.iter().find(|p| p.name_any() == name) {
        _ if node_ready(node_object) == Status::Unknown => unknown(
            reasons::INSPECTION_FAILED,
            "Node Ready condition is Unknown, Pod data might be stale".into(),
        ),
        None => NewCondition::new(type_, Status::False, reasons::POD_DOES_NOT_EXIST)
            .message("Pod does not exist"),
        Some(p) => pod_condition(type_, p),
    }
}

fn node_ready(node: &Node) -> Status {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => Status::True,
        Some("False") => Status::False,
        _ => Status::Unknown,
    }
}

fn unreachable_node(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
        })
}

/// A static Pod's health from its phase, readiness and containers, as upstream reads it.
pub fn pod_condition(type_: &str, pod: &Pod) -> NewCondition {
    let new = |status: Status, reason: &str, message: String| {
        NewCondition::new(type_, status, reason).message(message)
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return new(
            Status::False,
            reasons::MACHINE_DELETING,
            "Pod is deleting".into(),
        );
    }
    let status = pod.status.clone().unwrap_or_default();
    let pod_condition_true = |t: &str| {
        status
            .conditions
            .as_ref()
            .is_some_and(|c| c.iter().any(|c| c.type_ == t && c.status == "True"))
    };
    let containers = status.container_statuses.clone().unwrap_or_default();
    let waiting: Vec<String> = containers
        .iter()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .map(|w| match (&w.reason, &w.message) {
            (Some(r), Some(m)) => format!("{r}: {m}"),
            (Some(r), None) => r.clone(),
            (None, Some(m)) => m.clone(),
            (None, None) => "waiting".into(),
        })
        .collect();
    let failed_before = containers.iter().any(|c| {
        c.last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code != 0)
    });
    let terminated = containers
        .iter()
        .any(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()));
    match status.phase.as_deref() {
        Some("Running") if pod_condition_true("Ready") => {
            new(Status::True, reasons::POD_RUNNING, String::new())
        }
        Some("Running") if !waiting.is_empty() => new(
            Status::False,
            if failed_before {
                reasons::POD_FAILED
            } else {
                reasons::POD_PROVISIONING
            },
            format!("Waiting: {}", waiting.join("; ")),
        ),
        Some("Running") if terminated => new(
            Status::False,
            reasons::POD_FAILED,
            "All the containers have been terminated".into(),
        ),
        Some("Running") => new(
            Status::False,
            reasons::POD_PROVISIONING,
            "Waiting for startup or readiness probes".into(),
        ),
        Some("Pending") => new(
            Status::False,
            reasons::POD_PROVISIONING,
            if !pod_condition_true("PodScheduled") {
                "Waiting to be scheduled".into()
            } else if !pod_condition_true("Initialized") {
                "Running init containers".into()
            } else if !waiting.is_empty() {
                format!("Waiting: {}", waiting.join("; "))
            } else {
                "Waiting for the containers to start".into()
            },
        ),
        Some("Succeeded") | Some("Failed") => new(
            Status::False,
            reasons::POD_FAILED,
            "All the containers have been terminated".into(),
        ),
        other => new(
            Status::Unknown,
            reasons::INSPECTION_FAILED,
            format!("Pod phase is {}", other.unwrap_or("not reported")),
        ),
    }
}

/// `EtcdMemberHealthy` of the Machine whose Node is `node`.
fn member_condition(node: &str, etcd: &EtcdSeen) -> NewCondition {
    const TYPE: &str = types::ETCD_MEMBER_HEALTHY;
    let (members, alarms) = match etcd {
        Ok(seen) => seen,
        Err(e) => {
            return NewCondition::new(TYPE, Status::Unknown, reasons::INSPECTION_FAILED)
                .message(format!("Failed to get etcd members: {e}"));
        }
    };
    let not_healthy = |message: String| {
        NewCondition::new(TYPE, Status::False, conditions::reasons::NOT_HEALTHY).message(message)
    };
    let Some(member) = members.iter().find(|m| m.name == node) else {
        return not_healthy(format!("Etcd doesn't have an etcd member for Node {node}"));
    };
    if member.learner {
        return not_healthy("Waiting for learner etcd member to be promoted".into());
    }
    let raised: Vec<&str> = alarms
        .iter()
        .filter_map(|a| match a {
            Alarm::NoSpace { member } if member == node => Some("NOSPACE"),
            Alarm::Corrupt { member } if member == node => Some("CORRUPT"),
            _ => None,
        })
        .collect();
    if !raised.is_empty() {
        return not_healthy(format!("Etcd reports alarms: {}", raised.join(", ")));
    }
    NewCondition::new(TYPE, Status::True, conditions::reasons::HEALTHY)
}

/// The lines `* Machine m:\n  * Type: message` of the Machines whose `types` are not True,
/// and whether any of them is False (rather than only Unknown).
fn problems(
    live: &[&Machine],
    per_machine: &BTreeMap<String, Vec<NewCondition>>,
    types: &[&str],
) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut any_false = false;
    for machine in live {
        let name = machine.name_any();
        let Some(conds) = per_machine.get(&name) else {
            continue;
        };
        let bad: Vec<&NewCondition> = conds
            .iter()
            .filter(|c| types.contains(&c.type_.as_str()) && c.status != Status::True)
            .collect();
        if bad.is_empty() {
            continue;
        }
        any_false |= bad.iter().any(|c| c.status == Status::False);
        let mut text = format!("* Machine {name}:");
        for c in bad {
            text.push_str(&format!("\n  * {}: {}", c.type_, c.message));
        }
        lines.push(text);
    }
    (lines, any_false)
}

/// `ControlPlaneComponentsHealthy`: every live Machine's static Pods Running, and no
/// control-plane Node without a Machine (once every Machine has its Node).
fn components_condition(
    live: &[&Machine],
    per_machine: &BTreeMap<String, Vec<NewCondition>>,
    workload: &WorkloadSeen,
) -> NewCondition {
    const TYPE: &str = types::CONTROL_PLANE_COMPONENTS_HEALTHY;
    if matches!(workload, WorkloadSeen::NotInitialized) {
        return NewCondition::new(TYPE, Status::Unknown, conditions::reasons::HEALTH_UNKNOWN)
            .message("Waiting for Cluster control plane to be initialized");
    }
    let pod_types: Vec<&str> = COMPONENTS.iter().map(|(t, _)| *t).collect();
    let (lines, any_false) = problems(live, per_machine, &pod_types);
    aggregate(TYPE, lines, any_false)
}

/// `EtcdClusterHealthy`: every live Machine's member healthy, every member a Machine's, no alarm.
fn etcd_cluster_condition(
    live: &[&Machine],
    per_machine: &BTreeMap<String, Vec<NewCondition>>,
    workload: &WorkloadSeen,
    etcd: &EtcdSeen,
) -> NewCondition {
    const TYPE: &str = types::ETCD_CLUSTER_HEALTHY;
    if matches!(workload, WorkloadSeen::NotInitialized) {
        return NewCondition::new(TYPE, Status::Unknown, conditions::reasons::HEALTH_UNKNOWN)
            .message("Waiting for Cluster control plane to be initialized");
    }
    let (members, alarms) = match etcd {
        Ok(found) => found,
        Err(e) => {
            return NewCondition::new(TYPE, Status::Unknown, conditions::reasons::HEALTH_UNKNOWN)
                .message(format!("Waiting for etcd: {e}"));
        }
    };
    let (mut lines, mut any_false) = problems(live, per_machine, &[types::ETCD_MEMBER_HEALTHY]);
    for member in members {
        if member.name.is_empty() {
            lines.push(format!(
                "* etcd member {:x} has not started yet (a joining control plane's learner)",
                member.id
            ));
        } else if !live
            .iter()
            .any(|m| node_name(m) == Some(member.name.as_str()))
        {
            lines.push(format!(
                "* etcd member {} does not belong to a control-plane Machine",
                member.name
            ));
        } else {
            continue;
        }
        any_false = true;
    }
    // Alarms of members that are not a live Machine's; the Machines' own are in their lines.
    for alarm in alarms {
        let (Alarm::NoSpace { member } | Alarm::Corrupt { member }) = alarm;
        if !live.iter().any(|m| node_name(m) == Some(member.as_str())) {
            lines.push(format!("* {alarm}"));
            any_false = true;
        }
    }
    aggregate(TYPE, lines, any_false)
}

fn aggregate(type_: &str, lines: Vec<String>, any_false: bool) -> NewCondition {
    if lines.is_empty() {
        return NewCondition::new(type_, Status::True, conditions::reasons::HEALTHY);
    }
    let (status, reason) = if any_false {
        (Status::False, conditions::reasons::NOT_HEALTHY)
    } else {
        (Status::Unknown, conditions::reasons::HEALTH_UNKNOWN)
    };
    NewCondition::new(type_, status, reason).message(lines.join("\n"))
}

/// Why the control plane may not take a scaling step now (upstream's preflight checks), one
/// `* ...` line each; empty when it may. `excluded` is the Machine a scale-down would remove.
pub fn preflight(machines: &[Machine], health: &Health, excluded: Option<&str>) -> Vec<String> {
    if machines.is_empty() {
        return Vec::new();
    }
    let mut reasons = Vec::new();
    if machines.iter().any(common::deleting) {
        reasons.push("* waiting for a control plane Machine to complete deletion".to_string());
    }
    let counted = || {
        machines
            .iter()
            .filter(|m| !common::deleting(*m) && Some(m.name_any().as_str()) != excluded)
    };
    let healthy = |m: &Machine, types: &[&str]| {
        node_name(m).is_some()
            && health.machines.get(&m.name_any()).is_some_and(|conds| {
                types.iter().all(|t| {
                    conds
                        .iter()
                        .any(|c| c.type_ == *t && c.status == Status::True)
                })
            })
    };
    let pod_types: Vec<&str> = COMPONENTS.iter().map(|(t, _)| *t).collect();
    if counted().any(|m| !healthy(m, &pod_types)) {
        reasons.push("* waiting for control plane components to become healthy".to_string());
    }
    if counted().any(|m| !healthy(m, &[types::ETCD_MEMBER_HEALTHY])) {
        reasons.push("* waiting for etcd cluster to become healthy".to_string());
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::etcd::{EtcdError, Member};
    use serde_json::json;

    fn machine(name: &str, node: Option<&str>, deleting: bool) -> Machine {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "deletionTimestamp": if deleting { Some("2026-01-01T00:00:00Z") } else { None }},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"nodeRef": node.map(|n| json!({"name": n}))},
        }))
        .unwrap()
    }

    fn node(name: &str, ready: &str, unreachable: bool) -> Arc<Node> {
        let taints = if unreachable {
            json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            }))
            .unwrap(),
        )
    }

    /// A Pod in `phase`, Ready or not, its container waiting for `waiting` and last exited
    /// with `last_exit`.
    fn pod(
        name: &str,
        phase: &str,
        ready: bool,
        waiting: Option<&str>,
        last_exit: Option<i32>,
    ) -> Pod {
        let state = match waiting {
            Some(reason) => json!({"waiting": {"reason": reason}}),
            None => json!({"running": {}}),
        };
        let last = match last_exit {
            Some(code) => json!({"terminated": {"exitCode": code}}),
            None => json!({}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system"},
            "status": {
                "phase": phase,
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"}, {"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": ready, "restartCount": 0, "state": state, "lastState": last}],
            },
        }))
        .unwrap()
    }

    fn running_pods(node: &str) -> Vec<Pod> {
        COMPONENTS
            .iter()
            .map(|(_, p)| pod(&format!("{p}-{node}"), "Running", true, None, None))
            .collect()
    }

    fn members(names: &[(&str, bool)]) -> EtcdSeen {
        Ok((
            names
                .iter()
                .enumerate()
                .map(|(i, (n, learner))| Member {
                    id: i as u64 + 10,
                    name: n.to_string(),
                    learner: *learner,
                })
                .collect(),
            Vec::new(),
        ))
    }

    fn condition<'a>(health: &'a Health, machine: &str, type_: &str) -> &'a NewCondition {
        health.machines[machine]
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    #[test]
    fn pods_read_as_upstream_reads_them() {
        // (pod, status, reason, message)
        let table = [
            (
                pod("p", "Running", true, None, None),
                Status::True,
                "Running",
                "",
            ),
            (
                pod("p", "Running", false, Some("CrashLoopBackOff"), Some(1)),
                Status::False,
                "Failed",
                "Waiting: CrashLoopBackOff",
            ),
            (
                pod("p", "Running", false, Some("ContainerCreating"), None),
                Status::False,
                "Provisioning",
                "Waiting: ContainerCreating",
            ),
            (
                pod("p", "Running", false, None, None),
                Status::False,
                "Provisioning",
                "Waiting for startup or readiness probes",
            ),
            (
                pod("p", "Pending", false, Some("ContainerCreating"), None),
                Status::False,
                "Provisioning",
                "Waiting: ContainerCreating",
            ),
            (
                pod("p", "Failed", false, None, None),
                Status::False,
                "Failed",
                "All the containers have been terminated",
            ),
        ];
        for (p, status, reason, message) in table {
            let c = pod_condition("EtcdPodHealthy", &p);
            assert_eq!(
                (c.status, c.reason.as_str(), c.message.as_str()),
                (status, reason, message)
            );
        }
    }

    #[test]
    fn a_joining_learner_holds_the_next_scaling_step() {
        let machines = vec![
            machine("a", Some("a"), false),
            machine("b", Some("b"), false),
        ];
        let mut pods = running_pods("a");
        pods.extend(running_pods("b"));
        let workload = WorkloadSeen::Read {
            nodes: BTreeMap::from([
                ("a".to_string(), Some(node("a", "True", false))),
                ("b".to_string(), Some(node("b", "True", false))),
            ]),
            pods,
        };
        let health = assess(&machines, &workload, &members(&[("a", false), ("b", true)]));
        let member = condition(&health, "b", "EtcdMemberHealthy");
        assert_eq!(member.status, Status::False);
        assert_eq!(
            member.message,
            "Waiting for learner etcd member to be promoted"
        );
        assert_eq!(health.components.status, Status::True);
        assert_eq!(health.etcd_cluster.status, Status::False);
        assert_eq!(
            health.etcd_cluster.message,
            "* Machine b:\n  * EtcdMemberHealthy: Waiting for learner etcd member to be promoted"
        );
        assert_eq!(
            preflight(&machines, &health, None),
            vec!["* waiting for etcd cluster to become healthy"]
        );
        // Once promoted, nothing holds the control plane.
        let health = assess(
            &machines,
            &workload,
            &members(&[("a", false), ("b", false)]),
        );
        assert!(preflight(&machines, &health, None).is_empty());
        assert_eq!(health.etcd_cluster.status, Status::True);
    }

    #[test]
    fn machine_states_table() {
        let workload = |nodes: Vec<(&str, Option<Arc<Node>>)>, pods: Vec<Pod>| WorkloadSeen::Read {
            nodes: nodes.into_iter().map(|(n, o)| (n.to_string(), o)).collect(),
            pods,
        };
        // (case, machine, workload, etcd, condition, status, reason, message)
        type Case = (
            &'static str,
            Machine,
            WorkloadSeen,
            EtcdSeen,
            &'static str,
            Status,
            &'static str,
            &'static str,
        );
        let table: Vec<Case> = vec![
            (
                "deleting",
                machine("a", Some("a"), true),
                workload(vec![], vec![]),
                members(&[("a", false)]),
                "APIServerPodHealthy",
                Status::False,
                "Deleting",
                "Machine is deleting",
            ),
            (
                "not initialized",
                machine("a", None, false),
                WorkloadSeen::NotInitialized,
                members(&[]),
                "EtcdMemberHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Waiting for Cluster control plane to be initialized",
            ),
            (
                "no Node yet",
                machine("a", None, false),
                workload(vec![], vec![]),
                members(&[]),
                "SchedulerPodHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Waiting for the Machine's Node to register",
            ),
            (
                "workload unreachable",
                machine("a", Some("a"), false),
                WorkloadSeen::Unreachable("connection refused".into()),
                members(&[("a", false)]),
                "APIServerPodHealthy",
                Status::Unknown,
                "ConnectionDown",
                "Cannot read the workload cluster: connection refused",
            ),
            (
                "Node gone",
                machine("a", Some("a"), false),
                workload(vec![("a", None)], vec![]),
                members(&[("a", false)]),
                "EtcdPodHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Node a does not exist",
            ),
            (
                "Node unreachable",
                machine("a", Some("a"), false),
                workload(
                    vec![("a", Some(node("a", "Unknown", true)))],
                    running_pods("a"),
                ),
                members(&[("a", false)]),
                "EtcdPodHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Node a is unreachable",
            ),
            (
                "Node Ready Unknown",
                machine("a", Some("a"), false),
                workload(
                    vec![("a", Some(node("a", "Unknown", false)))],
                    running_pods("a"),
                ),
                members(&[("a", false)]),
                "EtcdPodHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Node Ready condition is Unknown, Pod data might be stale",
            ),
            (
                "Pod missing",
                machine("a", Some("a"), false),
                workload(vec![("a", Some(node("a", "True", false)))], vec![]),
                members(&[("a", false)]),
                "ControllerManagerPodHealthy",
                Status::False,
                "DoesNotExist",
                "Pod does not exist",
            ),
            (
                "no member",
                machine("a", Some("a"), false),
                workload(
                    vec![("a", Some(node("a", "True", false)))],
                    running_pods("a"),
                ),
                members(&[("b", false)]),
                "EtcdMemberHealthy",
                Status::False,
                "NotHealthy",
                "Etcd doesn't have an etcd member for Node a",
            ),
            (
                "an alarm",
                machine("a", Some("a"), false),
                workload(
                    vec![("a", Some(node("a", "True", false)))],
                    running_pods("a"),
                ),
                Ok((
                    vec![Member {
                        id: 1,
                        name: "a".into(),
                        learner: false,
                    }],
                    vec![Alarm::NoSpace { member: "a".into() }],
                )),
                "EtcdMemberHealthy",
                Status::False,
                "NotHealthy",
                "Etcd reports alarms: NOSPACE",
            ),
            (
                "etcd unreachable",
                machine("a", Some("a"), false),
                workload(
                    vec![("a", Some(node("a", "True", false)))],
                    running_pods("a"),
                ),
                Err(EtcdError::Unreachable("timed out".into())),
                "EtcdMemberHealthy",
                Status::Unknown,
                "InspectionFailed",
                "Failed to get etcd members: etcd cannot be reached: timed out",
            ),
        ];
        for (case, m, workload, etcd, type_, status, reason, message) in table {
            let health = assess(std::slice::from_ref(&m), &workload, &etcd);
            let c = condition(&health, "a", type_);
            assert_eq!(
                (c.status, c.reason.as_str(), c.message.as_str()),
                (status, reason, message),
                "{case}"
            );
        }
    }

    #[test]
    fn the_aggregates_name_the_machines_and_the_strays() {
        let machines = vec![
            machine("a", Some("a"), false),
            machine("old", Some("old"), true),
        ];
        let mut pods = running_pods("a");
        pods.retain(|p| !p.name_any().starts_with("kube-scheduler"));
        let workload = WorkloadSeen::Read {
            nodes: BTreeMap::from([("a".to_string(), Some(node("a", "True", false)))]),
            pods,
        };
        let etcd: EtcdSeen = Ok((
            vec![
                Member {
                    id: 1,
                    name: "a".into(),
                    learner: false,
                },
                Member {
                    id: 2,
                    name: "stray".into(),
                    learner: false,
                },
                Member {
                    id: 0xab,
                    name: String::new(),
                    learner: true,
                },
            ],
            vec![Alarm::Corrupt {
                member: "stray".into(),
            }],
        ));
        let health = assess(&machines, &workload, &etcd);
        assert_eq!(health.components.status, Status::False);
        assert_eq!(
            health.components.message,
            "* Machine a:\n  * SchedulerPodHealthy: Pod does not exist"
        );
        assert_eq!(
            health.etcd_cluster.message,
            "* etcd member stray does not belong to a control-plane Machine\n* etcd member ab has not started yet (a joining control plane's learner)\n* etcd member stray reports corrupt data"
        );
        assert_eq!(
            preflight(&machines, &health, None),
            vec![
                "* waiting for a control plane Machine to complete deletion",
                "* waiting for control plane components to become healthy"
            ]
        );
    }
}
