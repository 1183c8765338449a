//! The InMemoryMachine (and DevMachine) reconciler: provisioned once its simulated boot is
//! done, with its provider ID and status.

use super::*;

pub async fn reconcile_machine<M: SimulatedMachine>(
    im: Arc<M>,
    ctx: Arc<InMemory>,
) -> Result<Action> {
    if !im.simulated() {
        return Ok(Action::await_change());
    }
    let ns = im.namespace().unwrap_or_default();
    let api: Api<M> = Api::namespaced(ctx.client.clone(), &ns);
    let machine_ref = im
        .owner_references()
        .iter()
        .find(|r| r.kind == "Machine")
        .cloned();
    let cluster = common::labelled_cluster(&ctx.client, im.as_ref()).await?;
    let workload = cluster
        .as_ref()
        .and_then(|c| ctx.workloads.get(&key(&ns, &c.name_any())));
    if common::deleting(im.as_ref()) {
        // Paused (a move deleting the source's objects), the machine stays a member.
        if simulation_paused(cluster.as_ref(), &M::kind(&()), im.annotations()).0 {
            return Ok(Action::await_change());
        }
        if let Some(w) = &workload {
            w.etcd.leave(&im.name_any());
        }
        common::remove_finalizer(&api, im.as_ref(), M::FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let (Some(machine_ref), Some(cluster)) = (machine_ref, cluster) else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let Some(machine) = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&machine_ref.name)
        .await?
    else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if common::ensure_finalizer(&api, im.as_ref(), M::FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let (is_paused, paused) = simulation_paused(Some(&cluster), &M::kind(&()), im.annotations());
    let boot = boot_state(
        im.as_ref(),
        &machine,
        &cluster,
        is_paused,
        workload.is_some(),
        Timestamp::now(),
    );

    // Phases: a booted machine has its Node (and, on a control plane, its etcd member).
    if let (Boot::Running, Some(workload)) = (&boot, &workload) {
        let control_plane = machine.labels().contains_key(api::CONTROL_PLANE_LABEL);
        let provider_id = provider_id(im.as_ref());
        ensure_node(
            &workload.client,
            &im.name_any(),
            &provider_id,
            machine.spec.version.as_deref().unwrap_or_default(),
            control_plane,
        )
        .await?;
        if control_plane {
            workload.etcd.join(&im.name_any());
        }
        if im.provider_id() != Some(provider_id.as_str()) {
            common::patch_merge(
                &api,
                &im.name_any(),
                json!({"spec": {"providerID": provider_id}}),
            )
            .await?;
            return Ok(Action::await_change());
        }
    }

    // Status.
    let status = machine_status(im.as_ref(), &machine, paused, &boot);
    common::write_status(&api, &im.name_any(), im.status(), &status).await?;
    Ok(match boot {
        Boot::Waiting { requeue, .. } => Action::requeue(requeue),
        // After a restart of this process, the first reconcile of every machine finds its
        // workload cluster gone and waits for it, then makes the Node again; a running
        // machine has nothing to look at until then.
        Boot::Running => Action::requeue(common::spread(im.as_ref(), common::RESYNC)),
    })
}

/// The InMemoryMachine's status: what it waits for, or provisioned with its addresses.
pub(super) fn machine_status<M: SimulatedMachine>(
    im: &M,
    machine: &Machine,
    paused: NewCondition,
    boot: &Boot,
) -> M::Status {
    let mut status = im.status().cloned().unwrap_or_default();
    let ready = match boot {
        Boot::Waiting { condition, .. } => condition.clone(),
        Boot::Running => {
            M::running(
                &mut status,
                serde_json::from_value(json!([
                    {"type": "Hostname", "address": im.name_any()},
                    {"type": "InternalIP", "address": "127.0.0.1"},
                ]))
                .expect("addresses"),
                machine.spec.failure_domain.clone(),
            );
            NewCondition::new(
                conditions::types::READY,
                Status::True,
                conditions::reasons::READY,
            )
        }
    };
    common::set_conditions(
        M::conditions(&mut status),
        im.meta().generation,
        vec![paused, ready],
    );
    status
}

/// The providerID of an in-memory machine.
pub(super) fn provider_id<M: Resource>(im: &M) -> String {
    format!(
        "in-memory://{}/{}",
        im.namespace().unwrap_or_default(),
        im.name_any()
    )
}
