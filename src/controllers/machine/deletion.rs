//! Deleting a Machine, in upstream's order: pre-drain hooks, drain, pre-terminate hooks, the
//! infrastructure machine, the bootstrap config, the Node; then the finalizer goes. Each
//! reconcile takes the next step it can and records in `Deleting` what it waits for.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

use super::hooks;
use crate::api;
use crate::api::machine::MachineDeletionStatus;
use crate::api::{Cluster, Machine};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use crate::reconcile::external::Deletion;
use crate::reconcile::{Context, Result, StepContext};

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

    if let (Some(client), Some(node)) = (&remote, &node_name)
        && let Some(waiting) = drain(machine, client, node, deletion).await?
    {
        // Evictions refused (a PodDisruptionBudget, say) are what a user must act on.
        if let Progress::Waiting {
            reason: api::machine::reasons::DRAINING_NODE,
            message,
            ..
        } = &waiting
            && message.contains("\n* ")
        {
            ctx.events.publish(
                super::CONTROLLER,
                machine,
                Severity::Warning,
                "FailedDrainNode",
                message.clone(),
            );
        }
        return Ok(waiting);
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

/// Pre-drain hooks, then the drain (unless excluded or timed out); what it waits for, if
/// anything.
async fn drain(
    machine: &Machine,
    client: &Client,
    node: &str,
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
    if machine
        .annotations()
        .contains_key(api::EXCLUDE_DRAIN_ANNOTATION)
    {
        return Ok(None);
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
    if timeout > 0 && common::seconds_since(&started) > i64::from(timeout) {
        return Ok(None);
    }
    let remaining = crate::workload::drain::drain(client, node).await?;
    if remaining.pods == 0 {
        return Ok(None);
    }
    let mut message = format!(
        "Drain not completed yet (started at {}): {} Pods to evict",
        started.0, remaining.pods
    );
    for refused in &remaining.refused {
        message.push_str(&format!("\n* {refused}"));
    }
    Ok(Some(Progress::waiting(
        api::machine::reasons::DRAINING_NODE,
        message,
        2,
    )))
}
