//! How fast capictl's node image comes up on this machine's Docker Engine: time from a bare
//! container to a Ready Node for the first control plane, a joining control plane and a
//! worker, and what each node container uses in memory once settled. Nodes are started and
//! bootstrapped by hand (as `tests/docker/nodes.rs` does), with bootstrap data from the
//! KubeadmConfig controller; the image build is not timed (it is cached).
//!
//! `cargo bench --bench docker_nodes` runs it (`CAPICTL_BENCH_ROUNDS=N` for more rounds, the
//! median is reported); under `cargo test` it only says how to run it, since the node test
//! covers the same path.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::docker::NodeCluster;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn round() -> ([Duration; 3], [f64; 3]) {
    let mut cluster = NodeCluster::start("bench").await;
    let first = cluster.add_node("cp1", true, None).await;
    let ip = cluster.ip("cp1").await;
    cluster.initialized(&ip).await;
    let joined = cluster.add_node("cp2", true, Some("cp1")).await;
    let worker = cluster.add_node("w1", false, Some("cp1")).await;
    // Let start-up allocations settle before reading memory.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let memory = [
        cluster.memory_mib("cp1").await,
        cluster.memory_mib("cp2").await,
        cluster.memory_mib("w1").await,
    ];
    ([first, joined, worker], memory)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "docker_nodes: run `cargo bench --bench docker_nodes` (tests/docker/nodes.rs covers this path under cargo test)"
        );
        return;
    }
    let rounds: usize = std::env::var("CAPICTL_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    let mut memory = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..rounds {
        let (t, m) = runtime.block_on(round());
        eprintln!(
            "round {}: {:.1?} {:.1?} {:.1?}; {:.0} {:.0} {:.0} MiB",
            i + 1,
            t[0],
            t[1],
            t[2],
            m[0],
            m[1],
            m[2]
        );
        for k in 0..3 {
            times[k].push(t[k]);
            memory[k].push(m[k]);
        }
    }
    println!(
        "| node | container start → Ready Node (median of {rounds}) | memory after settling |"
    );
    println!("|---|---|---|");
    for (k, what) in [
        "first control plane (kubeadm init)",
        "joining control plane (etcd learner, promoted)",
        "worker (bootstrap token, CSR)",
    ]
    .iter()
    .enumerate()
    {
        let mut m = memory[k].clone();
        m.sort_by(|a, b| a.total_cmp(b));
        println!(
            "| {what} | {:.1} s | {:.0} MiB |",
            median(times[k].clone()).as_secs_f64(),
            m[m.len() / 2]
        );
    }
}
