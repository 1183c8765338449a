//! The Cluster controller's claim step: one management cluster at a time reconciles a Cluster
//! ([`crate::reconcile::claim`]). [`decide`] turns what claiming found into the annotations to
//! record and whether to go on; [`reconcile_claim`] does the I/O around it.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use crate::api::{self, Cluster};
use crate::conditions::{NewCondition, Status, reasons, types};
use crate::reconcile::claim::{Claim, LEASE_NAME, LEASE_NAMESPACE};
use crate::reconcile::{Context, Result, common};

/// What to do after claiming.
#[derive(Debug, PartialEq)]
pub struct Decision {
    /// The holder to record on the Cluster ([`api::CLAIMED_BY_ANNOTATION`]); None keeps it.
    pub claimed_by: Option<String>,
    /// Whether a take-over asked for is done (its annotation goes).
    pub took_over: bool,
    /// Why the Cluster waits, and when to look again; None: go on.
    pub wait: Option<(NewCondition, Duration)>,
}

/// How often a Cluster claimed elsewhere looks again: the claim may run out or be released.
const RECHECK: Duration = Duration::from_secs(10);

fn waiting(reason: &str, message: String, again: Duration) -> Option<(NewCondition, Duration)> {
    Some((
        NewCondition::new(types::PAUSED, Status::True, reason).message(message),
        again,
    ))
}

/// How to take a Cluster over, for the messages.
const TAKE_OVER_HINT: &str = "`capictl move --take-over` here takes it over (only once the other management cluster is gone or must stop)";

/// What claiming found, for a Cluster recorded as claimed by `claimed_by` (this management
/// cluster is `me`), deleting or not, with a take-over asked for or not.
pub fn decide(
    claimed_by: Option<&str>,
    me: &str,
    take_over: bool,
    deleting: bool,
    claim: &Claim,
) -> Decision {
    let elsewhere = claimed_by.filter(|holder| *holder != me);
    let ours = |took_over| Decision {
        claimed_by: (claimed_by != Some(me)).then(|| me.to_string()),
        took_over,
        wait: None,
    };
    let lease = format!("Lease {LEASE_NAMESPACE}/{LEASE_NAME}");
    match claim {
        Claim::Ours { settling: None } => ours(take_over),
        Claim::Ours {
            settling: Some(left),
        } => Decision {
            claimed_by: None,
            took_over: take_over,
            wait: waiting(
                reasons::TAKING_OVER,
                format!(
                    "this management cluster took the workload cluster's {lease} from management cluster {}; it gives that one {}s more to notice and stop before it reconciles",
                    elsewhere.unwrap_or("(unknown)"),
                    left.as_secs().max(1)
                ),
                *left,
            ),
        },
        Claim::Theirs(holder) => Decision {
            claimed_by: (claimed_by != Some(holder.uid.as_str())).then(|| holder.uid.clone()),
            // A take-over that lost a race to another write tries again.
            took_over: false,
            wait: waiting(
                reasons::CLAIMED_ELSEWHERE,
                format!(
                    "the workload cluster's {lease} is held by {holder}: that management cluster reconciles this Cluster, and this one leaves it alone until the claim is released or runs out (in {}s unless renewed); {TAKE_OVER_HINT}",
                    holder.expires_in.as_secs()
                ),
                if take_over {
                    Duration::from_secs(2)
                } else {
                    RECHECK.min(holder.expires_in + Duration::from_secs(1))
                },
            ),
        },
        // Nothing to confirm the claim against: a take-over asked for takes it as it is.
        Claim::NoWorkload | Claim::Unreachable { .. } if take_over => ours(true),
        Claim::NoWorkload => match elsewhere {
            None => ours(false),
            Some(holder) => Decision {
                claimed_by: None,
                took_over: false,
                wait: waiting(
                    reasons::CLAIM_NOT_CONFIRMED,
                    format!(
                        "the Cluster was last claimed by management cluster {holder}, and its workload cluster cannot be asked who holds it now (its kubeconfig Secret does not exist); {TAKE_OVER_HINT}"
                    ),
                    RECHECK,
                ),
            },
        },
        Claim::Unreachable { error, lapsed } => match elsewhere {
            Some(holder) => Decision {
                claimed_by: None,
                took_over: false,
                wait: waiting(
                    reasons::CLAIM_NOT_CONFIRMED,
                    format!(
                        "the Cluster was last claimed by management cluster {holder}, and its workload cluster cannot be asked who holds it now ({error}); {TAKE_OVER_HINT}"
                    ),
                    RECHECK,
                ),
            },
            // A claim this management cluster could not renew for longer than it may: another
            // may hold the workload cluster by now. Deleting goes on: a cluster whose control
            // plane is gone must still be deletable.
            None if *lapsed && !deleting => Decision {
                claimed_by: None,
                took_over: false,
                wait: waiting(
                    reasons::CLAIM_LAPSED,
                    format!(
                        "this management cluster could not renew its claim ({lease}) on the workload cluster for longer than it may ({error}); another management cluster may have taken it over since, so this one waits until the workload cluster answers"
                    ),
                    RECHECK,
                ),
            },
            None => Decision {
                claimed_by: None,
                took_over: false,
                wait: None,
            },
        },
    }
}

/// Claims the Cluster's workload cluster, recording the holder on the Cluster. `Some` when the
/// Cluster must wait (claimed elsewhere, or its annotations just changed).
pub async fn reconcile_claim(
    ctx: &Context,
    api: &Api<Cluster>,
    cluster: &Cluster,
) -> Result<Option<Action>> {
    let annotations = cluster.annotations();
    let take_over = annotations.contains_key(api::TAKE_OVER_ANNOTATION);
    let claim = ctx.claims.claim(&ctx.workloads, cluster, take_over).await?;
    let decision = decide(
        annotations
            .get(api::CLAIMED_BY_ANNOTATION)
            .map(String::as_str),
        ctx.management_uid(),
        take_over,
        common::deleting(cluster),
        &claim,
    );
    let mut patch = serde_json::Map::new();
    if let Some(holder) = &decision.claimed_by {
        patch.insert(api::CLAIMED_BY_ANNOTATION.into(), json!(holder));
    }
    if decision.took_over {
        patch.insert(api::TAKE_OVER_ANNOTATION.into(), Value::Null);
    }
    if !patch.is_empty() {
        common::patch_merge(
            api,
            &cluster.name_any(),
            json!({"metadata": {"annotations": patch}}),
        )
        .await?;
    }
    match decision.wait {
        Some((paused, again)) => {
            common::record_paused(api, cluster, paused).await?;
            Ok(Some(Action::requeue(again)))
        }
        // The annotation's change wakes the Cluster (and its objects) again.
        None if !patch.is_empty() => Ok(Some(Action::await_change())),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::claim::Holder;

    fn theirs(uid: &str) -> Claim {
        Claim::Theirs(Holder {
            uid: uid.into(),
            host: Some("mgmt-b".into()),
            cluster: Some("default/prod".into()),
            expires_in: Duration::from_secs(45),
        })
    }

    fn unreachable(lapsed: bool) -> Claim {
        Claim::Unreachable {
            error: "connection refused".into(),
            lapsed,
        }
    }

    /// (claimed_by, take_over, deleting, claim) → (annotation written, take-over done, waits
    /// with this reason).
    type Case<'a> = (
        Option<&'a str>,
        bool,
        bool,
        Claim,
        Option<&'a str>,
        bool,
        Option<&'a str>,
    );

    #[test]
    fn a_cluster_is_reconciled_only_by_the_management_cluster_that_holds_its_claim() {
        let ours = Claim::Ours { settling: None };
        let settling = Claim::Ours {
            settling: Some(Duration::from_secs(20)),
        };
        let cases: Vec<Case> = vec![
            // New here: claimed, recorded, on it goes.
            (None, false, false, ours.clone(), Some("me"), false, None),
            (Some("me"), false, false, ours.clone(), None, false, None),
            // Moved or restored here: the source's uid until the claim is ours.
            (
                Some("b"),
                false,
                false,
                ours.clone(),
                Some("me"),
                false,
                None,
            ),
            // Held elsewhere: recorded, and everything here waits.
            (
                None,
                false,
                false,
                theirs("b"),
                Some("b"),
                false,
                Some(reasons::CLAIMED_ELSEWHERE),
            ),
            (
                Some("me"),
                false,
                false,
                theirs("b"),
                Some("b"),
                false,
                Some(reasons::CLAIMED_ELSEWHERE),
            ),
            (
                Some("b"),
                false,
                false,
                theirs("b"),
                None,
                false,
                Some(reasons::CLAIMED_ELSEWHERE),
            ),
            (
                Some("b"),
                false,
                true,
                theirs("b"),
                None,
                false,
                Some(reasons::CLAIMED_ELSEWHERE),
            ),
            // Taken over: the previous holder is given time to notice, then this one records.
            (
                Some("b"),
                true,
                false,
                settling,
                None,
                true,
                Some(reasons::TAKING_OVER),
            ),
            (Some("b"), true, false, ours.clone(), Some("me"), true, None),
            // A take-over that lost a race tries again.
            (
                Some("b"),
                true,
                false,
                theirs("c"),
                Some("c"),
                false,
                Some(reasons::CLAIMED_ELSEWHERE),
            ),
            // No workload cluster yet: nothing to claim, nothing to fight over.
            (
                None,
                false,
                false,
                Claim::NoWorkload,
                Some("me"),
                false,
                None,
            ),
            (
                Some("me"),
                false,
                false,
                Claim::NoWorkload,
                None,
                false,
                None,
            ),
            (
                Some("b"),
                false,
                false,
                Claim::NoWorkload,
                None,
                false,
                Some(reasons::CLAIM_NOT_CONFIRMED),
            ),
            (
                Some("b"),
                true,
                false,
                Claim::NoWorkload,
                Some("me"),
                true,
                None,
            ),
            // Unreachable: who holds it cannot be known.
            (
                Some("me"),
                false,
                false,
                unreachable(false),
                None,
                false,
                None,
            ),
            (None, false, false, unreachable(false), None, false, None),
            (
                Some("b"),
                false,
                false,
                unreachable(false),
                None,
                false,
                Some(reasons::CLAIM_NOT_CONFIRMED),
            ),
            (
                Some("b"),
                true,
                false,
                unreachable(false),
                Some("me"),
                true,
                None,
            ),
            // Ours, unrenewed too long: another may hold it now; deletion goes on.
            (
                Some("me"),
                false,
                false,
                unreachable(true),
                None,
                false,
                Some(reasons::CLAIM_LAPSED),
            ),
            (
                Some("me"),
                false,
                true,
                unreachable(true),
                None,
                false,
                None,
            ),
        ];
        for (claimed_by, take_over, deleting, claim, written, took_over, reason) in cases {
            let d = decide(claimed_by, "me", take_over, deleting, &claim);
            assert_eq!(
                (
                    d.claimed_by.as_deref(),
                    d.took_over,
                    d.wait.as_ref().map(|(c, _)| c.reason.as_str())
                ),
                (written, took_over, reason),
                "{claimed_by:?} take_over={take_over} deleting={deleting} {claim:?}"
            );
        }
    }

    #[test]
    fn the_paused_condition_names_the_holder_and_the_way_out() {
        let d = decide(Some("b"), "me", false, false, &theirs("b"));
        let (condition, again) = d.wait.unwrap();
        assert_eq!(
            condition.message,
            "the workload cluster's Lease kube-system/capictl-management is held by management cluster b (host mgmt-b, Cluster default/prod there): that management cluster reconciles this Cluster, and this one leaves it alone until the claim is released or runs out (in 45s unless renewed); `capictl move --take-over` here takes it over (only once the other management cluster is gone or must stop)"
        );
        assert_eq!(again, RECHECK);
    }
}
