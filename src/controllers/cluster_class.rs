//! ClusterClass: upstream's clusterclass controller. Every template the class references is
//! read (machine pool classes' included, as upstream does), the class becomes an owner of each
//! (so templates go and move with it), and the class's variables are published in
//! `status.variables` for the topology controller and for users.
//!
//! Conditions: `RefVersionsUpToDate` (False naming each template that is missing or written at
//! an older API version than its provider serves), `VariablesReady`, and `Paused`.
//! `status.observedGeneration` moves only when every template was found, as upstream's does.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::api::{Api, ResourceExt};
use kube::runtime::controller::Action;

use crate::api::cluster_class::{
    ClusterClass, ClusterClassSpec, ClusterClassStatus, conditions, reasons,
};
use crate::api::common::TemplateReference;
use crate::conditions::{NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Result, StepContext};

/// Every template a class references, with where in the spec it is (for messages).
pub fn template_refs(spec: &ClusterClassSpec) -> Vec<(String, &TemplateReference)> {
    let mut refs = vec![
        (
            "spec.infrastructure.templateRef".to_string(),
            &spec.infrastructure.template_ref,
        ),
        (
            "spec.controlPlane.templateRef".to_string(),
            &spec.control_plane.template_ref,
        ),
    ];
    if let Some(machines) = &spec.control_plane.machine_infrastructure {
        refs.push((
            "spec.controlPlane.machineInfrastructure.templateRef".into(),
            &machines.template_ref,
        ));
    }
    let workers = spec.workers.as_ref();
    let deployments = workers
        .and_then(|w| w.machine_deployments.as_ref())
        .into_iter()
        .flatten()
        .map(|c| ("machineDeployments", &c.bootstrap, &c.infrastructure));
    let pools = workers
        .and_then(|w| w.machine_pools.as_ref())
        .into_iter()
        .flatten()
        .map(|c| ("machinePools", &c.bootstrap, &c.infrastructure));
    let mut index: std::collections::HashMap<&str, usize> = Default::default();
    for (list, bootstrap, infrastructure) in deployments.chain(pools) {
        let i = index.entry(list).or_default();
        let at = format!("spec.workers.{list}[{i}]");
        *i += 1;
        refs.push((
            format!("{at}.bootstrap.templateRef"),
            &bootstrap.template_ref,
        ));
        refs.push((
            format!("{at}.infrastructure.templateRef"),
            &infrastructure.template_ref,
        ));
    }
    refs
}

/// What was found of one template reference.
#[derive(Debug, PartialEq)]
pub enum Found {
    /// There, at the version its provider serves.
    Current,
    /// There, but the reference names an older version than the provider's newest.
    Outdated {
        served: String,
    },
    Missing {
        why: String,
    },
}

/// The RefVersionsUpToDate condition for what was found, by reference.
pub fn ref_versions_condition(
    namespace: &str,
    found: &[(String, &TemplateReference, Found)],
) -> NewCondition {
    let describe =
        |path: &str, r: &TemplateReference| format!("{} {namespace}/{} ({path})", r.kind, r.name);
    let missing: Vec<String> = found
        .iter()
        .filter_map(|(path, r, f)| match f {
            Found::Missing { why } => Some(format!("{}: {why}", describe(path, r))),
            _ => None,
        })
        .collect();
    if !missing.is_empty() {
        return NewCondition::new(
            conditions::REF_VERSIONS_UP_TO_DATE,
            Status::False,
            reasons::TEMPLATE_NOT_FOUND,
        )
        .message(format!(
            "{}; Clusters of this class wait until every template exists",
            missing.join("; ")
        ));
    }
    let outdated: Vec<String> = found
        .iter()
        .filter_map(|(path, r, f)| match f {
            Found::Outdated { served } => Some(format!(
                "{} refers to {}, its provider serves {served}",
                describe(path, r),
                r.api_version
            )),
            _ => None,
        })
        .collect();
    if outdated.is_empty() {
        NewCondition::new(
            conditions::REF_VERSIONS_UP_TO_DATE,
            Status::True,
            reasons::REF_VERSIONS_UP_TO_DATE,
        )
    } else {
        NewCondition::new(
            conditions::REF_VERSIONS_UP_TO_DATE,
            Status::False,
            reasons::REF_VERSIONS_NOT_UP_TO_DATE,
        )
        .message(outdated.join("; "))
    }
}

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<ClusterClass>("clusterclass");
    w.run("clusterclass", controller, reconcile)
}

/// Finds one template and makes the class an owner of it, as [`crate::reconcile::external::Resolver::adopt_template`] does for Clusters.
async fn adopt(
    ctx: &Context,
    class: &ClusterClass,
    namespace: &str,
    reference: &TemplateReference,
) -> Result<Found> {
    let (api, resource) = match ctx.external.template_api(namespace, reference).await {
        Ok(found) => found,
        Err(e) => return Ok(Found::Missing { why: e.to_string() }),
    };
    let version = reference.api_version.rsplit('/').next().unwrap_or_default();
    let Some(template) = api.get_opt(&reference.name).await? else {
        return Ok(Found::Missing {
            why: "not found".into(),
        });
    };
    crate::reconcile::external::add_owner(&api, &template, class).await?;
    Ok(if resource.version == version {
        Found::Current
    } else {
        Found::Outdated {
            served: resource.api_version,
        }
    })
}

pub async fn reconcile(class: Arc<ClusterClass>, ctx: Arc<Context>) -> Result<Action> {
    let namespace = class.namespace().unwrap_or_default();
    let api: Api<ClusterClass> = Api::namespaced(ctx.client.clone(), &namespace);
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        None,
        "ClusterClass",
        class.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, &class, paused).await;
    }
    if common::deleting(class.as_ref()) {
        // Its templates are collected with it by their owner references.
        return Ok(Action::await_change());
    }

    let mut found = Vec::new();
    for (path, reference) in template_refs(&class.spec) {
        let outcome = adopt(&ctx, &class, &namespace, reference)
            .await
            .step("reading the class's templates")?;
        found.push((path, reference, outcome));
    }
    let all_found = !found
        .iter()
        .any(|(_, _, f)| matches!(f, Found::Missing { .. }));

    let mut status = class.status.clone().unwrap_or_default();
    status.variables = Some(crate::topology::variables::of_class(&class.spec));
    common::set_conditions(
        &mut status.conditions,
        class.metadata.generation,
        vec![
            paused,
            ref_versions_condition(&namespace, &found),
            NewCondition::new(
                conditions::VARIABLES_READY,
                Status::True,
                reasons::VARIABLES_READY,
            ),
        ],
    );
    if all_found {
        status.observed_generation = class.metadata.generation;
    }
    let previous: Option<&ClusterClassStatus> = class.status.as_ref();
    common::write_status(&api, &class.name_any(), previous, &status).await?;
    Ok(if all_found {
        Action::await_change()
    } else {
        // A template created later wakes nothing here: look again.
        Action::requeue(std::time::Duration::from_secs(10))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class() -> ClusterClass {
        crate::yaml::from_str(
            r#"
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: quick-start, namespace: default}
spec:
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DockerClusterTemplate, name: qs-cluster}
  controlPlane:
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: qs-cp}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DockerMachineTemplate, name: qs-cp-machines}
  workers:
    machineDeployments:
    - class: default-worker
      bootstrap:
        templateRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta2, kind: KubeadmConfigTemplate, name: qs-worker-bootstrap}
      infrastructure:
        templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DockerMachineTemplate, name: qs-worker}
  variables:
  - name: imageRepository
    required: true
    schema:
      openAPIV3Schema: {type: string, default: ""}
"#,
        )
        .unwrap()
    }

    #[test]
    fn every_template_is_referenced_with_its_place() {
        let class = class();
        let refs: Vec<String> = template_refs(&class.spec)
            .into_iter()
            .map(|(path, r)| format!("{path}={}", r.name))
            .collect();
        assert_eq!(
            refs,
            [
                "spec.infrastructure.templateRef=qs-cluster",
                "spec.controlPlane.templateRef=qs-cp",
                "spec.controlPlane.machineInfrastructure.templateRef=qs-cp-machines",
                "spec.workers.machineDeployments[0].bootstrap.templateRef=qs-worker-bootstrap",
                "spec.workers.machineDeployments[0].infrastructure.templateRef=qs-worker",
            ]
        );
    }

    #[test]
    fn variables_are_published_inline() {
        let variables = crate::topology::variables::of_class(&class().spec);
        assert_eq!(variables.len(), 1);
        assert_eq!(variables[0].name, "imageRepository");
        assert_eq!(variables[0].definitions[0].from, "inline");
        assert!(variables[0].definitions[0].required);
        assert_eq!(
            variables[0].definitions[0].schema.open_api_v3_schema["type"],
            "string"
        );
    }

    #[test]
    fn missing_and_outdated_templates_are_named() {
        let class = class();
        let refs = template_refs(&class.spec);
        let with = |outcomes: Vec<Found>| -> NewCondition {
            let found: Vec<_> = refs
                .iter()
                .cloned()
                .zip(outcomes)
                .map(|((p, r), f)| (p, r, f))
                .collect();
            ref_versions_condition("default", &found)
        };
        let current = || (0..5).map(|_| Found::Current).collect::<Vec<_>>();
        let ok = with(current());
        assert_eq!(
            (ok.status, ok.reason.as_str()),
            (Status::True, "RefVersionsUpToDate")
        );
        let mut outcomes = current();
        outcomes[2] = Found::Missing {
            why: "not found".into(),
        };
        let missing = with(outcomes);
        assert_eq!(missing.status, Status::False);
        assert_eq!(missing.reason, "TemplateNotFound");
        assert!(
            missing.message.contains(
                "DockerMachineTemplate default/qs-cp-machines (spec.controlPlane.machineInfrastructure.templateRef): not found"
            ),
            "{}",
            missing.message
        );
        let mut outcomes = current();
        outcomes[0] = Found::Outdated {
            served: "infrastructure.cluster.x-k8s.io/v1beta3".into(),
        };
        let outdated = with(outcomes);
        assert_eq!(outdated.reason, "RefVersionsNotUpToDate");
        assert!(
            outdated
                .message
                .contains("serves infrastructure.cluster.x-k8s.io/v1beta3")
        );
    }
}
