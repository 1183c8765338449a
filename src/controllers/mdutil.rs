//! MachineDeployment arithmetic and template comparison, shared by the MachineDeployment,
//! MachineSet, Machine and MachineHealthCheck reconcilers (upstream's `mdutil`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use crate::api;
use crate::api::machine::MachineTemplateSpec;
use crate::api::{Machine, MachineDeployment, MachinePool, MachineSet};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::{Context, Result};

/// Why a MachineSet's template is not the MachineDeployment's: the fields whose change rolls
/// Machines out (version, bootstrap, infrastructure, failure domain). Empty when up to date.
pub fn template_differences(
    set: &MachineTemplateSpec,
    deployment: &MachineTemplateSpec,
) -> Vec<String> {
    let (s, d) = (&set.spec, &deployment.spec);
    let mut out = Vec::new();
    if s.version != d.version {
        out.push(format!(
            "* Version {} required",
            d.version.clone().unwrap_or_default()
        ));
    }
    if s.bootstrap
        .config_ref
        .as_ref()
        .map(|r| (&r.api_group, &r.kind, &r.name))
        != d.bootstrap
            .config_ref
            .as_ref()
            .map(|r| (&r.api_group, &r.kind, &r.name))
        || s.bootstrap.data_secret_name != d.bootstrap.data_secret_name
    {
        let kind = d
            .bootstrap
            .config_ref
            .as_ref()
            .map(|r| r.kind.trim_end_matches("Template").to_string());
        out.push(format!(
            "* {} is not up-to-date",
            kind.unwrap_or_else(|| "spec.bootstrap.dataSecretName".into())
        ));
    }
    if s.infrastructure_ref != d.infrastructure_ref {
        out.push(format!(
            "* {} is not up-to-date",
            d.infrastructure_ref.kind.trim_end_matches("Template")
        ));
    }
    if s.failure_domain != d.failure_domain {
        out.push(format!(
            "* Failure domain {} required",
            d.failure_domain.clone().unwrap_or_default()
        ));
    }
    out
}

/// Resolves an int-or-percent against a total, rounding up or down.
pub fn scaled(value: Option<&IntOrString>, total: i32, round_up: bool, default: i32) -> i32 {
    match value {
        None => default,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let pct: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
            let v = pct * f64::from(total) / 100.0;
            (if round_up { v.ceil() } else { v.floor() }) as i32
        }
    }
}

/// Whether a MachineDeployment's or MachinePool's Machine is up to date: the UpToDate
/// condition the Machine controller sets for their Machines.
pub async fn machine_up_to_date(ctx: &Context, machine: &Machine) -> Result<Option<NewCondition>> {
    let Some(owner) = common::controller_of(machine.owner_references()) else {
        return Ok(None);
    };
    let ns = machine.namespace().unwrap_or_default();
    if owner.kind == "MachinePool" {
        // A pool replaces its instances for a new version; a Machine never changes its own.
        let Some(pool) = Api::<MachinePool>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&owner.name)
            .await?
        else {
            return Ok(None);
        };
        let wanted = pool.spec.template.spec.version;
        let differences: Vec<String> = (machine.spec.version != wanted)
            .then(|| format!("* Version {} required", wanted.unwrap_or_default()))
            .into_iter()
            .collect();
        return Ok(Some(super::machines::up_to_date(&differences)));
    }
    if owner.kind != "MachineSet" {
        return Ok(None);
    }
    let Some(ms) = Api::<MachineSet>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&owner.name)
        .await?
    else {
        return Ok(None);
    };
    let Some(md_name) = ms.labels().get(api::DEPLOYMENT_NAME_LABEL) else {
        return Ok(Some(NewCondition::new(
            conditions::types::UP_TO_DATE,
            Status::True,
            conditions::reasons::UP_TO_DATE,
        )));
    };
    let Some(md) = Api::<MachineDeployment>::namespaced(ctx.client.clone(), &ns)
        .get_opt(md_name)
        .await?
    else {
        return Ok(None);
    };
    let differences = outdated_because(&ms, &md, k8s_openapi::jiff::Timestamp::now());
    Ok(Some(super::machines::up_to_date(&differences)))
}

/// Why a MachineSet's Machines are not what its MachineDeployment asks for at `now`: the
/// template fields that differ, and `spec.rollout.after` once it has passed for a MachineSet
/// made before it (how `clusterctl alpha rollout restart` rolls a node group). Empty: up to
/// date, the MachineSet can be the deployment's new one.
pub fn outdated_because(
    ms: &MachineSet,
    md: &MachineDeployment,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let mut reasons = template_differences(&ms.spec.template, &md.spec.template);
    let after = md.spec.rollout.as_ref().and_then(|r| r.after.as_ref());
    if let Some(after) = after
        && after.0 <= now
        && ms
            .metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|created| created.0 < after.0)
    {
        reasons.push("* MachineDeployment spec.rolloutAfter expired".into());
    }
    reasons
}

/// A short stable hash of the template fields that make a rollout (FNV-1a, 32 bits).
pub fn template_hash(template: &MachineTemplateSpec) -> String {
    let s = &template.spec;
    let key = serde_json::to_string(&json!([
        s.version,
        s.bootstrap,
        s.infrastructure_ref,
        s.failure_domain
    ]))
    .expect("JSON");
    let h = key.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{h:08x}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn int_or_percent_rounding() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(scaled(Some(&pct("25%")), 10, true, 0), 3);
        assert_eq!(scaled(Some(&pct("25%")), 10, false, 0), 2);
        assert_eq!(scaled(Some(&IntOrString::Int(2)), 10, false, 0), 2);
        assert_eq!(scaled(None, 10, true, 1), 1);
    }

    #[test]
    fn template_differences_name_what_rolls_out() {
        let t = |version: &str, infra: &str| -> MachineTemplateSpec {
            serde_json::from_value(json!({"spec": {
                "clusterName": "c", "version": version, "bootstrap": {"dataSecretName": "s"},
                "infrastructureRef": {"apiGroup": "g", "kind": "InMemoryMachineTemplate", "name": infra}
            }}))
            .unwrap()
        };
        assert!(template_differences(&t("v1.30.0", "a"), &t("v1.30.0", "a")).is_empty());
        assert_eq!(
            template_differences(&t("v1.30.0", "a"), &t("v1.31.0", "b")),
            [
                "* Version v1.31.0 required",
                "* InMemoryMachine is not up-to-date"
            ]
        );
        assert_ne!(
            template_hash(&t("v1.30.0", "a")),
            template_hash(&t("v1.31.0", "a"))
        );
        // Labels do not roll Machines out.
        let mut labelled = t("v1.30.0", "a");
        labelled.metadata = Some(crate::api::common::ObjectMeta {
            labels: Some(BTreeMap::from([("x".into(), "y".into())])),
            annotations: None,
        });
        assert_eq!(template_hash(&labelled), template_hash(&t("v1.30.0", "a")));
    }
}
