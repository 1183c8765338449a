//! Pod start latency, as Kubernetes' pod-startup SLI measures it: from the create request to
//! the Pod's status saying `Running` (seen through a watch), for 100 Pods created 10 at a time
//! — on a Docker cluster of 1 control plane and 3 workers (real containers: a sandbox with the
//! Services' rules, then busybox) and on an in-memory cluster of 3 workers (KWOK-style: bound
//! and marked Running without processes). Prints p50, p99 and max, and how long all 100 took.
//!
//! `cargo bench --bench pod_start`; under `cargo test` it only says how to run it
//! (`tests/docker/provider.rs` and `tests/specs/workloads.rs` cover the same paths).
//! `CAPICTL_BENCH_PODS=N` changes the number of Pods.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

const LABEL: &str = "bench=pod-start";

/// Creates `count` Pods of `image` and times each from its create request to `Running`.
async fn start_latencies(client: Client, image: &str, count: usize) -> (Vec<Duration>, Duration) {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let running: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let seen = running.clone();
    let watch = tokio::spawn(
        watcher(pods.clone(), watcher::Config::default().labels(LABEL))
            .applied_objects()
            .try_for_each(move |pod| {
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                    seen.lock()
                        .unwrap()
                        .entry(pod.name_any())
                        .or_insert_with(Instant::now);
                }
                futures::future::ready(Ok(()))
            }),
    );
    let began = Instant::now();
    let created: HashMap<String, Instant> = futures::stream::iter(0..count)
        .map(|i| {
            let pods = pods.clone();
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("start-{i}"), "labels": {"bench": "pod-start"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "sleep", "image": image, "command": ["sleep", "3600"]}],
                },
            }))
            .unwrap();
            async move {
                let at = Instant::now();
                pods.create(&PostParams::default(), &pod).await.unwrap();
                (pod.name_any(), at)
            }
        })
        .buffer_unordered(10)
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(600);
    while running.lock().unwrap().len() < count {
        assert!(
            Instant::now() < deadline,
            "only {} of {count} Pods ran within 10 minutes",
            running.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = began.elapsed();
    watch.abort();
    let running = running.lock().unwrap();
    let mut latencies: Vec<Duration> = created
        .iter()
        .map(|(name, at)| running[name].saturating_duration_since(*at))
        .collect();
    latencies.sort();
    (latencies, all)
}

fn row(what: &str, (latencies, all): &(Vec<Duration>, Duration)) {
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64()
    };
    println!(
        "| {what} | {} | {:.2} s | {:.2} s | {:.2} s | {:.1} s |",
        latencies.len(),
        at(0.50),
        at(0.99),
        at(1.0),
        all.as_secs_f64()
    );
}

async fn docker(count: usize) -> (Vec<Duration>, Duration) {
    use common::quickstart::{Session, all_nodes_ready, busybox_image};
    let s = Session::start("bench", "v1.28.13").await;
    s.apply_cluster("v1.28.13", 1, 3);
    s.kubectl(&[
        "wait",
        "--for=condition=Available",
        &format!("cluster/{}", s.cluster),
        "--timeout=600s",
    ]);
    let workload = s.dir.join("workload.conf");
    s.capictl(&[
        "get",
        "kubeconfig",
        &s.cluster,
        "--write-to",
        &workload.display().to_string(),
    ]);
    all_nodes_ready(&s, &workload.display().to_string(), 4).await;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&workload).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    start_latencies(Client::try_from(config).unwrap(), &busybox_image(), count).await
}

async fn in_memory(count: usize) -> (Vec<Duration>, Duration) {
    let client = common::fixtures::available_cluster(3).await;
    let workload = common::lifecycle::workload(&client, "c1").await;
    start_latencies(workload, "busybox:1.36", count).await
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "pod_start: run `cargo bench --bench pod_start` (tests/docker/provider.rs and tests/specs/workloads.rs cover these paths under cargo test)"
        );
        return;
    }
    let count: usize = std::env::var("CAPICTL_BENCH_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let in_memory = runtime.block_on(in_memory(count));
    let docker = runtime.block_on(docker(count));
    println!("| cluster | Pods | created → Running p50 | p99 | max | all Running after |");
    println!("|---|---|---|---|---|---|");
    row("Docker, 1 control plane + 3 workers", &docker);
    row("in-memory, 1 control plane + 3 workers", &in_memory);
}
