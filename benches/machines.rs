//! How many in-memory Machines the controllers bring up on this machine, and at what cost: a
//! MachineDeployment of N replicas on the embedded management cluster (in-process, with the
//! manager running), timed from creation until every Machine is Ready, with the process's peak
//! resident memory, and `capictl describe cluster` of the result (whose peak, the command's own
//! in real use, is reported apart).
//!
//! `cargo bench --bench machines` runs N = 300 (`CAPICTL_BENCH_MACHINES=N` for another size);
//! under `cargo test` a smoke run of N = 20 keeps it working.

use std::time::Instant;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use capictl::api::{CrdSet, MachineDeployment};

#[path = "../tests/common/mod.rs"]
mod common;
use common::lifecycle::{apply, management, until};

async fn run(replicas: i32) {
    let client = management(&[CrdSet::Core, CrdSet::InMemory]).await;
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "big"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryCluster", "name": "big"}}
    })).await;
    apply(&client, json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryCluster", "metadata": {"name": "big"}, "spec": {}})).await;
    apply(&client, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachineTemplate", "metadata": {"name": "big-workers"},
        "spec": {"template": {"spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "0s"}}}}}}
    })).await;
    // Workers join once a control-plane Machine has initialized the cluster.
    apply(&client, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachine", "metadata": {"name": "big-cp-0"},
        "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "0s"}}}}
    })).await;
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "big-cp-0", "labels": {"cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "clusterName": "big", "version": "v1.30.4", "bootstrap": {"dataSecretName": "big-bootstrap"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachine", "name": "big-cp-0"}
        }
    })).await;
    let start = Instant::now();
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "big-md"},
        "spec": {
            "clusterName": "big", "replicas": replicas, "selector": {"matchLabels": {"pool": "big"}},
            "template": {"metadata": {"labels": {"pool": "big"}}, "spec": {
                "clusterName": "big", "version": "v1.30.4", "bootstrap": {"dataSecretName": "big-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachineTemplate", "name": "big-workers"}
            }}
        }
    })).await;
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), "default");
    let mut last = 0;
    until(
        &format!("{replicas} Machines are Ready"),
        1800,
        async || {
            let ready = mds
                .get("big-md")
                .await
                .ok()?
                .status?
                .ready_replicas
                .unwrap_or(0);
            if ready / 100 > last / 100 {
                eprintln!(
                    "  {ready} Ready after {:.1} s",
                    start.elapsed().as_secs_f64()
                );
            }
            last = ready;
            (ready == replicas).then_some(())
        },
    )
    .await;
    let up = start.elapsed();
    let peak_up = common::status_mib("VmHWM:");
    // `capictl describe cluster big`: what it reads and renders, without the process start.
    // Its memory is the command's, not the management cluster's, so it is measured apart.
    common::reset_peak_rss();
    let mut describe_times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let tree = capictl::cli::describe::tree(&client, "default", "big")
            .await
            .unwrap();
        describe_times.push(started.elapsed());
        assert!(
            tree.contains("big-md"),
            "the tree shows the MachineDeployment"
        );
    }
    describe_times.sort();
    let describe = describe_times[describe_times.len() / 2];
    let peak_describe = common::status_mib("VmHWM:");
    common::reset_peak_rss();
    // Scaling to zero: every Machine and its Node go.
    let down_start = Instant::now();
    mds.patch(
        "big-md",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    until("every Machine is gone", 1800, async || {
        let s = mds.get("big-md").await.ok()?.status?;
        (s.replicas == Some(0)).then_some(())
    })
    .await;
    let down = down_start.elapsed();
    let peak_down = common::status_mib("VmHWM:");
    println!(
        "| Machines | up to all Ready | Machines/s | describe (median of 5) | scale to 0 | peak RSS | peak RSS during describe |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {replicas} | {:.1} s | {:.0} | {:.0} ms | {:.1} s | {:.0} MiB | {:.0} MiB |",
        up.as_secs_f64(),
        replicas as f64 / up.as_secs_f64().max(f64::EPSILON),
        describe.as_secs_f64() * 1000.0,
        down.as_secs_f64(),
        peak_up.max(peak_down),
        peak_describe,
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let replicas = match std::env::var("CAPICTL_BENCH_MACHINES") {
        Ok(n) => n.parse().expect("CAPICTL_BENCH_MACHINES is a number"),
        Err(_) if full => 300,
        Err(_) => 20,
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(replicas));
}
