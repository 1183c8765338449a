//! How a fleet of clusters comes up on this machine: N clusters of the in-memory flavor (a
//! KubeadmControlPlane of 1 and a MachineDeployment of 1, start-up delays set to zero), applied
//! at once to the embedded management cluster (its durable store) with the manager in-process, timed until every
//! Cluster is Available. It reports the API writes each cluster took and compares the time
//! with what the API server's write rate (measured first, in the same process) allows; then the
//! process's memory and, with nothing changing, its CPU use and writes over an idle minute.
//!
//! While the fleet comes up a second watcher checks the scale path stays correct: every Cluster
//! reaches Available exactly once, and no Machine is created twice (by name and by uid).
//!
//! `cargo bench --bench fleet` runs N = 1000 (`CAPICTL_BENCH_CLUSTERS=N` for another size,
//! `CAPICTL_BENCH_IDLE_SECS` for another idle window); under `cargo test` a smoke run of N = 3
//! keeps it working.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use capictl::api::{Cluster, CrdSet, Machine};
use capictl::apiserver::store::Store;

#[path = "../tests/common/mod.rs"]
mod common;
use common::lifecycle::{apply, condition_true, management_on, until};

/// Requests in flight while applying the fleet and measuring the write rate.
const IN_FLIGHT: usize = 64;

/// CPU time this process has used (user + system).
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The management cluster's store revision: every write moves it by one.
async fn revision(client: &Client) -> u64 {
    let list = Api::<ConfigMap>::all(client.clone())
        .list_metadata(&ListParams::default().limit(1))
        .await
        .unwrap();
    list.metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .expect("a list carries the store's revision")
}

/// Durable creates per second through the same client, `IN_FLIGHT` at a time: the median of
/// three rounds of `writes` each, since one short round swung by three times between runs
/// (the first writes also pay for the connections).
async fn write_rate(client: &Client, writes: usize) -> f64 {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), common::lifecycle::NS);
    let mut rates = Vec::new();
    for round in 0..3 {
        let start = Instant::now();
        futures::stream::iter(0..writes)
            .map(|i| {
                let api = api.clone();
                async move {
                    let cm: ConfigMap = serde_json::from_value(json!({
                        "metadata": {"name": format!("write-rate-{round}-{i}")},
                        "data": {"payload": "x".repeat(512)}
                    }))
                    .unwrap();
                    api.create(&PostParams::default(), &cm).await
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await
            .unwrap();
        rates.push(writes as f64 / start.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rates[1]
}

/// What the management store holds per cluster, by resource: objects and their JSON (without
/// the write-rate ConfigMaps), largest first; the objects in memory are several times their
/// JSON (each a `serde_json::Value`, plus its encoding for readers).
fn stored_per_cluster(store: &Store, clusters: usize) -> Vec<(String, f64, f64)> {
    let (records, _, _) = store.list("/registry/", None, None, |r| {
        !r.key.contains("/write-rate-")
    });
    let mut by_resource: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for record in &records {
        let resource = record.key.trim_start_matches("/registry/");
        let resource = resource.split('/').take(2).collect::<Vec<_>>().join("/");
        let entry = by_resource.entry(resource).or_default();
        entry.0 += 1;
        entry.1 += record.json().len();
    }
    let mut rows: Vec<(String, f64, f64)> = by_resource
        .into_iter()
        .map(|(resource, (objects, bytes))| {
            (
                resource,
                objects as f64 / clusters as f64,
                bytes as f64 / 1024.0 / clusters as f64,
            )
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// Sets every start-up duration of the in-memory behaviours to zero, and their jitter.
fn zero_delays(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match key.as_str() {
                    "startupDuration" => *v = json!("0s"),
                    "startupJitter" => *v = json!("0"),
                    _ => zero_delays(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(zero_delays),
        _ => {}
    }
}

/// The objects of cluster `name` of the in-memory flavor, with zero start-up delays.
fn cluster_objects(name: &str) -> Vec<Value> {
    let template = capictl::generate::flavor("in-memory", "").unwrap();
    let variables = |v: &str| {
        Some(
            match v {
                "CLUSTER_NAME" => name,
                "NAMESPACE" => common::lifecycle::NS,
                "KUBERNETES_VERSION" => "v1.30.4",
                "CONTROL_PLANE_MACHINE_COUNT" | "WORKER_MACHINE_COUNT" => "1",
                _ => return None,
            }
            .to_string(),
        )
    };
    let text = capictl::generate::render(template, common::lifecycle::NS, &variables).unwrap();
    let mut objects: Vec<Value> = capictl::yaml::from_multiple(&text).unwrap();
    objects.iter_mut().for_each(zero_delays);
    objects
}

/// What the second watcher saw while the fleet came up.
#[derive(Default)]
struct Seen {
    /// Per Cluster: whether it is Available now, and how often it became so.
    available: BTreeMap<String, (bool, u32)>,
    /// Per Machine name, every uid a Machine of that name had.
    machines: BTreeMap<String, BTreeSet<String>>,
}

/// Watches Clusters and Machines with a client of its own, into `seen`.
fn watch(client: Client, seen: Arc<Mutex<Seen>>) {
    let clusters = watcher::watcher(Api::<Cluster>::all(client.clone()), Default::default());
    let s = seen.clone();
    tokio::spawn(clusters.try_for_each(move |event| {
        if let watcher::Event::Apply(c) | watcher::Event::InitApply(c) = event {
            let now = condition_true(
                c.status.as_ref().and_then(|s| s.conditions.as_ref()),
                "Available",
            );
            let mut seen = s.lock().unwrap();
            let (was, times) = seen.available.entry(c.name_any()).or_default();
            if now && !*was {
                *times += 1;
            }
            *was = now;
        }
        futures::future::ready(Ok(()))
    }));
    let machines = watcher::watcher(Api::<Machine>::all(client), Default::default());
    tokio::spawn(machines.try_for_each(move |event| {
        if let watcher::Event::Apply(m) | watcher::Event::InitApply(m) = event {
            let mut seen = seen.lock().unwrap();
            seen.machines
                .entry(m.name_any())
                .or_default()
                .insert(m.uid().unwrap_or_default());
        }
        futures::future::ready(Ok(()))
    }));
}

async fn run(clusters: usize, idle: Duration) {
    // The embedded management cluster's own durable store, as `capictl management up` runs it.
    let dir = std::env::temp_dir().join(format!("capictl-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&dir.join("state.redb")).unwrap();
    let client = management_on(
        store.clone(),
        &[
            CrdSet::Core,
            CrdSet::KubeadmBootstrap,
            CrdSet::KubeadmControlPlane,
            CrdSet::InMemory,
        ],
    )
    .await;
    let rate = write_rate(&client, (clusters * 20).clamp(500, 5000)).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    watch(client.clone(), seen.clone());
    let objects: Vec<Value> = (0..clusters)
        .flat_map(|i| cluster_objects(&format!("fleet-{i:05}")))
        .collect();
    let rss_before = common::status_mib("VmRSS:");
    let revision_before = revision(&client).await;

    let start = Instant::now();
    futures::stream::iter(objects)
        .for_each_concurrent(IN_FLIGHT, |o| apply(&client, o))
        .await;
    let applied = start.elapsed();
    eprintln!(
        "  {clusters} clusters applied in {:.1} s",
        applied.as_secs_f64()
    );
    let mut reported = 0;
    until(
        &format!("{clusters} Clusters are Available"),
        3600,
        async || {
            let available = seen
                .lock()
                .unwrap()
                .available
                .values()
                .filter(|(now, _)| *now)
                .count();
            if available * 10 / clusters > reported {
                reported = available * 10 / clusters;
                eprintln!(
                    "  {available} Available after {:.1} s",
                    start.elapsed().as_secs_f64()
                );
            }
            (available == clusters).then_some(())
        },
    )
    .await;
    let up = start.elapsed();
    let writes = revision(&client).await - revision_before;
    let peak = common::status_mib("VmHWM:");
    let rss = common::status_mib("VmRSS:");
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let stored = stored_per_cluster(&store, clusters);

    // Idle: nothing changes; what the process still does is resyncs and requeues.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (cpu_before, revision_idle, idle_start) =
        (cpu_time(), revision(&client).await, Instant::now());
    tokio::time::sleep(idle).await;
    let idle_cpu = (cpu_time() - cpu_before).as_secs_f64() / idle_start.elapsed().as_secs_f64();
    let idle_writes = revision(&client).await - revision_idle;

    let _ = std::fs::remove_dir_all(&dir);

    let seen = seen.lock().unwrap();
    let twice_available: Vec<&String> = seen
        .available
        .iter()
        .filter(|(_, (_, times))| *times != 1)
        .map(|(name, _)| name)
        .collect();
    let recreated: Vec<&String> = seen
        .machines
        .iter()
        .filter(|(_, uids)| uids.len() != 1)
        .map(|(name, _)| name)
        .collect();
    let uids: BTreeSet<&String> = seen.machines.values().flatten().collect();

    let limit = writes as f64 / rate;
    println!(
        "| clusters | applied | all Available | writes/cluster | write rate | time ÷ (writes ÷ rate) | peak RSS | RSS/cluster | tasks/cluster | idle CPU ({} s) | idle writes |",
        idle.as_secs()
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {clusters} | {:.1} s | {:.1} s | {:.0} | {rate:.0}/s | {:.1}× | {peak:.0} MiB | {:.2} MiB | {:.1} | {:.1}% of a core | {idle_writes} |",
        applied.as_secs_f64(),
        up.as_secs_f64(),
        writes as f64 / clusters as f64,
        up.as_secs_f64() / limit,
        (rss - rss_before) / clusters as f64,
        tasks as f64 / clusters as f64,
        idle_cpu * 100.0,
    );
    let (objects, kib) = stored.iter().fold((0.0, 0.0), |(o, k), (_, objects, kib)| {
        (o + objects, k + kib)
    });
    println!(
        "stored per cluster: {objects:.1} objects, {kib:.1} KiB of JSON; by resource: {}",
        stored
            .iter()
            .map(|(resource, objects, kib)| format!("{resource} {objects:.1} ({kib:.1} KiB)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "correctness: {} Clusters seen, {} became Available more than once or never; {} Machines by name, {} by uid, {} names with more than one uid",
        seen.available.len(),
        twice_available.len(),
        seen.machines.len(),
        uids.len(),
        recreated.len()
    );
    assert!(
        twice_available.is_empty(),
        "Clusters that did not become Available exactly once: {twice_available:?}"
    );
    assert!(
        recreated.is_empty(),
        "Machines created more than once: {recreated:?}"
    );
    assert_eq!(
        seen.machines.len(),
        clusters * 2,
        "each cluster has one control-plane and one worker Machine"
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let number = |var: &str, bench: u64, smoke: u64| match std::env::var(var) {
        Ok(n) => n.parse().unwrap_or_else(|_| panic!("{var} is a number")),
        Err(_) if full => bench,
        Err(_) => smoke,
    };
    let clusters = number("CAPICTL_BENCH_CLUSTERS", 1000, 3) as usize;
    let idle = Duration::from_secs(number("CAPICTL_BENCH_IDLE_SECS", 60, 1));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(clusters, idle));
}
