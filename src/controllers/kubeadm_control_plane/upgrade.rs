//! What makes a control-plane Machine out of date (version, infrastructure template,
//! `rolloutAfter`, certificates about to expire), recorded on each Machine's `UpToDate`.

use super::*;

/// Why a control-plane Machine is not what the KubeadmControlPlane asks for; empty when it is.
pub(super) fn outdated_reasons(
    kcp: &KubeadmControlPlane,
    machine: &Machine,
    infra_template: Option<&str>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if machine.spec.version.as_deref() != Some(kcp.spec.version.as_str()) {
        reasons.push(format!("* Version {} required", kcp.spec.version));
    }
    let wanted = &kcp.spec.machine_template.spec.infrastructure_ref.name;
    if infra_template.is_some_and(|t| t != wanted) {
        reasons.push(format!(
            "* {} is not up-to-date",
            kcp.spec
                .machine_template
                .spec
                .infrastructure_ref
                .kind
                .trim_end_matches("Template")
        ));
    }
    if kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.after.as_ref())
        .is_some_and(|after| {
            machine
                .meta()
                .creation_timestamp
                .as_ref()
                .is_some_and(|c| c.0 < after.0)
                && after.0 <= k8s_openapi::jiff::Timestamp::now()
        })
    {
        reasons.push("* KubeadmControlPlane spec.rolloutAfter expired".into());
    }
    if let Some(days) = kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.before.as_ref())
        .and_then(|b| b.certificates_expiry_days)
        && let Some(expiry) = machine
            .status
            .as_ref()
            .and_then(|s| s.certificates_expiry_date.as_ref())
        && expiry.0
            < k8s_openapi::jiff::Timestamp::now()
                + k8s_openapi::jiff::SignedDuration::from_hours(24 * i64::from(days))
    {
        reasons.push(format!(
            "* Certificates expire at {}, within spec.rollout.before.certificatesExpiryDays ({days} days)",
            expiry.0
        ));
    }
    reasons
}

/// Marks each Machine UpToDate or not (version, infrastructure template, rolloutAfter), with
/// its health conditions, in one write; the reasons of those not up to date, by name.
pub(super) async fn mark_machines(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    scope: &Scope,
    health: &Health,
) -> Result<BTreeMap<String, Vec<String>>> {
    let ns = kcp.namespace().unwrap_or_default();
    let mut outdated = BTreeMap::new();
    for m in &scope.machines {
        let template = ctx
            .external
            .get(&ns, &m.spec.infrastructure_ref)
            .await?
            .and_then(|i| {
                i.annotations()
                    .get(api::CLONED_FROM_NAME_ANNOTATION)
                    .cloned()
            });
        let reasons = outdated_reasons(kcp, m, template.as_deref());
        let mut conditions = vec![crate::controllers::machines::up_to_date(&reasons)];
        conditions.extend(
            health
                .machines
                .get(&m.name_any())
                .cloned()
                .unwrap_or_default(),
        );
        crate::controllers::machines::set_machine_conditions(&scope.machines_api, m, conditions)
            .await?;
        if !reasons.is_empty() {
            outdated.insert(m.name_any(), reasons);
        }
    }
    Ok(outdated)
}
