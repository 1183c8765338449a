//! One step towards `spec.replicas` up-to-date control-plane Machines: which Machine goes when
//! scaling down, creating one with its KubeadmConfig and infrastructure machine, removing one
//! with etcd leadership moved off it first.

use super::*;

/// One step towards `spec.replicas` Machines that are all up to date: create one (scaling up,
/// or surging during a rollout), else remove one (scaling down, or an outdated one).
pub(super) async fn scale(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
    live: &[&Machine],
    outdated: &BTreeMap<String, Vec<String>>,
) -> Result<()> {
    let desired = kcp.spec.replicas.unwrap_or(1).max(0) as usize;
    let max_surge = match kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.as_ref())
    {
        Some(IntOrString::Int(n)) => *n as usize,
        _ => 1,
    };
    let rolling = !outdated.is_empty();
    let outdated_names: BTreeSet<String> = outdated.keys().cloned().collect();
    if live.len() < desired || (rolling && live.len() < desired + max_surge && max_surge > 0) {
        let name = create_machine(ctx, kcp, cluster).await?;
        let why = if rolling {
            format!("to replace {} outdated", outdated.len())
        } else {
            format!("towards {desired} replicas")
        };
        let note = format!("Created control plane Machine {name:?} {why}");
        ctx.events
            .publish(CONTROLLER, kcp, Severity::Normal, "SuccessfulScaleUp", note);
    } else if (live.len() > desired || rolling)
        && let Some(victim) = pick_for_removal(live, &outdated_names)
    {
        let keep: Vec<&Machine> = live
            .iter()
            .copied()
            .filter(|m| m.name_any() != victim.name_any())
            .collect();
        remove_machine(ctx, cluster, victim, &keep).await?;
        let why = match outdated.get(&victim.name_any()) {
            Some(reasons) => format!("it is outdated: {}", reasons.join("; ")),
            None => format!("scaling down to {desired} replicas"),
        };
        let note = format!(
            "Deleting control plane Machine {:?}: {why}",
            victim.name_any()
        );
        ctx.events.publish(
            CONTROLLER,
            kcp,
            Severity::Normal,
            "SuccessfulScaleDown",
            note,
        );
    }
    Ok(())
}

/// Which Machine goes when scaling down, as upstream picks it: among the outdated Machines a
/// user marked with `cluster.x-k8s.io/delete-machine`, else any marked one, else the outdated
/// ones (`outdated`, during a rollout), else all; of those, the oldest in the failure domain
/// with the most Machines.
pub(super) fn pick_for_removal<'a>(
    machines: &[&'a Machine],
    outdated: &BTreeSet<String>,
) -> Option<&'a Machine> {
    let marked = |m: &&&Machine| m.annotations().contains_key(api::DELETE_MACHINE_ANNOTATION);
    let is_outdated = |m: &&&Machine| outdated.contains(&m.name_any());
    let choices: [Vec<&&Machine>; 4] = [
        machines
            .iter()
            .filter(|m| marked(m) && is_outdated(m))
            .collect(),
        machines.iter().filter(marked).collect(),
        machines.iter().filter(is_outdated).collect(),
        machines.iter().collect(),
    ];
    let candidates = choices.into_iter().find(|c| !c.is_empty())?;
    let mut per_domain: BTreeMap<Option<String>, usize> = BTreeMap::new();
    for m in &candidates {
        *per_domain.entry(m.spec.failure_domain.clone()).or_default() += 1;
    }
    let busiest = per_domain
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| d.clone())?;
    candidates
        .into_iter()
        .filter(|m| m.spec.failure_domain == busiest)
        .min_by(|a, b| {
            a.meta()
                .creation_timestamp
                .cmp(&b.meta().creation_timestamp)
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .copied()
}

/// Creates one control-plane Machine with its KubeadmConfig and infrastructure machine.
pub(super) async fn create_machine(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
) -> Result<String> {
    let ns = kcp.namespace().unwrap_or_default();
    let name = crate::apiserver::object::generate_name(&format!("{}-", kcp.name_any()));
    let mut labels = kcp
        .spec
        .machine_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(api::CLUSTER_NAME_LABEL.into(), cluster.name_any());
    labels.insert(api::CONTROL_PLANE_LABEL.into(), String::new());
    labels.insert(api::CONTROL_PLANE_NAME_LABEL.into(), kcp.name_any());
    let owner = common::owner_reference(kcp, true);
    let template = &kcp.spec.machine_template.spec;
    let infrastructure_ref = crate::reconcile::external::clone_template(
        ctx,
        &ns,
        &template.infrastructure_ref,
        &name,
        &labels,
        owner.clone(),
    )
    .await?;
    let config = KubeadmConfig {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        spec: kcp.spec.kubeadm_config_spec.clone().unwrap_or_default(),
        status: None,
    };
    Api::<KubeadmConfig>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &config)
        .await?;
    let machine = Machine {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels),
            annotations: Some({
                let mut annotations = kcp
                    .spec
                    .machine_template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.clone())
                    .unwrap_or_default();
                annotations.insert(
                    api::kubeadm_control_plane::KCP_CLEANUP_HOOK.into(),
                    String::new(),
                );
                annotations
            }),
            owner_references: Some(vec![owner]),
            finalizers: Some(vec![api::MACHINE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: MachineSpec {
            cluster_name: cluster.name_any(),
            version: Some(kcp.spec.version.clone()),
            bootstrap: Bootstrap {
                config_ref: Some(ContractVersionedObjectReference {
                    api_group: "bootstrap.cluster.x-k8s.io".into(),
                    kind: "KubeadmConfig".into(),
                    name: name.clone(),
                }),
                data_secret_name: None,
            },
            infrastructure_ref,
            readiness_gates: Some(readiness_gates(template.readiness_gates.as_deref())),
            deletion: template.deletion.clone(),
            taints: template.taints.clone(),
            ..Default::default()
        },
        status: None,
    };
    Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), &machine)
        .await?;
    Ok(name)
}

/// Removes a control-plane Machine, as upstream does: leadership moves off its etcd member
/// first (a leaderless etcd stalls writes while it elects), then the Machine is deleted; its
/// member goes in the pre-terminate hook ([`release_members`]), once the Machine is drained and
/// the load balancer sends it nothing new, so its API server never serves without etcd.
pub(super) async fn remove_machine(
    ctx: &Context,
    cluster: &Cluster,
    machine: &Machine,
    keep: &[&Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    if let (Some(clients), Some(member)) = (&ctx.etcd, node_name(machine)) {
        let etcd = clients.connect(&ns, &cluster.name_any()).await?;
        let successor = keep
            .iter()
            .filter(|m| is_true(m, "Ready"))
            .find_map(|m| node_name(m));
        etcd::forward_leadership(etcd.as_ref(), member, successor).await?;
    }
    Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .delete(&machine.name_any(), &DeleteParams::background())
        .await?;
    Ok(())
}

/// A control-plane Machine is Ready only with its static Pods and etcd member healthy (the
/// conditions [`health`] sets), then whatever gates the template adds.
pub(super) fn readiness_gates(from_template: Option<&[ConditionGate]>) -> Vec<ConditionGate> {
    let mut gates: Vec<ConditionGate> = health::MACHINE_CONDITIONS
        .iter()
        .map(|t| ConditionGate {
            condition_type: t.to_string(),
            polarity: None,
        })
        .collect();
    for gate in from_template.unwrap_or_default() {
        if !gates
            .iter()
            .any(|g| g.condition_type == gate.condition_type)
        {
            gates.push(gate.clone());
        }
    }
    gates
}
