//! Throughput and latency of the embedded management cluster over HTTPS, as kube-rs clients
//! see them: creates/s, gets/s, list latency, and watch delivery latency to many watchers.
//! Lists are kube-rs' typed calls; creates, updates and gets go through the same kube-rs
//! client (its connections, TLS and error handling) with bodies made once as bytes, and they
//! and the watchers read the answers as bytes and pick out the name: decoding and encoding
//! typed objects in this process (which shares the two cores with the server) would stand in
//! for the server's speed and hide the difference between the two storage back ends.
//!
//! `cargo bench --bench apiserver` runs the full measurement (10,000 objects, 100 watchers);
//! under `cargo test` it runs a small smoke version so that it keeps working.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use capictl::management::{self, ServeOptions, StateDir};

#[path = "../tests/common/mod.rs"]
mod common;

const CONCURRENCY: usize = 64;
/// Writes made one at a time to time watch delivery.
const PROBES: usize = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// What a watcher reads of each event line: its type and the object's name, found in the
/// line as the server writes it (`{"type":"ADDED","object":{…"metadata":{…"name":"cm-1"…`)
/// without decoding it. The watchers measure the server's delivery; decoding each of the two
/// million events into a `ConfigMap`, or even skimming it with serde, made the 100 watchers in
/// this process the benchmark's main cost on two cores (12% of its samples on 2026-12-04).
fn type_and_name(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("{\"type\":\"")?;
    let kind = &rest[..rest.find('"')?];
    // A ConfigMap's metadata has no other `"name":"` before its own (managedFields says
    // `"f:name"`, labels are `bench` and `shard`).
    let metadata = &rest[rest.find("\"metadata\":{")?..];
    let name = &metadata[metadata.find("\"name\":\"")? + 8..];
    Some((kind, &name[..name.find('"')?]))
}

/// A request with a JSON body through the benchmark's kube-rs client.
fn request(
    method: http::Method,
    uri: String,
    content_type: &str,
    body: String,
) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.into_bytes())
        .unwrap()
}

async fn client_for(options: &ServeOptions) -> Client {
    let config = kube::config::Kubeconfig::read_from(options.dir.admin_kubeconfig()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    Client::try_from(config).unwrap()
}

/// One run against one storage back end: the rows of the result table.
async fn run(
    objects: usize,
    watchers: usize,
    etcd_endpoints: Vec<String>,
) -> Vec<(String, String)> {
    let dir = std::env::temp_dir().join(format!("capictl-bench-{}", uuid::Uuid::new_v4()));
    let options = ServeOptions {
        dir: StateDir::new(Some(dir.clone())),
        listen: "127.0.0.1:0".into(),
        kubeconfig: None,
        context: "bench".into(),
        etcd_endpoints,
        etcd_tls: None,
        audit: Default::default(),
    };
    let running = management::start(&options).await.unwrap();
    let client = client_for(&options).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // Watchers, each on its own connection, recording when each object reaches it.
    let start = Instant::now();
    let mut watcher_tasks = Vec::new();
    let caught_up = Arc::new(AtomicUsize::new(0));
    for _ in 0..watchers {
        let caught_up = caught_up.clone();
        let client = client_for(&options).await;
        let lines = client
            .request_stream(
                http::Request::get(
                    "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&timeoutSeconds=290",
                )
                .body(Vec::new())
                .unwrap(),
            )
            .await
            .unwrap();
        watcher_tasks.push(tokio::spawn(async move {
            let mut seen = HashMap::with_capacity(objects + PROBES);
            let mut modified = 0;
            let mut lines = std::pin::pin!(lines);
            let mut line = String::new();
            while seen.len() < objects + PROBES || modified < objects {
                line.clear();
                if !matches!(lines.read_line(&mut line).await, Ok(1..)) {
                    break;
                }
                let (kind, name) = type_and_name(&line).expect("a watch event");
                match kind {
                    "ADDED" => {
                        seen.insert(name.to_string(), start.elapsed());
                        if seen.len() == objects {
                            caught_up.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    "MODIFIED" => modified += 1,
                    _ => {}
                }
            }
            (seen, modified)
        }));
    }

    // Creates, many in flight, each acknowledged only once it is on disk; when each was
    // acknowledged, to time its delivery to the watchers while the writes go on.
    let create_started = Instant::now();
    let acknowledged: HashMap<String, Duration> = futures::stream::iter(0..objects)
        .map(|i| {
            let client = client.clone();
            async move {
                let name = format!("cm-{i}");
                let body = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": {"bench": "yes", "shard": (i % 10).to_string()}},
                    "data": {"payload": "x".repeat(256)}
                })
                .to_string();
                let answer = client
                    .request_text(request(
                        http::Method::POST,
                        "/api/v1/namespaces/default/configmaps".into(),
                        "application/json",
                        body,
                    ))
                    .await
                    .unwrap();
                assert!(answer.contains(&format!("\"{name}\"")));
                (name, start.elapsed())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let create_elapsed = create_started.elapsed();

    // Watch delivery: once every watcher has caught up with the bulk writes, single writes,
    // one at a time, timed from the request to each watcher.
    while caught_up.load(Ordering::SeqCst) < watchers {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut sent = HashMap::new();
    for i in 0..PROBES {
        let name = format!("probe-{i}");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        sent.insert(name, start.elapsed());
        api.create(&PostParams::default(), &cm).await.unwrap();
    }

    // Updates (merge patches), many in flight, each durable before it is acknowledged.
    let update_started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let client = client.clone();
            async move {
                let patch = json!({"data": {"payload": "y".repeat(256)}}).to_string();
                let answer = client
                    .request_text(request(
                        http::Method::PATCH,
                        format!("/api/v1/namespaces/default/configmaps/cm-{i}"),
                        "application/merge-patch+json",
                        patch,
                    ))
                    .await
                    .unwrap();
                assert!(answer.contains(&"y".repeat(256)));
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
    let update_elapsed = update_started.elapsed();

    // Gets, each answer read whole and checked but not decoded (as the watchers do).
    let get_started = Instant::now();
    futures::stream::iter(0..objects)
        .map(|i| {
            let client = client.clone();
            async move {
                let request =
                    http::Request::get(format!("/api/v1/namespaces/default/configmaps/cm-{i}"))
                        .body(Vec::new())
                        .unwrap();
                let body = client.request_text(request).await.unwrap();
                assert!(body.contains(&format!("\"cm-{i}\"")));
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
    let get_elapsed = get_started.elapsed();

    // Lists: everything at once, by page, and by label selector.
    let mut full = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let list = api.list(&ListParams::default()).await.unwrap();
        full.push(t.elapsed());
        assert_eq!(list.items.len(), objects + PROBES);
    }
    full.sort();
    let t = Instant::now();
    let page = api.list(&ListParams::default().limit(500)).await.unwrap();
    let page_latency = t.elapsed();
    assert!(!page.items.is_empty());
    let t = Instant::now();
    let shard = api
        .list(&ListParams::default().labels("shard=3"))
        .await
        .unwrap();
    let selector_latency = t.elapsed();
    assert_eq!(
        shard.items.len(),
        (0..objects).filter(|i| i % 10 == 3).count()
    );

    let mut latencies = Vec::with_capacity(PROBES * watchers);
    let mut under_load = Vec::with_capacity(objects * watchers);
    for task in watcher_tasks {
        let (seen, modified) = tokio::time::timeout(Duration::from_secs(300), task)
            .await
            .expect("watchers finish")
            .unwrap();
        assert_eq!(
            seen.len(),
            objects + PROBES,
            "every watcher sees every object"
        );
        assert_eq!(modified, objects, "every watcher sees every update");
        for (name, at) in &sent {
            latencies.push(seen[name].saturating_sub(*at));
        }
        // A watcher may see a write before its writer has read the acknowledgement: the event
        // is published when the write is durable, before the answer goes out.
        for (name, at) in &acknowledged {
            under_load.push(seen[name].saturating_sub(*at));
        }
    }
    latencies.sort();
    under_load.sort();

    let store_size = std::fs::metadata(options.dir.store())
        .map(|m| m.len())
        .unwrap_or(0);
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);

    vec![
        (
            "creates/s".into(),
            format!("{:.0}", objects as f64 / create_elapsed.as_secs_f64()),
        ),
        (
            "updates/s (merge patches)".into(),
            format!("{:.0}", objects as f64 / update_elapsed.as_secs_f64()),
        ),
        (
            "gets/s".into(),
            format!("{:.0}", objects as f64 / get_elapsed.as_secs_f64()),
        ),
        (
            format!("list of all {} objects, p50 / max of 10", objects + PROBES),
            format!(
                "{} / {}",
                ms(percentile(&full, 0.5)),
                ms(percentile(&full, 1.0))
            ),
        ),
        ("list, first page of 500".into(), ms(page_latency)),
        (
            format!("list by label selector ({} matches)", shard.items.len()),
            ms(selector_latency),
        ),
        (
            format!(
                "watch delivery to {watchers} watchers during the creates, after the acknowledgement, p50 / p99 / max"
            ),
            format!(
                "{} / {} / {}",
                ms(percentile(&under_load, 0.5)),
                ms(percentile(&under_load, 0.99)),
                ms(percentile(&under_load, 1.0))
            ),
        ),
        (
            format!("watch delivery of a single write to {watchers} watchers, p50 / p99 / max"),
            format!(
                "{} / {} / {}",
                ms(percentile(&latencies, 0.5)),
                ms(percentile(&latencies, 0.99)),
                ms(percentile(&latencies, 1.0))
            ),
        ),
        (
            "embedded store file after the run".into(),
            format!("{:.1} MiB", store_size as f64 / (1 << 20) as f64),
        ),
    ]
}

fn main() {
    capictl::install_crypto_provider();
    let full = std::env::args().any(|a| a == "--bench");
    let (objects, watchers) = if full { (10_000, 100) } else { (200, 5) };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let embedded = runtime.block_on(run(objects, watchers, Vec::new()));
    let etcd = common::Etcd::start();
    let on_etcd = runtime.block_on(run(objects, watchers, vec![etcd.endpoint.clone()]));
    drop(etcd);
    println!("management cluster over HTTPS, kube-rs clients, {CONCURRENCY} requests in flight");
    println!("{objects} ConfigMaps of ~256 bytes, {watchers} watchers");
    println!("| measurement | embedded store (redb) | etcd 3.4 on loopback | embedded ÷ etcd |");
    println!("|---|---|---|---|");
    for (i, (what, value)) in embedded.iter().enumerate() {
        let other = if what.starts_with("embedded store file") {
            "-".to_string()
        } else {
            on_etcd[i].1.clone()
        };
        // Rates side by side as a ratio, since absolute figures move with the machine's load.
        let ratio = match (value.parse::<f64>(), other.parse::<f64>()) {
            (Ok(a), Ok(b)) if what.contains("/s") && b > 0.0 => format!("{:.2}×", a / b),
            _ => "-".to_string(),
        };
        println!("| {what} | {value} | {other} | {ratio} |");
    }
}
