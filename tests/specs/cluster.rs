//! The Cluster controller.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use capictl::api::{Cluster, Machine, MachineDeployment, MachineSet};
use k8s_openapi::api::core::v1::Secret;

use crate::common::fixtures::available_cluster;
use crate::common::lifecycle::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_comes_up_available_and_sums_up_its_machines() {
    let client = available_cluster(2).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let cluster = clusters.get("c1").await.unwrap();
    let status = cluster.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Provisioned"));
    assert_eq!(
        cluster.spec.control_plane_endpoint.unwrap().host.as_deref(),
        Some("127.0.0.1"),
        "the endpoint comes from the infrastructure cluster"
    );
    assert_eq!(
        status.control_plane.as_ref().unwrap().ready_replicas,
        Some(1)
    );
    // Workers count once their MachineDeployment reports them.
    until("the Cluster counts its 2 workers", 20, async || {
        let s = clusters.get("c1").await.ok()?.status?;
        (s.workers?.available_replicas == Some(2)).then_some(())
    })
    .await;
    // The Cluster sums up its Machines and workers as upstream's v1beta2 Cluster does.
    let summary = until("the Cluster sums up its Machines", 20, async || {
        let c = clusters.get("c1").await.ok()?;
        let list = c.status?.conditions?;
        let reason = |t: &str| list.iter().find(|c| c.type_ == t).map(|c| c.reason.clone());
        let got: Vec<Option<String>> = [
            "ControlPlaneMachinesReady",
            "WorkerMachinesReady",
            "WorkerMachinesUpToDate",
            "RollingOut",
            "ScalingUp",
            "Remediating",
        ]
        .iter()
        .map(|t| reason(t))
        .collect();
        (got[1].as_deref() == Some("Ready")).then_some(got)
    })
    .await;
    assert_eq!(
        summary,
        [
            "Ready",
            "Ready",
            "UpToDate",
            "NotRollingOut",
            "NotScalingUp",
            "NotRemediating"
        ]
        .map(|r| Some(r.to_string()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cluster_removes_everything_it_owned() {
    let client = available_cluster(1).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    clusters
        .delete("c1", &DeleteParams::background())
        .await
        .unwrap();
    let all = ListParams::default();
    until("everything is gone", 60, async || {
        let left = Api::<Machine>::namespaced(client.clone(), NS)
            .list(&all)
            .await
            .ok()?
            .items
            .len()
            + Api::<MachineSet>::namespaced(client.clone(), NS)
                .list(&all)
                .await
                .ok()?
                .items
                .len()
            + Api::<MachineDeployment>::namespaced(client.clone(), NS)
                .list(&all)
                .await
                .ok()?
                .items
                .len()
            + clusters.list(&all).await.ok()?.items.len()
            + Api::<Secret>::namespaced(client.clone(), NS)
                .list(&all)
                .await
                .ok()?
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_kinds_are_not_installed_is_still_deleted_and_says_what_it_skipped() {
    // What a half-applied Docker template leaves on a management cluster with the in-memory
    // provider only: a Cluster naming a DockerCluster and a KubeadmControlPlane that were
    // never made, and a MachineDeployment of DockerMachineTemplates.
    let client = management(&[capictl::api::CrdSet::Core, capictl::api::CrdSet::InMemory]).await;
    let mut cluster = crate::common::fixtures::cluster("half");
    cluster["spec"]["infrastructureRef"]["kind"] = json!("DockerCluster");
    cluster["spec"]["controlPlaneRef"] = json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "half-control-plane"});
    apply(&client, cluster).await;
    let mut md = crate::common::fixtures::machine_deployment("half", "half-md-0", 1, "half-md-0");
    md["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = json!("DockerMachineTemplate");
    apply(&client, md).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    until("the Cluster has its finalizer", 20, async || {
        let c = clusters.get("half").await.ok()?;
        (!c.finalizers().is_empty()).then_some(())
    })
    .await;
    clusters
        .delete("half", &DeleteParams::background())
        .await
        .unwrap();
    until(
        "the Cluster and its MachineDeployment are gone",
        30,
        async || {
            let left = clusters
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len()
                + Api::<MachineDeployment>::namespaced(client.clone(), NS)
                    .list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .len();
            (left == 0).then_some(())
        },
    )
    .await;
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let skipped: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DeletionSkipped"))
        .filter_map(|e| e.message.clone())
        .collect();
    assert!(
        skipped.iter().any(|m| m.starts_with("DockerCluster \"half\" was not deleted: DockerCluster.infrastructure.cluster.x-k8s.io is not installed")),
        "the Cluster says what it skipped: {skipped:?}"
    );
}
