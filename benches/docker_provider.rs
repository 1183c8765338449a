//! How fast the Docker provider brings up the seeds' quick-start on this machine's Docker
//! Engine, as a user drives it (the embedded management cluster, `capictl init --infrastructure
//! docker`, a generated cluster applied with kubectl): time from `kubectl apply` to the
//! Cluster's `Available` for 1+1 and 3+3 clusters, and the time a 3-control-plane upgrade
//! from v1.28.13 to v1.29.10 takes until every control-plane Machine runs the new version.
//!
//! `cargo bench --bench docker_provider`; under `cargo test` it only says how to run it
//! (`tests/docker/provider.rs` covers the same path).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::quickstart::{Session, rolled_out};

async fn available(
    control_planes: u32,
    workers: u32,
    upgrade: bool,
) -> (Duration, Option<Duration>) {
    let s = Session::start("bench", "v1.28.13,v1.29.10").await;
    let started = Instant::now();
    s.apply_cluster("v1.28.13", control_planes, workers);
    s.kubectl(&[
        "wait",
        "--for=condition=Available",
        &format!("cluster/{}", s.cluster),
        "--timeout=600s",
    ]);
    let up = started.elapsed();
    if !upgrade {
        return (up, None);
    }
    // Available comes before every control plane is there: upgrade a full control plane.
    let cp = s.control_plane_selector();
    while rolled_out(&s, &cp, "v1.28.13", control_planes as usize).is_err() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let started = Instant::now();
    s.upgrade_control_plane("v1.29.10");
    while rolled_out(&s, &cp, "v1.29.10", control_planes as usize).is_err() {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (up, Some(started.elapsed()))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "docker_provider: run `cargo bench --bench docker_provider` (tests/docker/provider.rs covers this path under cargo test)"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (small, _) = runtime.block_on(available(1, 1, false));
    let (large, upgrade) = runtime.block_on(available(3, 3, true));
    println!("| cluster | `kubectl apply` → Cluster Available |");
    println!("|---|---|");
    println!(
        "| 1 control plane + 1 worker | {:.1} s |",
        small.as_secs_f64()
    );
    println!(
        "| 3 control planes + 3 workers | {:.1} s |",
        large.as_secs_f64()
    );
    println!();
    println!(
        "control-plane upgrade v1.28.13 → v1.29.10 (3 Machines replaced one at a time): {:.1} s",
        upgrade.unwrap().as_secs_f64()
    );
}
