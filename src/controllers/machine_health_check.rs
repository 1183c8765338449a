//! The MachineHealthCheck controller: checks the Nodes of the Machines it selects against
//! unhealthy conditions and a start-up timeout, and remediates unhealthy Machines by deleting
//! them (their MachineSet or control plane replaces them) unless too many are unhealthy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::machines::set_machine_conditions;
use super::mdutil::scaled;
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use futures::future::BoxFuture;

use crate::api;
use crate::api::health_check::HealthChecks;
use crate::api::machine_health_check::{MachineHealthCheckStatus, reasons};
use crate::api::{Cluster, Machine, MachineHealthCheck};
use crate::conditions::{NewCondition, Status};
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Error, Result, StepContext};
use crate::workload::clusters::NodeLookup;

/// The outcome of checking one Machine.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    Healthy,
    Unhealthy {
        reason: &'static str,
        message: String,
    },
    /// Not decided yet; look again after this long.
    Pending(Duration),
}

/// Checks a Machine and its Node (None: not found yet) at `now`.
pub fn check(
    checks: &HealthChecks,
    machine: &Machine,
    node: Option<&Node>,
    started: Timestamp,
    now: Timestamp,
) -> Health {
    if machine
        .annotations()
        .contains_key(api::REMEDIATE_MACHINE_ANNOTATION)
    {
        return Health::Unhealthy {
            reason: api::machine_health_check::reasons::HAS_REMEDIATE_ANNOTATION,
            message: "Health check failed: marked for remediation via cluster.x-k8s.io/remediate-machine annotation".into(),
        };
    }
    let mut next: Option<Duration> = None;
    let mut wait = |remaining: i64| {
        let d = Duration::from_secs(remaining.max(0) as u64 + 1);
        next = Some(next.map_or(d, |n| n.min(d)));
    };
    // The Machine's own conditions count with or without a Node: a Machine whose bootstrap
    // never succeeds has none.
    let machine_conditions: Vec<(String, String, Option<Timestamp>)> = machine
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                Some(c.last_transition_time.0),
            )
        })
        .collect();
    let machine_rules = checks
        .unhealthy_machine_conditions
        .iter()
        .flatten()
        .map(|r| (r.type_.as_str(), r.status.to_string(), r.timeout_seconds));
    if let Some(unhealthy) = held_too_long(
        ("Machine", reasons::UNHEALTHY_MACHINE),
        machine_rules,
        &machine_conditions,
        now,
        &mut wait,
    ) {
        return unhealthy;
    }
    let Some(node) = node else {
        let timeout = i64::from(checks.node_startup_timeout_seconds.unwrap_or(600));
        if timeout == 0 {
            return next.map_or(Health::Healthy, Health::Pending);
        }
        let elapsed = now.as_second() - started.as_second();
        if elapsed > timeout {
            return Health::Unhealthy {
                reason: api::machine_health_check::reasons::NODE_STARTUP_TIMEOUT,
                message: format!(
                    "Health check failed: Node failed to report startup in {timeout}s"
                ),
            };
        }
        wait(timeout - elapsed);
        return Health::Pending(next.expect("set just above"));
    };
    let node_conditions: Vec<(String, String, Option<Timestamp>)> = node
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            let since = c.last_transition_time.as_ref().map(|t| t.0);
            (c.type_.clone(), c.status.clone(), since)
        })
        .collect();
    let node_rules = checks
        .unhealthy_node_conditions
        .iter()
        .flatten()
        .map(|r| (r.type_.as_str(), r.status.clone(), r.timeout_seconds));
    if let Some(unhealthy) = held_too_long(
        ("Node", reasons::UNHEALTHY_NODE),
        node_rules,
        &node_conditions,
        now,
        &mut wait,
    ) {
        return unhealthy;
    }
    match next {
        Some(d) => Health::Pending(d),
        None => Health::Healthy,
    }
}

/// The verdict (with `reason`) on the first rule (type, status, timeout in seconds) whose
/// condition on `on` (a Node or the Machine; its conditions as type, status and since when) has
/// held longer than the rule allows; for the others that hold, `wait` hears how long they have
/// left.
fn held_too_long<'a>(
    (on, reason): (&str, &'static str),
    rules: impl Iterator<Item = (&'a str, String, i32)>,
    conditions: &[(String, String, Option<Timestamp>)],
    now: Timestamp,
    wait: &mut impl FnMut(i64),
) -> Option<Health> {
    for (type_, status, timeout) in rules {
        let Some((_, _, since)) = conditions
            .iter()
            .find(|(t, s, _)| t == type_ && *s == status)
        else {
            continue;
        };
        let held = since.map_or(0, |t| now.as_second() - t.as_second());
        if held > i64::from(timeout) {
            return Some(Health::Unhealthy {
                reason,
                message: format!(
                    "Health check failed: Condition {type_} on {on} is reporting status {status} for more than {timeout}s"
                ),
            });
        }
        wait(i64::from(timeout) - held);
    }
    None
}

/// Whether `triggerIf` allows remediation with this many unhealthy Machines.
#[derive(Debug, PartialEq)]
pub struct RemediationVerdict {
    pub allowed: bool,
    /// How many more Machines may become unhealthy before remediation stops
    /// (`status.remediationsAllowed`); 0 when it is not allowed.
    pub further: i32,
    /// Why it is not allowed, for the `RemediationAllowed` condition.
    pub refusal: String,
}

/// Whether remediation is allowed with `unhealthy` of `expected` Machines unhealthy, per
/// `triggerIf` (at most `unhealthyLessThanOrEqualTo`, or within `unhealthyInRange`).
pub fn remediation_allowed(
    mhc: &MachineHealthCheck,
    expected: i32,
    unhealthy: i32,
) -> RemediationVerdict {
    let verdict = |allowed: bool, max: i32, refusal: String| RemediationVerdict {
        allowed,
        further: if allowed { (max - unhealthy).max(0) } else { 0 },
        refusal,
    };
    let trigger = mhc
        .spec
        .remediation
        .as_ref()
        .and_then(|r| r.trigger_if.clone())
        .unwrap_or_default();
    if let Some(range) = trigger.unhealthy_in_range.as_deref() {
        let bounds: Vec<i32> = range
            .trim_matches(['[', ']'])
            .split('-')
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        if let [min, max] = bounds[..] {
            let ok = unhealthy >= min && unhealthy <= max;
            return verdict(
                ok,
                max,
                format!(
                    "Remediation is not allowed, the number of not started or unhealthy machines does not fall within the range (total: {expected}, unhealthy: {unhealthy}, unhealthyRange: {range})"
                ),
            );
        }
    }
    let default = k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("100%".into());
    let max = scaled(
        Some(
            trigger
                .unhealthy_less_than_or_equal_to
                .as_ref()
                .unwrap_or(&default),
        ),
        expected,
        false,
        expected,
    );
    verdict(
        unhealthy <= max,
        max,
        format!(
            "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: {expected}, unhealthy: {unhealthy}, maxUnhealthy: {max})"
        ),
    )
}

/// What one reconcile knows of a MachineHealthCheck's world, gathered once.
struct Scope {
    api: Api<MachineHealthCheck>,
    machines_api: Api<Machine>,
    cluster: Option<Cluster>,
    /// The Machines it selects, less those that opt out (skip-remediation, paused).
    targets: Vec<Machine>,
}

/// Whether the check's selector (its `matchExpressions` too, which the list by `matchLabels`
/// leaves to here) takes a Machine.
fn selects(mhc: &MachineHealthCheck, machine: &Machine) -> bool {
    crate::kubernetes::selectors::label_selector_matches(&mhc.spec.selector, machine.labels())
}

impl Scope {
    async fn gather(mhc: &MachineHealthCheck, ctx: &Context) -> Result<Scope> {
        let ns = mhc.namespace().unwrap_or_default();
        let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&mhc.spec.cluster_name)
            .await?;
        let mut selector: BTreeMap<String, String> =
            mhc.spec.selector.match_labels.clone().unwrap_or_default();
        selector.insert(
            api::CLUSTER_NAME_LABEL.into(),
            mhc.spec.cluster_name.clone(),
        );
        let label_selector = super::machines::selector_string(&selector);
        let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        let targets: Vec<Machine> = machines_api
            .list(&ListParams::default().labels(&label_selector))
            .await?
            .items
            .into_iter()
            .filter(|m| {
                selects(mhc, m)
                    && !m
                        .annotations()
                        .contains_key(api::SKIP_REMEDIATION_ANNOTATION)
                    && !m.annotations().contains_key(api::PAUSED_ANNOTATION)
            })
            .collect();
        Ok(Scope {
            api: Api::namespaced(ctx.client.clone(), &ns),
            machines_api,
            cluster,
            targets,
        })
    }
}

/// What checking the targets found.
struct Findings<'a> {
    healthy: i32,
    unhealthy: Vec<&'a Machine>,
    /// When the next undecided Machine is to be looked at again.
    next: Option<Duration>,
}

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "machinehealthcheck";

/// The MachineHealthCheck controller: MachineHealthChecks, woken when a Machine of their
/// Cluster changes (a Machine mirrors its Node's conditions, so a Node's changes reach them
/// through it), and again when a start-up or condition timeout they wait for runs out.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<MachineHealthCheck>(CONTROLLER);
    let checks = controller.store();
    let controller = controller.reconcile_on(
        w.ctx
            .machines()
            .changes()
            .flat_map(move |m| futures::stream::iter(checks_of(&checks, &m))),
    );
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

/// The MachineHealthChecks of a Machine's Cluster, to wake when the Machine changes.
fn checks_of(
    checks: &Store<MachineHealthCheck>,
    machine: &Machine,
) -> Vec<ObjectRef<MachineHealthCheck>> {
    let namespace = machine.namespace();
    checks
        .state()
        .iter()
        .filter(|c| c.namespace() == namespace && c.spec.cluster_name == machine.spec.cluster_name)
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

pub async fn reconcile(mhc: Arc<MachineHealthCheck>, ctx: Arc<Context>) -> Result<Action> {
    let scope = Scope::gather(&mhc, &ctx)
        .await
        .step("reading the Cluster and the Machines to check")?;
    let Some(cluster) = &scope.cluster else {
        return Err(Error::Invalid(format!(
            "Cluster {} of MachineHealthCheck {} does not exist",
            mhc.spec.cluster_name,
            mhc.name_any()
        )));
    };

    // Guards.
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        Some(cluster),
        "MachineHealthCheck",
        mhc.annotations(),
    );
    if is_paused {
        return common::record_paused(&scope.api, &mhc, paused).await;
    }
    if !common::has_owner(mhc.owner_references(), &cluster.uid().unwrap_or_default()) {
        let mut refs = mhc.owner_references().to_vec();
        refs.push(common::owner_reference(cluster, false));
        common::patch_merge(&scope.api, &mhc.name_any(), json!({"metadata": {"ownerReferences": refs, "labels": {(api::CLUSTER_NAME_LABEL): mhc.spec.cluster_name}}})).await?;
        return Ok(Action::await_change());
    }

    // Phases.
    let findings = check_targets(&ctx, &mhc, &scope, cluster)
        .await
        .step("checking the Machines' health")?;
    let expected = scope.targets.len() as i32;
    let verdict = remediation_allowed(&mhc, expected, expected - findings.healthy);
    for m in &findings.unhealthy {
        let note = format!(
            "Machine {}/{} has been marked as unhealthy by MachineHealthCheck {:?}",
            m.namespace().unwrap_or_default(),
            m.name_any(),
            mhc.name_any()
        );
        ctx.events.publish(
            CONTROLLER,
            *m,
            Severity::Normal,
            "MachineMarkedUnhealthy",
            note,
        );
    }
    if !verdict.allowed && !findings.unhealthy.is_empty() {
        let note = format!("Remediation restricted: {}", verdict.refusal);
        ctx.events.publish(
            CONTROLLER,
            mhc.as_ref(),
            Severity::Warning,
            "RemediationRestricted",
            note,
        );
    }
    if verdict.allowed {
        remediate(&scope, &findings.unhealthy)
            .await
            .step("remediating unhealthy Machines")?;
    }

    // Status, computed once from what this reconcile found.
    let status = compute_status(&mhc, &scope.targets, findings.healthy, verdict, paused);
    common::write_status(&scope.api, &mhc.name_any(), mhc.status.as_ref(), &status).await?;
    Ok(Action::requeue(findings.next.unwrap_or_else(|| {
        common::spread(mhc.as_ref(), common::RESYNC)
    })))
}

/// Checks every target against its Node and records the verdict in the Machine's
/// `HealthCheckSucceeded` condition.
async fn check_targets<'a>(
    ctx: &Context,
    mhc: &MachineHealthCheck,
    scope: &'a Scope,
    cluster: &Cluster,
) -> Result<Findings<'a>> {
    let ns = mhc.namespace().unwrap_or_default();
    let checks = mhc.spec.checks.clone().unwrap_or_default();
    let now = Timestamp::now();
    let mut findings = Findings {
        healthy: 0,
        unhealthy: Vec::new(),
        next: None,
    };
    for machine in &scope.targets {
        // From the workload cluster's Node cache; None when it could not be asked.
        let lookup = match super::machines::node_name(machine) {
            Some(name) => ctx
                .workloads
                .node(&ns, &cluster.name_any(), name)
                .await
                .ok(),
            None => None,
        };
        let node_deleted = matches!(lookup, Some(NodeLookup::Absent));
        let node = match lookup {
            Some(NodeLookup::Found(node)) => Some(node),
            _ => None,
        };
        let started = machine
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(now);
        let health = if node_deleted {
            Health::Unhealthy {
                reason: api::machine_health_check::reasons::NODE_DELETED,
                message: "Health check failed: Node has been deleted".into(),
            }
        } else {
            check(&checks, machine, node.as_deref(), started, now)
        };
        let condition = match &health {
            Health::Healthy => {
                findings.healthy += 1;
                NewCondition::new(
                    api::machine::conditions::HEALTH_CHECK_SUCCEEDED,
                    Status::True,
                    api::machine_health_check::reasons::HEALTH_CHECK_SUCCEEDED,
                )
            }
            Health::Unhealthy { reason, message } => {
                findings.unhealthy.push(machine);
                NewCondition::new(
                    api::machine::conditions::HEALTH_CHECK_SUCCEEDED,
                    Status::False,
                    reason,
                )
                .message(message.clone())
            }
            Health::Pending(d) => {
                findings.next = Some(findings.next.map_or(*d, |n| n.min(*d)));
                continue;
            }
        };
        set_machine_conditions(&scope.machines_api, machine, vec![condition]).await?;
    }
    Ok(findings)
}

/// Asks the owners of unhealthy Machines to remediate them: a control plane keeping etcd
/// quorum, a MachineSet within its deployment's maxInFlight. Stand-alone Machines just go.
async fn remediate(scope: &Scope, unhealthy: &[&Machine]) -> Result<()> {
    for m in unhealthy.iter().filter(|m| !common::deleting(**m)) {
        if let Some(owner) = common::controller_of(m.owner_references())
            .filter(|o| matches!(o.kind.as_str(), "KubeadmControlPlane" | "MachineSet"))
        {
            set_machine_conditions(
                &scope.machines_api,
                m,
                vec![
                    NewCondition::new(
                        api::OWNER_REMEDIATED,
                        Status::False,
                        api::machine_health_check::reasons::WAITING_FOR_REMEDIATION,
                    )
                    .message(format!(
                        "Waiting for {} {} to remediate this Machine",
                        owner.kind, owner.name
                    )),
                ],
            )
            .await?;
            continue;
        }
        tracing::info!(machine = %m.name_any(), "remediating an unhealthy Machine by deleting it");
        scope
            .machines_api
            .delete(&m.name_any(), &DeleteParams::background())
            .await?;
    }
    Ok(())
}

/// The MachineHealthCheck's status: its targets, how many are healthy, how many
/// remediations are allowed, and `RemediationAllowed` with the refusal when too many are
/// unhealthy.
fn compute_status(
    mhc: &MachineHealthCheck,
    targets: &[Machine],
    healthy: i32,
    verdict: RemediationVerdict,
    paused: NewCondition,
) -> MachineHealthCheckStatus {
    let mut status = mhc.status.clone().unwrap_or_default();
    let expected = targets.len() as i32;
    let remediation = if verdict.allowed {
        NewCondition::new(
            api::machine_health_check::conditions::REMEDIATION_ALLOWED,
            Status::True,
            api::machine_health_check::reasons::REMEDIATION_ALLOWED,
        )
    } else {
        NewCondition::new(
            api::machine_health_check::conditions::REMEDIATION_ALLOWED,
            Status::False,
            api::machine_health_check::reasons::TOO_MANY_UNHEALTHY,
        )
        .message(verdict.refusal)
    };
    status.expected_machines = Some(expected);
    status.current_healthy = Some(healthy);
    status.remediations_allowed = Some(verdict.further);
    let mut names: Vec<String> = targets.iter().map(|m| m.name_any()).collect();
    names.sort();
    status.targets = Some(names);
    let generation = mhc.meta().generation;
    common::set_conditions(
        &mut status.conditions,
        generation,
        vec![paused, remediation],
    );
    status.observed_generation = generation;
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks() -> HealthChecks {
        serde_json::from_value(json!({
            "nodeStartupTimeoutSeconds": 60,
            "unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 30}]
        }))
        .unwrap()
    }

    fn machine(annotations: serde_json::Value) -> Machine {
        serde_json::from_value(json!({
            "metadata": {"name": "m", "annotations": annotations},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "m"}}
        }))
        .unwrap()
    }

    fn node(ready: &str, seconds_ago: i64, now: Timestamp) -> Node {
        let t = Timestamp::from_second(now.as_second() - seconds_ago).unwrap();
        serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": t.to_string()}
        ]}}))
        .unwrap()
    }

    #[test]
    fn health_table() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let started = |ago: i64| Timestamp::from_second(now.as_second() - ago).unwrap();
        let m = machine(json!({}));
        assert_eq!(
            check(
                &checks(),
                &m,
                Some(&node("True", 100, now)),
                started(200),
                now
            ),
            Health::Healthy
        );
        assert!(matches!(
            check(
                &checks(),
                &m,
                Some(&node("False", 100, now)),
                started(200),
                now
            ),
            Health::Unhealthy {
                reason: "UnhealthyNode",
                ..
            }
        ));
        assert_eq!(
            check(
                &checks(),
                &m,
                Some(&node("False", 10, now)),
                started(200),
                now
            ),
            Health::Pending(Duration::from_secs(21))
        );
        assert!(matches!(
            check(&checks(), &m, None, started(100), now),
            Health::Unhealthy {
                reason: "NodeStartupTimeout",
                ..
            }
        ));
        assert_eq!(
            check(&checks(), &m, None, started(10), now),
            Health::Pending(Duration::from_secs(51))
        );
        let marked = machine(json!({(api::REMEDIATE_MACHINE_ANNOTATION): ""}));
        assert!(matches!(
            check(
                &checks(),
                &marked,
                Some(&node("True", 100, now)),
                started(200),
                now
            ),
            Health::Unhealthy {
                reason: "HasRemediateAnnotation",
                ..
            }
        ));
    }

    #[test]
    fn a_machines_own_conditions_make_it_unhealthy_with_or_without_a_node() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let checks: HealthChecks = serde_json::from_value(json!({
            "nodeStartupTimeoutSeconds": 600,
            "unhealthyMachineConditions": [{"type": "BootstrapConfigReady", "status": "False", "timeoutSeconds": 120}]
        }))
        .unwrap();
        let with = |status: &str, seconds_ago: i64| -> Machine {
            let mut m = machine(json!({}));
            let since = Timestamp::from_second(now.as_second() - seconds_ago).unwrap();
            m.status = serde_json::from_value(json!({"conditions": [
                {"type": "BootstrapConfigReady", "status": status, "reason": "R", "message": "", "lastTransitionTime": since.to_string()}
            ]}))
            .unwrap();
            m
        };
        let started = Timestamp::from_second(now.as_second() - 300).unwrap();
        assert_eq!(
            check(&checks, &with("False", 200), None, started, now),
            Health::Unhealthy {
                reason: "UnhealthyMachine",
                message: "Health check failed: Condition BootstrapConfigReady on Machine is reporting status False for more than 120s".into(),
            },
            "no Node is needed"
        );
        assert_eq!(
            check(&checks, &with("False", 100), None, started, now),
            Health::Pending(Duration::from_secs(21)),
            "the condition's timeout comes before the Node's start-up timeout"
        );
        assert_eq!(
            check(
                &checks,
                &with("True", 200),
                Some(&node("True", 100, now)),
                started,
                now
            ),
            Health::Healthy
        );
    }

    #[test]
    fn short_circuit_table() {
        let mhc = |trigger: serde_json::Value| -> MachineHealthCheck {
            serde_json::from_value(json!({"metadata": {"name": "h"}, "spec": {"clusterName": "c", "selector": {}, "remediation": {"triggerIf": trigger}}})).unwrap()
        };
        // (case, triggerIf, expected, unhealthy, allowed, further remediations allowed)
        let cases = [
            ("100% by default", json!({}), 3, 3, true, 0),
            ("one healthy of three, 100%", json!({}), 3, 2, true, 1),
            (
                "40% of 5 is 2",
                json!({"unhealthyLessThanOrEqualTo": "40%"}),
                5,
                2,
                true,
                0,
            ),
            (
                "3 of 5 is over 40%",
                json!({"unhealthyLessThanOrEqualTo": "40%"}),
                5,
                3,
                false,
                0,
            ),
            (
                "an absolute limit",
                json!({"unhealthyLessThanOrEqualTo": 2}),
                5,
                1,
                true,
                1,
            ),
            (
                "within the range",
                json!({"unhealthyInRange": "[1-2]"}),
                5,
                1,
                true,
                1,
            ),
            (
                "above the range",
                json!({"unhealthyInRange": "[1-2]"}),
                5,
                3,
                false,
                0,
            ),
        ];
        for (case, trigger, expected, unhealthy, allowed, further) in cases {
            let verdict = remediation_allowed(&mhc(trigger), expected, unhealthy);
            assert_eq!(
                (verdict.allowed, verdict.further),
                (allowed, further),
                "{case}"
            );
        }
        let verdict = remediation_allowed(&mhc(json!({"unhealthyInRange": "[1-2]"})), 5, 3);
        assert!(
            verdict.refusal.contains("unhealthyRange: [1-2]"),
            "{}",
            verdict.refusal
        );
    }

    #[test]
    fn status_counts_targets_and_says_why_remediation_stops() {
        let mhc: MachineHealthCheck = serde_json::from_value(json!({
            "metadata": {"name": "h", "generation": 3},
            "spec": {"clusterName": "c", "selector": {}, "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%"}}},
        }))
        .unwrap();
        let targets: Vec<Machine> = ["m-b", "m-a", "m-c", "m-d", "m-e"]
            .iter()
            .map(|n| {
                let mut m = machine(json!({}));
                m.metadata.name = Some(n.to_string());
                m
            })
            .collect();
        let paused =
            || NewCondition::new(crate::conditions::types::PAUSED, Status::False, "NotPaused");
        // (case, healthy, allowed, further, condition status, reason)
        let cases = [
            (
                "one unhealthy of five",
                4,
                true,
                1,
                "True",
                "RemediationAllowed",
            ),
            (
                "two unhealthy: the limit",
                3,
                true,
                0,
                "True",
                "RemediationAllowed",
            ),
            (
                "three unhealthy: over 40%",
                2,
                false,
                0,
                "False",
                "TooManyUnhealthy",
            ),
        ];
        for (case, healthy, allowed, further, cond_status, reason) in cases {
            let verdict = remediation_allowed(&mhc, 5, 5 - healthy);
            assert_eq!(verdict.allowed, allowed, "{case}");
            let status = compute_status(&mhc, &targets, healthy, verdict, paused());
            assert_eq!(status.expected_machines, Some(5), "{case}");
            assert_eq!(status.current_healthy, Some(healthy), "{case}");
            assert_eq!(status.remediations_allowed, Some(further), "{case}");
            assert_eq!(
                status.targets.as_deref().unwrap(),
                ["m-a", "m-b", "m-c", "m-d", "m-e"],
                "{case}: sorted"
            );
            assert_eq!(status.observed_generation, Some(3), "{case}");
            let conditions = status.conditions.unwrap();
            let c = conditions
                .iter()
                .find(|c| c.type_ == "RemediationAllowed")
                .unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                (cond_status, reason),
                "{case}"
            );
            if !allowed {
                assert!(
                    c.message.contains("maxUnhealthy: 2"),
                    "{case}: {}",
                    c.message
                );
            }
        }
    }

    #[test]
    fn the_selectors_expressions_choose_the_machines_too() {
        let mhc: MachineHealthCheck = serde_json::from_value(json!({
            "metadata": {"name": "h"},
            "spec": {"clusterName": "c", "selector": {
                "matchLabels": {"pool": "a"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
            }},
        }))
        .unwrap();
        let machine = |labels: serde_json::Value| -> Machine {
            serde_json::from_value(json!({"metadata": {"name": "m", "labels": labels}, "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "x", "kind": "X", "name": "m"}}})).unwrap()
        };
        assert!(selects(&mhc, &machine(json!({"pool": "a", "tier": "web"}))));
        assert!(!selects(&mhc, &machine(json!({"pool": "a", "tier": "db"}))));
        assert!(!selects(&mhc, &machine(json!({"pool": "b"}))));
    }
}
