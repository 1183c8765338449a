//! Throughput and latency of the embedded management cluster over HTTPS, as kube-rs clients
//! see them, each side by side with the same server on real etcd: durable creates and updates
//! per second, alone and while watchers get every event; gets/s; list latency; and watch
//! delivery latency to many watchers while the writes go on.
//!
//! Lists are kube-rs' typed calls; creates, updates and gets go through the same kube-rs
//! client (its connections, TLS and error handling) with bodies made once as bytes, and they
//! and the watchers read the answers as bytes and pick out the name: decoding and encoding
//! typed objects in this process (which shares the two cores with the server) would stand in
//! for the server's speed and hide the difference between the two storage back ends.
//!
//! The server runs on a tokio runtime of its own, as it does in its own process: its tasks do
//! not queue behind the hundred watchers' TLS reads and line parsing on the same workers (in
//! one shared runtime that queueing was a third to half of the measured watch latency).
//!
//! `cargo bench --bench apiserver` runs the full measurement (10,000 objects, 100 watchers);
//! under `cargo test` it runs a small smoke version so that it keeps working.
//! `CAPICTL_BENCH_WATCHERS=N` runs it with another number of watchers (0: the writes alone).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::json;

use capictl::management::ServeOptions;

#[path = "../tests/common/mod.rs"]
mod common;

const CONCURRENCY: usize = 64;
/// Writes made one at a time to time watch delivery.
const PROBES: usize = 100;
/// How many times each object is read by the gets.
const GET_ROUNDS: usize = 3;

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

fn p50_p99_max(sorted: &[Duration]) -> String {
    format!(
        "{} / {} / {}",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        ms(percentile(sorted, 1.0))
    )
}

fn rate(count: usize, elapsed: Duration) -> String {
    format!("{:.0}", count as f64 / elapsed.as_secs_f64())
}

/// What a watcher reads of each event line: its type and the object's name, found in the
/// line's bytes as the server writes them
/// (`{"type":"ADDED","object":{…"metadata":{…"name":"cm-1",…`) without decoding it. The
/// watchers measure the server's delivery; decoding each of the two million events into a
/// `ConfigMap`, or even skimming it with serde, made the 100 watchers in this process the
/// benchmark's main cost on two cores (12% of its samples on 2026-12-04), and checking each
/// line as UTF-8 and searching it as a `str` took another 4%.
fn type_and_name(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    let kind = &rest[..rest.iter().position(|&b| b == b'"')?];
    // A ConfigMap's keys are sorted and `metadata` is its last: after its `name` come only
    // `namespace`, `resourceVersion`, `uid` and `managedFields` (whose field sets have no
    // `"name":"`), so the last `"name":"` of the line is it. Searched from the end with
    // memchr's vectorised search: comparing windows byte by byte back over the managedFields
    // was a tenth of the client threads' samples.
    const NAME: &[u8] = b"\"name\":\"";
    let at = memchr::memmem::rfind(rest, NAME)? + NAME.len();
    let name = &rest[at..];
    Some((kind, &name[..name.iter().position(|&b| b == b'"')?]))
}

/// The bulk writes' objects are `cm-0`… and the probes `probe-0`…: their place in a watcher's
/// table of arrival times.
fn slot(name: &[u8], objects: usize) -> Option<usize> {
    let (prefix, i) = std::str::from_utf8(name).ok()?.split_once('-')?;
    match prefix {
        "cm" => i.parse().ok(),
        "probe" => Some(objects + i.parse::<usize>().ok()?),
        _ => None,
    }
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

/// Creates `cm-0`…, many in flight, each acknowledged only once it is on disk: when each was
/// acknowledged (since `start`), and how long they took.
async fn create_all(client: &Client, objects: usize, start: Instant) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let mut acknowledged: Vec<(usize, Duration)> = futures::stream::iter(0..objects)
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
                (i, start.elapsed())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    acknowledged.sort();
    (
        acknowledged.into_iter().map(|(_, at)| at).collect(),
        elapsed,
    )
}

/// Merge-patches every `cm-N`, many in flight, each durable before it is acknowledged: how
/// long they took.
async fn update_all(client: &Client, objects: usize) -> Duration {
    let started = Instant::now();
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
    started.elapsed()
}

/// What a watcher saw: when each object (bulk writes, then probes) first reached it, since
/// the run's start, and how many updates it saw.
struct Seen {
    added: Vec<Option<Duration>>,
    modified: usize,
}

/// A watcher on a connection of its own, from the start, until it has seen every object
/// created and every update; `caught_up` counts the watchers that have seen the bulk creates.
async fn watcher(
    options: &ServeOptions,
    objects: usize,
    start: Instant,
    caught_up: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Seen> {
    let client = common::admin_client(options).await;
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
    tokio::spawn(async move {
        let mut seen = Seen {
            added: vec![None; objects + PROBES],
            modified: 0,
        };
        let (mut created, mut lines, mut line) = (0, std::pin::pin!(lines), Vec::new());
        while created < objects + PROBES || seen.modified < objects {
            line.clear();
            if !matches!(lines.read_until(b'\n', &mut line).await, Ok(1..)) {
                break;
            }
            let (kind, name) = type_and_name(&line).expect("a watch event");
            match kind {
                b"ADDED" => {
                    let at = &mut seen.added[slot(name, objects).expect("a bench object")];
                    if at.replace(start.elapsed()).is_none() {
                        created += 1;
                    }
                    if created == objects {
                        caught_up.fetch_add(1, Ordering::SeqCst);
                    }
                }
                b"MODIFIED" => seen.modified += 1,
                _ => {}
            }
        }
        seen
    })
}

/// What one run against one storage back end measures.
#[derive(Clone, Copy)]
enum Measure {
    /// The writes alone, then the reads: the server and its store.
    WritesAndReads,
    /// The writes while watchers get every event, and how soon the events reach them.
    WatchedWrites(usize),
}

/// One run against a new management cluster on one storage back end, served from `server`:
/// the rows of the table.
async fn run(
    server: &tokio::runtime::Handle,
    objects: usize,
    measure: Measure,
    etcd_endpoints: Vec<String>,
) -> Vec<(String, String)> {
    let (dir, options, running) = server
        .spawn(common::serve_in_process("bench", etcd_endpoints, None))
        .await
        .unwrap();
    let client = common::admin_client(&options).await;
    let mut rows = match measure {
        Measure::WritesAndReads => writes_and_reads(&client, objects).await,
        Measure::WatchedWrites(watchers) => {
            watched_writes(&options, &client, objects, watchers).await
        }
    };
    let store_size = std::fs::metadata(options.dir.store()).map(|m| m.len());
    server.spawn(running.stop()).await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
    if let (Measure::WritesAndReads, Ok(size)) = (measure, store_size) {
        rows.push((
            "embedded store file after the run".into(),
            format!("{:.1} MiB", size as f64 / (1 << 20) as f64),
        ));
    }
    rows
}

async fn writes_and_reads(client: &Client, objects: usize) -> Vec<(String, String)> {
    let (_, create_elapsed) = create_all(client, objects, Instant::now()).await;
    let update_elapsed = update_all(client, objects).await;

    // Gets, each answer read whole and checked but not decoded (as the watchers do); every
    // object a few times, so that the measurement lasts long enough not to be a moment's
    // noise on a shared machine (one round took ~0.5 s).
    let gets = objects * GET_ROUNDS;
    let get_started = Instant::now();
    futures::stream::iter((0..objects).cycle().take(gets))
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
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut full = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let list = api.list(&ListParams::default()).await.unwrap();
        full.push(t.elapsed());
        assert_eq!(list.items.len(), objects);
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

    vec![
        ("creates/s".into(), rate(objects, create_elapsed)),
        (
            "updates/s (merge patches)".into(),
            rate(objects, update_elapsed),
        ),
        ("gets/s".into(), rate(gets, get_elapsed)),
        (
            format!("list of all {objects} objects, p50 / max of 10"),
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
    ]
}

async fn watched_writes(
    options: &ServeOptions,
    client: &Client,
    objects: usize,
    watchers: usize,
) -> Vec<(String, String)> {
    let start = Instant::now();
    let caught_up = Arc::new(AtomicUsize::new(0));
    let mut watcher_tasks = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        watcher_tasks.push(watcher(options, objects, start, caught_up.clone()).await);
    }
    let (acknowledged, create_elapsed) = create_all(client, objects, start).await;

    // Watch delivery: once every watcher has caught up with the bulk writes, single writes,
    // one at a time, timed from the request to each watcher.
    while caught_up.load(Ordering::SeqCst) < watchers {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut sent = Vec::with_capacity(PROBES);
    for i in 0..PROBES {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("probe-{i}")}})).unwrap();
        sent.push(start.elapsed());
        api.create(&Default::default(), &cm).await.unwrap();
    }
    let update_elapsed = update_all(client, objects).await;

    let mut single = Vec::with_capacity(PROBES * watchers);
    let mut under_load = Vec::with_capacity(objects * watchers);
    for task in watcher_tasks {
        let seen = tokio::time::timeout(Duration::from_secs(300), task)
            .await
            .expect("watchers finish")
            .unwrap();
        let added: Vec<Duration> = seen
            .added
            .into_iter()
            .map(|at| at.expect("every watcher sees every object"))
            .collect();
        assert_eq!(seen.modified, objects, "every watcher sees every update");
        // A watcher may see a write before its writer has read the acknowledgement: the event
        // is published when the write is durable, before the answer goes out.
        for (at, acked) in added.iter().zip(&acknowledged) {
            under_load.push(at.saturating_sub(*acked));
        }
        for (at, sent) in added[objects..].iter().zip(&sent) {
            single.push(at.saturating_sub(*sent));
        }
    }
    single.sort();
    under_load.sort();

    vec![
        (
            format!("creates/s while {watchers} watchers get every event"),
            rate(objects, create_elapsed),
        ),
        (
            format!("updates/s while {watchers} watchers get every event"),
            rate(objects, update_elapsed),
        ),
        (
            format!(
                "watch delivery to {watchers} watchers during the creates, after the acknowledgement, p50 / p99 / max"
            ),
            p50_p99_max(&under_load),
        ),
        (
            format!("watch delivery of a single write to {watchers} watchers, p50 / p99 / max"),
            p50_p99_max(&single),
        ),
    ]
}

/// Both kinds of run on one storage back end (a new etcd for each run on etcd), the clients on
/// `clients` and each management cluster on a runtime of its own.
fn runs(
    clients: &tokio::runtime::Runtime,
    objects: usize,
    watchers: usize,
    on_etcd: bool,
) -> Vec<(String, String)> {
    let mut measures = vec![Measure::WritesAndReads];
    if watchers > 0 {
        measures.push(Measure::WatchedWrites(watchers));
    }
    let mut rows = Vec::new();
    for measure in measures {
        let etcd = on_etcd.then(common::Etcd::start);
        let endpoints = etcd.iter().map(|e| e.endpoint.clone()).collect();
        let server = tokio::runtime::Runtime::new().unwrap();
        rows.extend(clients.block_on(run(server.handle(), objects, measure, endpoints)));
    }
    rows
}

fn main() {
    capictl::install_crypto_provider();
    let full = std::env::args().any(|a| a == "--bench");
    let (objects, mut watchers) = if full { (10_000, 100) } else { (200, 5) };
    if let Ok(n) = std::env::var("CAPICTL_BENCH_WATCHERS") {
        watchers = n.parse().expect("CAPICTL_BENCH_WATCHERS is a number");
    }
    let clients = tokio::runtime::Runtime::new().unwrap();
    let embedded = runs(&clients, objects, watchers, false);
    let on_etcd = runs(&clients, objects, watchers, true);
    println!("management cluster over HTTPS, kube-rs clients, {CONCURRENCY} requests in flight");
    println!("{objects} ConfigMaps of ~256 bytes, {watchers} watchers");
    println!("| measurement | embedded store (redb) | etcd 3.4 on loopback | embedded ÷ etcd |");
    println!("|---|---|---|---|");
    for (what, value) in &embedded {
        let other = on_etcd
            .iter()
            .find(|(w, _)| w == what)
            .map_or("-", |(_, v)| v.as_str());
        // Rates side by side as a ratio, since absolute figures move with the machine's load.
        let ratio = match (value.parse::<f64>(), other.parse::<f64>()) {
            (Ok(a), Ok(b)) if what.contains("/s") && b > 0.0 => format!("{:.2}×", a / b),
            _ => "-".to_string(),
        };
        println!("| {what} | {value} | {other} | {ratio} |");
    }
}
