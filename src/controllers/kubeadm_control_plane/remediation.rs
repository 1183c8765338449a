//! Remediating the control-plane Machine a MachineHealthCheck marked, one at a time and
//! never at the cost of etcd's quorum.

use super::*;

/// Remediates the control-plane Machine a MachineHealthCheck marked, when etcd can spare it:
/// one at a time, the Machine goes (its etcd member first) and scaling up replaces it.
pub(super) async fn remediate(
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
        crate::controllers::machines::set_machine_conditions(
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
    crate::controllers::machines::set_machine_conditions(
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

pub(super) fn owner_remediation_requested(m: &Machine) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == api::OWNER_REMEDIATED))
        .is_some_and(|c| c.status == "False")
}

/// Why removing one etcd member now would cost etcd its quorum; None when it is safe. After the
/// removal the cluster has `members - 1` members and needs a majority of them healthy.
pub(super) fn quorum_refusal(members: usize, healthy_others: usize) -> Option<String> {
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
