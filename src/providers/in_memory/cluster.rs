//! The InMemoryCluster (and DevCluster) reconciler: a workload API server started for the
//! cluster, with the cluster's CA, and stopped when the cluster goes.

use super::*;

pub async fn reconcile_cluster<C: SimulatedCluster>(
    ic: Arc<C>,
    ctx: Arc<InMemory>,
) -> Result<Action> {
    if !ic.simulated() {
        return Ok(Action::await_change());
    }
    let ns = ic.namespace().unwrap_or_default();
    let api: Api<C> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = common::labelled_cluster(&ctx.client, ic.as_ref()).await?;
    // Paused, a deleted InMemoryCluster keeps its workload API server until the object is gone
    // (see `stop_removed_workloads`): `capictl move` deletes it here while the cluster lives on
    // in the target.
    let (is_paused, paused) = simulation_paused(cluster.as_ref(), &C::kind(&()), ic.annotations());
    if is_paused {
        return common::record_paused(&api, &ic, paused).await;
    }
    if common::deleting(ic.as_ref()) {
        if let Some(name) = ic.labels().get(api::CLUSTER_NAME_LABEL) {
            ctx.workloads.stop(&key(&ns, name));
        }
        common::remove_finalizer(&api, ic.as_ref(), C::FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let Some(cluster) = cluster else {
        // The Cluster controller labels the InMemoryCluster once the Cluster refers to it.
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if common::ensure_finalizer(&api, ic.as_ref(), C::FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let not_ready = async |reason: &str, message: String| -> Result<()> {
        let mut status = ic.status().cloned().unwrap_or_default();
        common::set_conditions(
            C::conditions(&mut status),
            ic.meta().generation,
            vec![
                paused.clone(),
                NewCondition::new(conditions::types::READY, Status::False, reason).message(message),
            ],
        );
        common::write_status(&api, &ic.name_any(), ic.status(), &status).await
    };
    let ca = match cluster_ca(&ctx.client, &cluster).await {
        Ok(Some(ca)) => ca,
        Ok(None) => {
            let message = format!(
                "Waiting for the control plane provider to make the cluster CA (Secret {})",
                certs::ca_secret_name(&cluster.name_any())
            );
            not_ready(
                api::in_memory::reasons::WAITING_FOR_CERTIFICATE_AUTHORITY,
                message,
            )
            .await?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        // A CA the user brought that cannot sign: say which and why, and look again later.
        Err(Error::Certs(e @ certs::CertsError::UnusableCa { .. })) => {
            let reason = api::in_memory::reasons::CERTIFICATE_AUTHORITY_UNUSABLE;
            not_ready(reason, e.to_string()).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e),
    };
    let port = ic.endpoint_port().map(|p| p as u16);
    let workload = ctx
        .workloads
        .ensure(&key(&ns, &cluster.name_any()), &ca, port)
        .await
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let endpoint = json!({"host": "127.0.0.1", "port": workload.address.port()});
    if ic.endpoint_port() != Some(i32::from(workload.address.port())) {
        common::patch_merge(
            &api,
            &ic.name_any(),
            json!({"spec": {"controlPlaneEndpoint": endpoint}}),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let status = cluster_status(ic.as_ref(), paused);
    common::write_status(&api, &ic.name_any(), ic.status(), &status).await?;
    Ok(Action::requeue(common::spread(ic.as_ref(), common::RESYNC)))
}

/// A running simulated cluster's status: provisioned, its failure domains, Ready.
pub(super) fn cluster_status<C: SimulatedCluster>(ic: &C, paused: NewCondition) -> C::Status {
    let mut status = ic.provisioned();
    let ready = NewCondition::new(
        conditions::types::READY,
        Status::True,
        conditions::reasons::READY,
    );
    common::set_conditions(
        C::conditions(&mut status),
        ic.meta().generation,
        vec![paused, ready],
    );
    status
}

/// The cluster CA, which workload API servers need to serve: the one the user brought or the
/// control plane provider made (with the key its `encryptionAlgorithm` asks for; None until
/// then), else, for a cluster without a control plane provider, one made here.
pub(super) async fn cluster_ca(
    client: &Client,
    cluster: &Cluster,
) -> Result<Option<crate::pki::Pki>> {
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let name = cluster.name_any();
    if let Some(secret) = secrets.get_opt(&certs::ca_secret_name(&name)).await? {
        return Ok(Some(certs::ca_from_secret(&secret)?));
    }
    if cluster.spec.control_plane_ref.is_some() {
        return Ok(None);
    }
    let (secret, pki) = certs::new_ca_secret(&name, &ns, common::owner_reference(cluster, true))?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(Some(pki)),
        // Someone else made it first: use theirs.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = secrets.get(&certs::ca_secret_name(&name)).await?;
            Ok(Some(certs::ca_from_secret(&existing)?))
        }
        Err(e) => Err(e.into()),
    }
}

/// Stops the workload API server of every InMemoryCluster that is gone from the store, however
/// it went: its finalizer removed by `capictl move` or by hand, or the whole object missed
/// while the watch was down.
pub(super) fn stop_removed_workloads<C: SimulatedCluster>(
    client: Client,
    workloads: Arc<Workloads>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, ()> {
    let key_of = |ic: &C| {
        if !ic.simulated() {
            return None;
        }
        ic.labels()
            .get(api::CLUSTER_NAME_LABEL)
            .map(|name| key(&ic.namespace().unwrap_or_default(), name))
    };
    let removed = move |k: &String| workloads.stop(k);
    crate::cache::on_removed(Api::<C>::all(client), key_of, removed, stop)
}
