//! Deleting a Machine, in upstream's order: pre-drain hooks, drain, pre-terminate hooks, the
//! infrastructure machine, the bootstrap config, the Node; then the finalizer goes. Each
//! reconcile takes the next step it can and records in `Deleting` what it waits for.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

use super::hooks;
use crate::api;
use crate::api::machine::MachineDeletionStatus;
use crate::api::{Cluster, Machine, MachineDrainRule};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use crate::reconcile::external::Deletion;
use crate::reconcile::{Context, Result, StepContext};
use crate::workload::drain;

/// How far a Machine's deletion has come.
#[derive(Debug, PartialEq)]
enum Progress {
    /// A step is under way: the `Deleting` condition's reason and message, and when to look
    /// again.
    Waiting {
        reason: &'static str,
        message: String,
        requeue: Duration,
    },
    /// Everything the Machine owns is gone.
    Done,
}

impl Progress {
    fn waiting(reason: &'static str, message: String, requeue_secs: u64) -> Progress {
        Progress::Waiting {
            reason,
            message,
            requeue: Duration::from_secs(requeue_secs),
        }
    }
}

pub(super) async fn reconcile_delete(
    ctx: &Context,
    api: &Api<Machine>,
    machine: &Machine,
    cluster: Option<&Cluster>,
) -> Result<Action> {
    let mut status = machine.status.clone().unwrap_or_default();
    let mut deletion = status.deletion.clone().unwrap_or_default();
    let progress = next_step(ctx, machine, cluster, &mut deletion)
        .await
        .step("deleting the Machine")?;
    match progress {
        Progress::Done => {
            common::remove_finalizer(api, machine, api::MACHINE_FINALIZER).await?;
            Ok(Action::await_change())
        }
        Progress::Waiting {
            reason,
            message,
            requeue,
        } => {
            status.deletion = Some(deletion);
            let mut changed = vec![
                NewCondition::new(conditions::types::DELETING, Status::True, reason)
                    .message(message),
            ];
            changed.extend(super::status::deleting_summary(machine, reason));
            common::set_conditions(&mut status.conditions, machine.meta().generation, changed);
            common::write_status(api, &machine.name_any(), machine.status.as_ref(), &status)
                .await?;
            Ok(Action::requeue(requeue))
        }
    }
}

/// Takes the next deletion step, recording when hooks and the drain started in `deletion`.
async fn next_step(
    ctx: &Context,
    machine: &Machine,
    cluster: Option<&Cluster>,
    deletion: &mut MachineDeletionStatus,
) -> Result<Progress> {
    let ns = machine.namespace().unwrap_or_default();
    let node_name = super::super::machines::node_name(machine).map(String::from);
    // The workload cluster is asked only while it is not being deleted itself.
    let remote = match (cluster, &node_name) {
        (Some(c), Some(_)) if !common::deleting(c) => ctx
            .workloads
            .client(&ns, &c.name_any())
            .await
            .unwrap_or(None),
        _ => None,
    };

    if let (Some(client), Some(node), Some(cluster)) = (&remote, &node_name, cluster) {
        let rules = drain_rules(ctx, &ns).await?;
        let rules = drain::rules_for(&rules, machine, cluster);
        if let Some(waiting) =
            drain_node(ctx, machine, client, node, rules.clone(), deletion).await?
        {
            return Ok(waiting);
        }
        if let Some(waiting) = wait_for_volumes(machine, client, node, rules, deletion).await? {
            return Ok(waiting);
        }
    }
    let pre_terminate = hooks(machine.annotations(), api::PRE_TERMINATE_HOOK);
    if !pre_terminate.is_empty() {
        deletion
            .wait_for_pre_terminate_hook_start_time
            .get_or_insert(Time(Timestamp::now()));
        return Ok(Progress::waiting(
            api::machine::reasons::WAITING_FOR_PRE_TERMINATE_HOOK,
            format!(
                "Waiting for pre-terminate hooks to succeed (hooks: {})",
                pre_terminate.join(",")
            ),
            2,
        ));
    }
    let references = [
        (
            Some(&machine.spec.infrastructure_ref),
            conditions::reasons::WAITING_FOR_INFRASTRUCTURE_DELETION,
        ),
        (
            machine.spec.bootstrap.config_ref.as_ref(),
            api::machine::reasons::WAITING_FOR_BOOTSTRAP_DELETION,
        ),
    ];
    for (reference, reason) in references {
        let Some(reference) = reference else { continue };
        match ctx.external.delete(&ns, reference).await? {
            Deletion::Waiting => {
                return Ok(Progress::waiting(
                    reason,
                    format!("Waiting for {} to be deleted", reference.kind),
                    1,
                ));
            }
            Deletion::Gone => {}
            Deletion::NotInstalled(why) => {
                ctx.events.publish(
                    super::CONTROLLER,
                    machine,
                    Severity::Warning,
                    "DeletionSkipped",
                    why,
                );
            }
        }
    }
    if let (Some(client), Some(node)) = (&remote, &node_name) {
        match Api::<Node>::all(client.clone())
            .delete(node, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                let note = format!("Deleted Node {node:?}");
                ctx.events.publish(
                    super::CONTROLLER,
                    machine,
                    Severity::Normal,
                    "SuccessfulDeleteNode",
                    note,
                );
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                let note = format!("Deleting Node {node:?} failed: {e}");
                ctx.events.publish(
                    super::CONTROLLER,
                    machine,
                    Severity::Warning,
                    "FailedDeleteNode",
                    note,
                );
                return Ok(Progress::waiting(
                    api::machine::reasons::DELETING_NODE,
                    format!("Deleting Node {node} failed: {e}"),
                    2,
                ));
            }
        }
    }
    Ok(Progress::Done)
}

/// The MachineDrainRules of the Machine's namespace (none where their kind is not served).
async fn drain_rules(ctx: &Context, namespace: &str) -> Result<Vec<MachineDrainRule>> {
    match Api::<MachineDrainRule>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e).step("listing MachineDrainRules"),
    }
}

/// A start time as upstream's messages show it (RFC 3339, to the second).
fn to_seconds(t: &Time) -> String {
    Timestamp::from_second(t.0.as_second())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Whether a step guarded by `annotation` and timed out by `timeout` seconds from `started`
/// still applies: not excluded, and not past its timeout (none when 0).
fn still_applies(machine: &Machine, annotation: &str, started: &Time, timeout: i32) -> bool {
    !machine.annotations().contains_key(annotation)
        && (timeout <= 0 || common::seconds_since(started) <= i64::from(timeout))
}

/// Pre-drain hooks, then the drain (unless excluded or timed out); what it waits for, if
/// anything. Evictions refused (a PodDisruptionBudget, say) are an Event too: what a user
/// must act on.
async fn drain_node(
    ctx: &Context,
    machine: &Machine,
    client: &Client,
    node: &str,
    rules: Vec<&MachineDrainRule>,
    deletion: &mut MachineDeletionStatus,
) -> Result<Option<Progress>> {
    let pre_drain = hooks(machine.annotations(), api::PRE_DRAIN_HOOK);
    if !pre_drain.is_empty() {
        deletion
            .wait_for_pre_drain_hook_start_time
            .get_or_insert(Time(Timestamp::now()));
        return Ok(Some(Progress::waiting(
            api::machine::reasons::WAITING_FOR_PRE_DRAIN_HOOK,
            format!(
                "Waiting for pre-drain hooks to succeed (hooks: {})",
                pre_drain.join(",")
            ),
            2,
        )));
    }
    let started = deletion
        .node_drain_start_time
        .get_or_insert(Time(Timestamp::now()))
        .clone();
    let timeout = machine
        .spec
        .deletion
        .as_ref()
        .and_then(|d| d.node_drain_timeout_seconds)
        .unwrap_or(0);
    if !still_applies(machine, api::EXCLUDE_DRAIN_ANNOTATION, &started, timeout) {
        return Ok(None);
    }
    let remaining = drain::drain(client, node, rules).await?;
    if remaining.completed() {
        return Ok(None);
    }
    let message = remaining.message(&to_seconds(&started));
    if !remaining.refused.is_empty() {
        ctx.events.publish(
            super::CONTROLLER,
            machine,
            Severity::Warning,
            "FailedDrainNode",
            message.clone(),
        );
    }
    Ok(Some(Progress::waiting(
        api::machine::reasons::DRAINING_NODE,
        message,
        2,
    )))
}

/// After the drain, the Node's volumes detaching (unless excluded or timed out), as upstream
/// waits for them so that a volume is not lost with the machine it was attached to.
async fn wait_for_volumes(
    machine: &Machine,
    client: &Client,
    node: &str,
    rules: Vec<&MachineDrainRule>,
    deletion: &mut MachineDeletionStatus,
) -> Result<Option<Progress>> {
    let started = deletion
        .wait_for_node_volume_detach_start_time
        .clone()
        .unwrap_or(Time(Timestamp::now()));
    let timeout = machine
        .spec
        .deletion
        .as_ref()
        .and_then(|d| d.node_volume_detach_timeout_seconds)
        .unwrap_or(0);
    let annotation = api::machine::EXCLUDE_WAIT_FOR_VOLUME_DETACH_ANNOTATION;
    if !still_applies(machine, annotation, &started, timeout) {
        return Ok(None);
    }
    let attached = drain::volumes_to_detach(client, node, rules).await?;
    if attached.is_empty() {
        return Ok(None);
    }
    deletion.wait_for_node_volume_detach_start_time = Some(started.clone());
    Ok(Some(Progress::waiting(
        api::machine::reasons::WAITING_FOR_VOLUME_DETACH,
        attached.message(&to_seconds(&started)),
        2,
    )))
}
