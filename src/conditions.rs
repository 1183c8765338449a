//! v1beta2 conditions (`metav1.Condition`) the way every Cluster API controller keeps them:
//! set, get, mirror a child's condition, aggregate one condition over many objects, and
//! summarise several conditions of one object into one whose message says what is wrong.
//!
//! The rules are upstream's (`util/conditions`): the same polarity, the same priorities (issue,
//! unknown, info), the same message shapes, so that `describe cluster` and upstream tooling read
//! our objects the way they read upstream's.
//!
//! ```
//! use capictl::conditions::{self, NewCondition, Status};
//! use k8s_openapi::jiff::Timestamp;
//!
//! let mut list = Vec::new();
//! let now = Timestamp::from_second(1_700_000_000).unwrap();
//! conditions::set(&mut list, 3, NewCondition::new("Ready", Status::False, "NotReady").message("Waiting for the Node"), now);
//! assert!(!conditions::is_true(&list, "Ready"));
//! assert_eq!(list[0].observed_generation, Some(3));
//! ```

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Condition types every Cluster API kind may carry.
pub mod types {
    pub const AVAILABLE: &str = "Available";
    pub const READY: &str = "Ready";
    pub const UP_TO_DATE: &str = "UpToDate";
    pub const PAUSED: &str = "Paused";
    pub const DELETING: &str = "Deleting";
    pub const ROLLING_OUT: &str = "RollingOut";
    pub const SCALING_UP: &str = "ScalingUp";
    pub const SCALING_DOWN: &str = "ScalingDown";
    pub const UPDATING: &str = "Updating";
    pub const REMEDIATING: &str = "Remediating";
    /// The Machines of a MachineSet, MachineDeployment or control plane.
    pub const MACHINES_READY: &str = "MachinesReady";
    pub const MACHINES_UP_TO_DATE: &str = "MachinesUpToDate";
}

/// Reasons shared by many condition types and kinds.
pub mod reasons {
    pub const NOT_YET_REPORTED: &str = "NotYetReported";
    pub const ISSUES_REPORTED: &str = "IssuesReported";
    pub const UNKNOWN_REPORTED: &str = "UnknownReported";
    pub const INFO_REPORTED: &str = "InfoReported";
    pub const INTERNAL_ERROR: &str = "InternalError";
    pub const NO_REASON_REPORTED: &str = "NoReasonReported";
    // What conditions of many kinds say: available or not, rolling out, scaling, …
    pub const AVAILABLE: &str = "Available";
    pub const NOT_AVAILABLE: &str = "NotAvailable";
    pub const AVAILABLE_UNKNOWN: &str = "AvailableUnknown";
    pub const READY: &str = "Ready";
    pub const NOT_READY: &str = "NotReady";
    pub const READY_UNKNOWN: &str = "ReadyUnknown";
    pub const UP_TO_DATE: &str = "UpToDate";
    pub const NOT_UP_TO_DATE: &str = "NotUpToDate";
    pub const UP_TO_DATE_UNKNOWN: &str = "UpToDateUnknown";
    pub const NOT_DELETING: &str = "NotDeleting";
    pub const PAUSED: &str = "Paused";
    pub const NOT_PAUSED: &str = "NotPaused";
    /// Another management cluster holds the workload cluster's claim.
    pub const CLAIMED_ELSEWHERE: &str = "ClaimedByAnotherManagementCluster";
    /// The Cluster was last claimed elsewhere and its workload cluster cannot be asked.
    pub const CLAIM_NOT_CONFIRMED: &str = "ClaimNotConfirmed";
    /// This management cluster took the claim and waits for the previous holder to notice.
    pub const TAKING_OVER: &str = "TakingOver";
    /// This management cluster could not renew its claim for longer than it may.
    pub const CLAIM_LAPSED: &str = "ClaimLapsed";
    pub const ROLLING_OUT: &str = "RollingOut";
    pub const NOT_ROLLING_OUT: &str = "NotRollingOut";
    pub const ROLLING_OUT_UNKNOWN: &str = "RollingOutUnknown";
    pub const SCALING_UP: &str = "ScalingUp";
    pub const NOT_SCALING_UP: &str = "NotScalingUp";
    pub const SCALING_UP_UNKNOWN: &str = "ScalingUpUnknown";
    pub const SCALING_DOWN: &str = "ScalingDown";
    pub const NOT_SCALING_DOWN: &str = "NotScalingDown";
    pub const SCALING_DOWN_UNKNOWN: &str = "ScalingDownUnknown";
    pub const REMEDIATING: &str = "Remediating";
    pub const NOT_REMEDIATING: &str = "NotRemediating";
    pub const REMEDIATING_UNKNOWN: &str = "RemediatingUnknown";
    pub const OBJECT_DOES_NOT_EXIST: &str = "ObjectDoesNotExist";
    pub const HEALTHY: &str = "Healthy";
    pub const NOT_HEALTHY: &str = "NotHealthy";
    pub const HEALTH_UNKNOWN: &str = "HealthUnknown";
    pub const MACHINE_DELETION_IN_PROGRESS: &str = "MachineDeletionInProgress";
    pub const WAITING_FOR_WORKERS_DELETION: &str = "WaitingForWorkersDeletion";
    pub const WAITING_FOR_MACHINE_DELETION: &str = "WaitingForMachineDeletion";
    pub const NO_REPLICAS: &str = "NoReplicas";
    pub const WAITING_FOR_INFRASTRUCTURE_DELETION: &str = "WaitingForInfrastructureDeletion";
}

/// The message for internal errors, which are only in the controller's log.
pub const INTERNAL_ERROR_MESSAGE: &str = "Please check controller logs for errors";

/// The order conditions are kept in, as upstream sorts them; other types come after these in
/// alphabetical order, then Paused and Deleting last.
const ORDER: &[&str] = &[
    "Available",
    "Ready",
    "UpToDate",
    "RemoteConnectionProbe",
    "BootstrapConfigReady",
    "InfrastructureReady",
    "ControlPlaneInitialized",
    "ControlPlaneAvailable",
    "WorkersAvailable",
    "CertificatesAvailable",
    "Initialized",
    "EtcdClusterHealthy",
    "ControlPlaneComponentsHealthy",
    "NodeHealthy",
    "NodeReady",
    "NodeKubeadmLabelsAndTaintsSet",
    "EtcdPodHealthy",
    "EtcdMemberHealthy",
    "APIServerPodHealthy",
    "ControllerManagerPodHealthy",
    "SchedulerPodHealthy",
    "HealthCheckSucceeded",
    "OwnerRemediated",
    "TopologyReconciled",
    "Updating",
    "RollingOut",
    "Remediating",
    "ScalingDown",
    "ScalingUp",
    "MachinesReady",
    "ControlPlaneMachinesReady",
    "WorkerMachinesReady",
    "MachinesUpToDate",
    "ControlPlaneMachinesUpToDate",
    "WorkerMachinesUpToDate",
];
const LAST: &[&str] = &["Paused", "Deleting"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// Parses a condition's status; anything but True or False is Unknown.
    pub fn parse(s: &str) -> Status {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }
}

/// Whether True is good news (positive) or bad news (negative) for a condition type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    Positive,
    Negative,
}

/// Types whose True means something is in progress or wrong.
const NEGATIVE_TYPES: &[&str] = &[
    "Paused",
    "Deleting",
    "RollingOut",
    "ScalingUp",
    "ScalingDown",
    "Updating",
    "Remediating",
];

/// The polarity of a condition type.
pub fn polarity(condition_type: &str) -> Polarity {
    if NEGATIVE_TYPES.contains(&condition_type) {
        Polarity::Negative
    } else {
        Polarity::Positive
    }
}

/// How a condition counts when several are merged into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Issue,
    Unknown,
    Info,
}

/// A condition's priority, given its own type's polarity: positive False or negative True is an
/// issue, Unknown is unknown, anything else is information.
pub fn priority(condition_type: &str, status: Status) -> Priority {
    priority_with(polarity(condition_type), status)
}

fn priority_with(polarity: Polarity, status: Status) -> Priority {
    match (polarity, status) {
        (_, Status::Unknown) => Priority::Unknown,
        (Polarity::Positive, Status::False) | (Polarity::Negative, Status::True) => Priority::Issue,
        _ => Priority::Info,
    }
}

/// A condition as a controller computes it, before the time and generation are stamped on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCondition {
    pub type_: String,
    pub status: Status,
    pub reason: String,
    pub message: String,
    /// Kept when mirroring, so the child's transition time shows through.
    pub last_transition_time: Option<Timestamp>,
}

impl NewCondition {
    pub fn new(type_: &str, status: Status, reason: &str) -> Self {
        NewCondition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: String::new(),
            last_transition_time: None,
        }
    }

    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// A provider object's `Ready` from the conditions it is made of: True when each is True,
    /// else False with a `* Type: message` line for each that is not.
    ///
    /// ```
    /// use capictl::conditions::{NewCondition, Status};
    /// let lb = NewCondition::new("LoadBalancerAvailable", Status::False, "NotAvailable").message("no image");
    /// let ready = NewCondition::ready_of(&[&lb]);
    /// assert_eq!((ready.status, ready.message.as_str()), (Status::False, "* LoadBalancerAvailable: no image"));
    /// ```
    pub fn ready_of(parts: &[&NewCondition]) -> NewCondition {
        let problems: Vec<String> = parts
            .iter()
            .filter(|c| c.status != Status::True)
            .map(|c| {
                let why = if c.message.is_empty() {
                    &c.reason
                } else {
                    &c.message
                };
                format!("* {}: {why}", c.type_)
            })
            .collect();
        if problems.is_empty() {
            NewCondition::new(types::READY, Status::True, reasons::READY)
        } else {
            NewCondition::new(types::READY, Status::False, reasons::NOT_READY)
                .message(problems.join("\n"))
        }
    }

    /// A condition saying whether something is going on, by upstream's convention for
    /// RollingOut, ScalingUp, ScalingDown and the like: True with the type as reason and the
    /// message saying what, or False with `Not<type>` as reason.
    ///
    /// ```
    /// use capictl::conditions::{NewCondition, Status};
    /// let c = NewCondition::activity("ScalingUp", true, || "Scaling up from 1 to 3 replicas".into());
    /// assert_eq!((c.status, c.reason.as_str()), (Status::True, "ScalingUp"));
    /// let c = NewCondition::activity("ScalingUp", false, || unreachable!());
    /// assert_eq!((c.status, c.reason.as_str(), c.message.as_str()), (Status::False, "NotScalingUp", ""));
    /// ```
    pub fn activity(type_: &str, on: bool, message: impl FnOnce() -> String) -> Self {
        if on {
            NewCondition::new(type_, Status::True, type_).message(message())
        } else {
            NewCondition::new(type_, Status::False, &format!("Not{type_}"))
        }
    }

    fn from_condition(c: &Condition) -> Self {
        NewCondition {
            type_: c.type_.clone(),
            status: Status::parse(&c.status),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: Some(c.last_transition_time.0),
        }
    }
}

/// Finds a condition by type.
pub fn get<'a>(conditions: &'a [Condition], condition_type: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == condition_type)
}

/// Whether a condition is present and True.
pub fn is_true(conditions: &[Condition], condition_type: &str) -> bool {
    get(conditions, condition_type).is_some_and(|c| c.status == "True")
}

/// Sets a condition. Its lastTransitionTime moves only when the status changes (or comes from
/// the mirrored source); the list stays in upstream's order. Returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    observed_generation: i64,
    new: NewCondition,
    now: Timestamp,
) -> bool {
    let now = truncate_to_seconds(now);
    let existing = conditions.iter().position(|c| c.type_ == new.type_);
    let status = new.status.as_str();
    let transition = match existing.map(|i| &conditions[i]) {
        Some(old) if old.status == status => old.last_transition_time.0,
        _ => new.last_transition_time.unwrap_or(now),
    };
    let condition = Condition {
        type_: new.type_,
        status: status.to_string(),
        reason: new.reason,
        message: new.message,
        observed_generation: Some(observed_generation),
        last_transition_time: Time(transition),
    };
    let changed = match existing {
        Some(i) if conditions[i] == condition => false,
        Some(i) => {
            conditions[i] = condition;
            true
        }
        None => {
            conditions.push(condition);
            true
        }
    };
    conditions.sort_by(|a, b| compare_types(&a.type_, &b.type_));
    changed
}

/// Removes a condition; returns whether it was there.
pub fn delete(conditions: &mut Vec<Condition>, condition_type: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != condition_type);
    conditions.len() != before
}

fn truncate_to_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn compare_types(a: &str, b: &str) -> Ordering {
    fn rank(t: &str) -> (usize, usize) {
        if let Some(i) = ORDER.iter().position(|o| *o == t) {
            (0, i)
        } else if let Some(i) = LAST.iter().position(|o| *o == t) {
            (2, i)
        } else {
            (1, 0)
        }
    }
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// What a merged condition is called for each outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeReasons {
    pub issue: String,
    pub unknown: String,
    pub info: String,
}

impl MergeReasons {
    pub fn new(issue: &str, unknown: &str, info: &str) -> Self {
        MergeReasons {
            issue: issue.into(),
            unknown: unknown.into(),
            info: info.into(),
        }
    }
}

impl Default for MergeReasons {
    fn default() -> Self {
        MergeReasons::new(
            reasons::ISSUES_REPORTED,
            reasons::UNKNOWN_REPORTED,
            reasons::INFO_REPORTED,
        )
    }
}

/// The status and reason of a condition merged from inputs of the given priorities.
fn merged_status(target_type: &str, worst: Priority, reasons: &MergeReasons) -> (Status, String) {
    let negative = polarity(target_type) == Polarity::Negative;
    match worst {
        Priority::Issue => (
            if negative {
                Status::True
            } else {
                Status::False
            },
            reasons.issue.clone(),
        ),
        Priority::Unknown => (Status::Unknown, reasons.unknown.clone()),
        Priority::Info => (
            if negative {
                Status::False
            } else {
                Status::True
            },
            reasons.info.clone(),
        ),
    }
}

/// Copies a child's condition under a new type (e.g. an InfraCluster's Ready as the Cluster's
/// InfrastructureReady). Without the source condition, the fallback is used, or Unknown with
/// NotYetReported when there is no fallback.
pub fn mirror(
    source: Option<&Condition>,
    source_type: &str,
    target_type: &str,
    fallback: Option<NewCondition>,
) -> NewCondition {
    match source {
        Some(c) => {
            let mut mirrored = NewCondition::from_condition(c);
            mirrored.type_ = target_type.to_string();
            if mirrored.reason.is_empty() {
                mirrored.reason = reasons::NO_REASON_REPORTED.to_string();
            }
            mirrored
        }
        None => match fallback {
            Some(mut f) => {
                f.type_ = target_type.to_string();
                f
            }
            None => NewCondition::new(target_type, Status::Unknown, reasons::NOT_YET_REPORTED)
                .message(format!("Condition {source_type} not yet reported")),
        },
    }
}

/// Options for [`summary`].
#[derive(Clone, Debug, Default)]
pub struct SummaryOptions<'a> {
    /// Types that are left out when missing instead of counting as not yet reported.
    pub ignore_if_missing: &'a [&'a str],
    /// Conditions used instead of the object's own ones of the same type (e.g. a Deleting
    /// condition with a friendlier message).
    pub overrides: Vec<NewCondition>,
    /// Conditions that are issues by their status but count as information here (e.g. an
    /// infrastructure that is gone while the object is being deleted).
    pub treat_as_info: Vec<(&'a str, &'a [&'a str])>,
    /// Types that are good when False beside the well-known ones (a readiness gate with
    /// negative polarity).
    pub negative: Vec<&'a str>,
    pub reasons: MergeReasons,
}

/// Summarises several conditions of one object into one (e.g. a Machine's Ready from its
/// BootstrapConfigReady, InfrastructureReady, NodeHealthy...). `for_types` lists the types in
/// order of relevance; the message lists what is wrong, one `* Type: message` line each.
pub fn summary(
    conditions: &[Condition],
    target_type: &str,
    for_types: &[&str],
    options: &SummaryOptions<'_>,
) -> NewCondition {
    let mut inputs: Vec<(NewCondition, Priority)> = Vec::new();
    for t in for_types {
        let condition = options
            .overrides
            .iter()
            .find(|o| o.type_ == *t)
            .cloned()
            .or_else(|| get(conditions, t).map(NewCondition::from_condition));
        let condition = match condition {
            Some(c) => c,
            None if options.ignore_if_missing.contains(t) => continue,
            None => NewCondition::new(t, Status::Unknown, reasons::NOT_YET_REPORTED)
                .message("Condition not yet reported"),
        };
        let mut p = if options.negative.contains(t) {
            priority_with(Polarity::Negative, condition.status)
        } else {
            priority(t, condition.status)
        };
        let info_by_reason = options
            .treat_as_info
            .iter()
            .any(|(ty, rs)| ty == t && rs.contains(&condition.reason.as_str()));
        if info_by_reason {
            p = Priority::Info;
        }
        inputs.push((condition, p));
    }
    let worst = inputs
        .iter()
        .map(|(_, p)| *p)
        .min()
        .unwrap_or(Priority::Info);
    let (status, reason) = merged_status(target_type, worst, &options.reasons);
    let mut lines = Vec::new();
    for (c, p) in &inputs {
        let shown = match p {
            Priority::Issue | Priority::Unknown => true,
            Priority::Info => worst == Priority::Info && !c.message.is_empty(),
        };
        if shown {
            let text = if c.message.is_empty() {
                &c.reason
            } else {
                &c.message
            };
            lines.push(format!("* {}:{}", c.type_, indent_if_multiline(text)));
        }
    }
    NewCondition::new(target_type, status, &reason).message(lines.join("\n"))
}

/// Embeds a message after `* Type:`: a single line without a bullet follows after one space;
/// anything else starts on a new line, indented, with bullets added where lines lack them.
fn indent_if_multiline(message: &str) -> String {
    let lines: Vec<&str> = message.lines().collect();
    if lines.len() <= 1 && !message.starts_with("* ") {
        return format!(" {message}");
    }
    let all_bulleted = lines
        .iter()
        .all(|l| l.starts_with("* ") || l.starts_with("  "));
    let mut out = String::new();
    for line in lines {
        out.push('\n');
        if all_bulleted {
            out.push_str("  ");
            out.push_str(line);
        } else if line.starts_with("* ") {
            out.push_str("    ");
            out.push_str(line);
        } else {
            out.push_str("  * ");
            out.push_str(line);
        }
    }
    out
}

/// One object's contribution to an [`aggregate`].
#[derive(Clone, Debug)]
pub struct AggregateInput<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    /// Control-plane Machines are listed first.
    pub control_plane: bool,
    pub condition: Option<&'a Condition>,
}

/// How many message lines an aggregate shows before summing up the rest.
const AGGREGATE_SLOTS: usize = 3;
/// How many object names one aggregate line lists.
const NAMES_PER_LINE: usize = 3;

/// Aggregates one condition type over many objects (e.g. MachinesReady from every Machine's
/// Ready). The message groups objects with the same message: `* Machines a, b, c: message`.
pub fn aggregate(
    objects: &[AggregateInput<'_>],
    source_type: &str,
    target_type: &str,
    reasons: &MergeReasons,
) -> NewCondition {
    struct Group<'a> {
        kind: &'a str,
        priority: Priority,
        message: String,
        control_plane: bool,
        names: Vec<&'a str>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut worst = Priority::Info;
    for o in objects {
        let (status, message) = match o.condition {
            Some(c) => (Status::parse(&c.status), c.message.clone()),
            None => (
                Status::Unknown,
                format!("Condition {source_type} not yet reported"),
            ),
        };
        let p = priority(source_type, status);
        worst = worst.min(p);
        match groups
            .iter_mut()
            .find(|g| g.kind == o.kind && g.priority == p && g.message == message)
        {
            Some(g) => {
                g.names.push(o.name);
                g.control_plane |= o.control_plane;
            }
            None => groups.push(Group {
                kind: o.kind,
                priority: p,
                message,
                control_plane: o.control_plane,
                names: vec![o.name],
            }),
        }
    }
    let (status, reason) = merged_status(target_type, worst, reasons);
    // Information is only worth showing when nothing is wrong.
    groups.retain(|g| {
        if g.priority == Priority::Info {
            worst == Priority::Info && !g.message.is_empty()
        } else {
            true
        }
    });
    for g in &mut groups {
        g.names.sort_unstable();
    }
    groups.sort_by(|a, b| {
        a.kind
            .cmp(b.kind)
            .then(b.control_plane.cmp(&a.control_plane))
            .then(a.priority.cmp(&b.priority))
            .then(b.names.len().cmp(&a.names.len()))
            .then_with(|| a.names.cmp(&b.names))
    });

    let mut lines = Vec::new();
    let mut left: BTreeMap<(&str, Priority), usize> = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        if i >= AGGREGATE_SLOTS {
            *left.entry((g.kind, g.priority)).or_default() += g.names.len();
            continue;
        }
        let kind = if g.names.len() == 1 {
            g.kind.to_string()
        } else {
            format!("{}s", g.kind)
        };
        let mut names = g
            .names
            .iter()
            .take(NAMES_PER_LINE)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if g.names.len() > NAMES_PER_LINE {
            names.push_str(&format!(", ... ({} more)", g.names.len() - NAMES_PER_LINE));
        }
        let text = if g.message.is_empty() {
            "Condition is not OK".into()
        } else {
            g.message.clone()
        };
        lines.push(format!("* {kind} {names}:{}", indent_if_multiline(&text)));
    }
    for ((kind, p), n) in left {
        let kind = if n == 1 {
            kind.to_string()
        } else {
            format!("{kind}s")
        };
        let what = match p {
            Priority::Issue => "with other issues",
            Priority::Unknown => "with status unknown",
            Priority::Info => "with additional info",
        };
        lines.push(format!("And {n} {kind} {what}"));
    }
    NewCondition::new(target_type, status, &reason).message(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(ts(1000)),
        }
    }

    #[test]
    fn polarity_table() {
        for (t, want) in [
            ("Paused", Polarity::Negative),
            ("Deleting", Polarity::Negative),
            ("RollingOut", Polarity::Negative),
            ("ScalingUp", Polarity::Negative),
            ("ScalingDown", Polarity::Negative),
            ("Updating", Polarity::Negative),
            ("Remediating", Polarity::Negative),
            ("Ready", Polarity::Positive),
            ("Available", Polarity::Positive),
            ("InfrastructureReady", Polarity::Positive),
            ("SomethingNew", Polarity::Positive),
        ] {
            assert_eq!(polarity(t), want, "{t}");
        }
    }

    #[test]
    fn priority_table() {
        for (t, s, want) in [
            ("Ready", Status::True, Priority::Info),
            ("Ready", Status::False, Priority::Issue),
            ("Ready", Status::Unknown, Priority::Unknown),
            ("Deleting", Status::True, Priority::Issue),
            ("Deleting", Status::False, Priority::Info),
            ("ScalingUp", Status::Unknown, Priority::Unknown),
        ] {
            assert_eq!(priority(t, s), want, "{t} {s:?}");
        }
    }

    #[test]
    fn set_moves_transition_time_only_when_status_changes() {
        // (old status, new status, transition time expected after the set at t=2000)
        for (old, new, want) in [
            (None, Status::True, 2000),
            (Some("True"), Status::True, 1000),
            (Some("False"), Status::True, 2000),
            (Some("Unknown"), Status::False, 2000),
            (Some("False"), Status::False, 1000),
        ] {
            let mut list = old
                .map(|s| vec![cond("Ready", s, "R", "")])
                .unwrap_or_default();
            set(
                &mut list,
                2,
                NewCondition::new("Ready", new, "Changed").message("m"),
                ts(2000),
            );
            let c = get(&list, "Ready").unwrap();
            assert_eq!(c.last_transition_time.0, ts(want), "{old:?} -> {new:?}");
            assert_eq!(c.status, new.as_str());
            assert_eq!(c.reason, "Changed");
            assert_eq!(c.observed_generation, Some(2));
        }
    }

    #[test]
    fn set_reports_whether_anything_changed() {
        let mut list = Vec::new();
        let c = NewCondition::new("Ready", Status::True, "Ready");
        assert!(set(&mut list, 1, c.clone(), ts(10)));
        assert!(
            !set(&mut list, 1, c.clone(), ts(20)),
            "same condition later is no change"
        );
        assert!(set(&mut list, 2, c, ts(20)), "a new generation is a change");
    }

    #[test]
    fn set_truncates_time_to_seconds() {
        let mut list = Vec::new();
        let now = Timestamp::from_millisecond(1_500_250).unwrap();
        set(
            &mut list,
            1,
            NewCondition::new("Ready", Status::True, "Ready"),
            now,
        );
        assert_eq!(list[0].last_transition_time.0, ts(1500));
    }

    #[test]
    fn set_keeps_upstream_order() {
        let mut list = Vec::new();
        for t in [
            "Deleting",
            "Zeta",
            "Paused",
            "ScalingUp",
            "Alpha",
            "Ready",
            "Available",
        ] {
            set(
                &mut list,
                1,
                NewCondition::new(t, Status::False, "R"),
                ts(1),
            );
        }
        let order: Vec<&str> = list.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            order,
            [
                "Available",
                "Ready",
                "ScalingUp",
                "Alpha",
                "Zeta",
                "Paused",
                "Deleting"
            ]
        );
    }

    #[test]
    fn delete_removes_only_the_type() {
        let mut list = vec![
            cond("Ready", "True", "R", ""),
            cond("Paused", "False", "P", ""),
        ];
        assert!(delete(&mut list, "Ready"));
        assert!(!delete(&mut list, "Ready"));
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn mirror_table() {
        let ready = cond(
            "Ready",
            "False",
            "LoadBalancerNotReady",
            "Waiting for the load balancer",
        );
        let no_reason = cond("Ready", "True", "", "");
        let fallback = NewCondition::new("X", Status::False, "NotReady")
            .message("DockerCluster status.initialization.provisioned is false");
        for (source, fb, want_status, want_reason, want_message) in [
            (
                Some(&ready),
                None,
                Status::False,
                "LoadBalancerNotReady",
                "Waiting for the load balancer",
            ),
            (Some(&no_reason), None, Status::True, "NoReasonReported", ""),
            (
                None,
                Some(fallback.clone()),
                Status::False,
                "NotReady",
                "DockerCluster status.initialization.provisioned is false",
            ),
            (
                None,
                None,
                Status::Unknown,
                "NotYetReported",
                "Condition Ready not yet reported",
            ),
        ] {
            let m = mirror(source, "Ready", "InfrastructureReady", fb);
            assert_eq!(m.type_, "InfrastructureReady");
            assert_eq!(
                (m.status, m.reason.as_str(), m.message.as_str()),
                (want_status, want_reason, want_message)
            );
        }
        // The child's transition time shows through.
        let m = mirror(Some(&ready), "Ready", "InfrastructureReady", None);
        assert_eq!(m.last_transition_time, Some(ts(1000)));
    }

    #[test]
    fn summary_table() {
        let reasons = MergeReasons::new("NotReady", "ReadyUnknown", "Ready");
        let options = SummaryOptions {
            reasons: reasons.clone(),
            ..Default::default()
        };
        let types = [
            "Deleting",
            "BootstrapConfigReady",
            "InfrastructureReady",
            "NodeHealthy",
        ];
        struct Case {
            name: &'static str,
            conditions: Vec<Condition>,
            status: Status,
            reason: &'static str,
            message: &'static str,
        }
        let all_good = vec![
            cond("Deleting", "False", "NotDeleting", ""),
            cond("BootstrapConfigReady", "True", "Ready", ""),
            cond("InfrastructureReady", "True", "Ready", ""),
            cond("NodeHealthy", "True", "NodeHealthy", ""),
        ];
        let cases = vec![
            Case {
                name: "all good",
                conditions: all_good.clone(),
                status: Status::True,
                reason: "Ready",
                message: "",
            },
            Case {
                name: "one issue and one missing",
                conditions: vec![
                    cond("Deleting", "False", "NotDeleting", ""),
                    cond("BootstrapConfigReady", "True", "Ready", ""),
                    cond(
                        "InfrastructureReady",
                        "False",
                        "NotReady",
                        "DockerMachine is not provisioned",
                    ),
                ],
                status: Status::False,
                reason: "NotReady",
                message: "* InfrastructureReady: DockerMachine is not provisioned\n* NodeHealthy: Condition not yet reported",
            },
            Case {
                name: "negative condition true is an issue; empty message shows the reason",
                conditions: vec![
                    cond("Deleting", "True", "DrainingNode", ""),
                    cond("BootstrapConfigReady", "True", "Ready", ""),
                    cond("InfrastructureReady", "True", "Ready", ""),
                    cond(
                        "NodeHealthy",
                        "Unknown",
                        "NodeHealthyUnknown",
                        "* Node.Ready: Condition not yet reported",
                    ),
                ],
                status: Status::False,
                reason: "NotReady",
                message: "* Deleting: DrainingNode\n* NodeHealthy:\n  * Node.Ready: Condition not yet reported",
            },
            Case {
                name: "unknown only",
                conditions: vec![
                    cond("Deleting", "False", "NotDeleting", ""),
                    cond("BootstrapConfigReady", "True", "Ready", "all fine"),
                    cond("InfrastructureReady", "True", "Ready", ""),
                    cond(
                        "NodeHealthy",
                        "Unknown",
                        "ConnectionDown",
                        "Remote connection not established yet",
                    ),
                ],
                status: Status::Unknown,
                reason: "ReadyUnknown",
                message: "* NodeHealthy: Remote connection not established yet",
            },
            Case {
                name: "info messages shown when all is well",
                conditions: {
                    let mut c = all_good.clone();
                    c[1] = cond(
                        "BootstrapConfigReady",
                        "True",
                        "Ready",
                        "Data secret rotated",
                    );
                    c
                },
                status: Status::True,
                reason: "Ready",
                message: "* BootstrapConfigReady: Data secret rotated",
            },
            Case {
                name: "multi-line messages without bullets get them",
                conditions: {
                    let mut c = all_good.clone();
                    c[3] = cond("NodeHealthy", "False", "NodeNotHealthy", "first\n* second");
                    c
                },
                status: Status::False,
                reason: "NotReady",
                message: "* NodeHealthy:\n  * first\n    * second",
            },
        ];
        for c in cases {
            let s = summary(&c.conditions, "Ready", &types, &options);
            assert_eq!(
                (s.status, s.reason.as_str(), s.message.as_str()),
                (c.status, c.reason, c.message),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn summary_ignores_missing_types_and_honours_overrides_and_info_reasons() {
        let conditions = vec![
            cond("Deleting", "True", "Deleting", ""),
            cond(
                "InfrastructureReady",
                "False",
                "ObjectDeleted",
                "DockerMachine has been deleted",
            ),
        ];
        let options = SummaryOptions {
            ignore_if_missing: &["HealthCheckSucceeded"],
            overrides: vec![
                NewCondition::new("Deleting", Status::False, "Deleting")
                    .message("Machine deletion in progress, stage: DrainingNode"),
            ],
            treat_as_info: vec![(
                "InfrastructureReady",
                &["ObjectDeleted", "ObjectDoesNotExist"],
            )],
            negative: vec![],
            reasons: MergeReasons::new("NotReady", "ReadyUnknown", "Ready"),
        };
        let s = summary(
            &conditions,
            "Ready",
            &["Deleting", "InfrastructureReady", "HealthCheckSucceeded"],
            &options,
        );
        assert_eq!(s.status, Status::True);
        assert_eq!(
            s.message,
            "* Deleting: Machine deletion in progress, stage: DrainingNode\n* InfrastructureReady: DockerMachine has been deleted"
        );
    }

    #[test]
    fn negative_target_inverts_status() {
        let conditions = vec![cond(
            "ScalingUp",
            "True",
            "ScalingUp",
            "Scaling up from 1 to 3 replicas",
        )];
        let s = summary(
            &conditions,
            "ScalingUp",
            &["ScalingUp"],
            &SummaryOptions::default(),
        );
        assert_eq!(
            s.status,
            Status::True,
            "an issue makes a negative condition True"
        );
        let conditions = vec![cond("ScalingUp", "False", "NotScalingUp", "")];
        let s = summary(
            &conditions,
            "ScalingUp",
            &["ScalingUp"],
            &SummaryOptions::default(),
        );
        assert_eq!(s.status, Status::False);
    }

    #[test]
    fn aggregate_table() {
        let reasons = MergeReasons::new("NotReady", "ReadyUnknown", "Ready");
        let ok = cond("Ready", "True", "Ready", "");
        let down = cond(
            "Ready",
            "False",
            "NotReady",
            "* NodeHealthy: Node not ready",
        );
        let waiting = cond(
            "Ready",
            "False",
            "NotReady",
            "* InfrastructureReady: Waiting for VM",
        );
        let other = cond(
            "Ready",
            "False",
            "NotReady",
            "* BootstrapConfigReady: waiting",
        );
        let more = cond("Ready", "False", "NotReady", "* Deleting: DrainingNode");
        let input = |name: &'static str, cp: bool, c: Option<&'static Condition>| AggregateInput {
            kind: "Machine",
            name,
            control_plane: cp,
            condition: c,
        };
        // Leak for 'static test inputs.
        let ok: &'static Condition = Box::leak(Box::new(ok));
        let down: &'static Condition = Box::leak(Box::new(down));
        let waiting: &'static Condition = Box::leak(Box::new(waiting));
        let other: &'static Condition = Box::leak(Box::new(other));
        let more: &'static Condition = Box::leak(Box::new(more));

        struct Case {
            name: &'static str,
            objects: Vec<AggregateInput<'static>>,
            status: Status,
            reason: &'static str,
            message: &'static str,
        }
        let cases = vec![
            Case {
                name: "all ready",
                objects: vec![input("m1", false, Some(ok)), input("m2", false, Some(ok))],
                status: Status::True,
                reason: "Ready",
                message: "",
            },
            Case {
                name: "grouped by message, control plane first",
                objects: vec![
                    input("w1", false, Some(down)),
                    input("w2", false, Some(down)),
                    input("cp1", true, Some(waiting)),
                    input("w3", false, Some(ok)),
                ],
                status: Status::False,
                reason: "NotReady",
                message: "* Machine cp1:\n  * InfrastructureReady: Waiting for VM\n* Machines w1, w2:\n  * NodeHealthy: Node not ready",
            },
            Case {
                name: "missing condition is unknown",
                objects: vec![input("m1", false, None), input("m2", false, Some(ok))],
                status: Status::Unknown,
                reason: "ReadyUnknown",
                message: "* Machine m1: Condition Ready not yet reported",
            },
            Case {
                name: "more than three names and more than three groups",
                objects: vec![
                    input("a", false, Some(down)),
                    input("b", false, Some(down)),
                    input("c", false, Some(down)),
                    input("d", false, Some(down)),
                    input("e", false, Some(waiting)),
                    input("f", false, Some(other)),
                    input("g", false, Some(more)),
                    input("h", false, None),
                ],
                status: Status::False,
                reason: "NotReady",
                message: "* Machines a, b, c, ... (1 more):\n  * NodeHealthy: Node not ready\n* Machine e:\n  * InfrastructureReady: Waiting for VM\n* Machine f:\n  * BootstrapConfigReady: waiting\nAnd 1 Machine with other issues\nAnd 1 Machine with status unknown",
            },
        ];
        for c in cases {
            let a = aggregate(&c.objects, "Ready", "MachinesReady", &reasons);
            assert_eq!(a.type_, "MachinesReady");
            assert_eq!(
                (a.status, a.reason.as_str(), a.message.as_str()),
                (c.status, c.reason, c.message),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn aggregate_of_negative_type() {
        let rolling = cond(
            "RollingOut",
            "True",
            "RollingOut",
            "Rolling out 2 not up-to-date replicas",
        );
        let idle = cond("RollingOut", "False", "NotRollingOut", "");
        let objects = [
            AggregateInput {
                kind: "MachineDeployment",
                name: "md-0",
                control_plane: false,
                condition: Some(&rolling),
            },
            AggregateInput {
                kind: "MachineDeployment",
                name: "md-1",
                control_plane: false,
                condition: Some(&idle),
            },
        ];
        let reasons = MergeReasons::new("RollingOut", "RollingOutUnknown", "NotRollingOut");
        let a = aggregate(&objects, "RollingOut", "RollingOut", &reasons);
        assert_eq!(a.status, Status::True);
        assert_eq!(a.reason, "RollingOut");
        assert_eq!(
            a.message,
            "* MachineDeployment md-0: Rolling out 2 not up-to-date replicas"
        );
    }
}
