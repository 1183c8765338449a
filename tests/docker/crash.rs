//! Crash consistency on Docker: `capictl management serve`, which runs the Docker provider's
//! controllers, killed (SIGKILL) at a random moment while Docker clusters are created, scaled,
//! upgraded, remediated and deleted, then started again. Every cluster must converge to its
//! spec with exactly its containers: no Machine without its node container, no node container
//! without its Machine, one load balancer, etcd's members exactly the control-plane Machines,
//! and nothing left of a deleted cluster. `CAPICTL_DOCKER_CRASH_RUNS` sets how many crashes
//! (3 by default, what CI runs: creates, scale-ups, an upgrade or a remediation, and a delete); each run prints its seed, and `CAPICTL_CRASH_SEED` replays
//! one.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

use crate::common::crash::{Live, Moments, Replacing, asked, change, from_env, seed};
use crate::common::docker::etcd_through;
use crate::common::fixtures::worker_health_check;
use crate::common::quickstart::*;

const VERSION: &str = "v1.28.13";
const UPGRADE: &str = "v1.29.10";

/// Removes every container the harness's clusters left, whatever happened: the nodes first,
/// whose kubelets would start their Pods' containers again, then what is left, until a listing
/// finds nothing.
struct Sweep(String);

impl Drop for Sweep {
    fn drop(&mut self) {
        for _ in 0..5 {
            let left = containers_of_prefix(&self.0);
            if left.is_empty() {
                return;
            }
            let (nodes, pods): (Vec<_>, Vec<_>) = left.into_iter().partition(|(_, node)| *node);
            for (c, _) in nodes.into_iter().chain(pods) {
                let _ = Command::new("docker").args(["rm", "-f", "-v", &c]).output();
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// The containers of clusters whose names start with `prefix` (nodes, load balancers, and
/// their Pods' containers), each with whether it is a node or load balancer.
fn containers_of_prefix(prefix: &str) -> Vec<(String, bool)> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=io.x-k8s.capictl.cluster",
            "--format",
            "{{.Names}} {{.Label \"io.x-k8s.capictl.cluster\"}} {{.Label \"io.x-k8s.kind.role\"}}",
        ])
        .output()
        .unwrap();
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            Some((
                fields.next()?,
                fields.next()?,
                fields.next().unwrap_or_default(),
            ))
        })
        .filter(|(_, owner, _)| owner.starts_with(&format!("default/{prefix}")))
        .map(|(name, _, role)| (name.to_string(), !role.is_empty()))
        .collect()
}

/// The node and load-balancer containers of cluster `name` by role: (nodes, load balancers).
fn cluster_containers(name: &str) -> (BTreeSet<String>, usize) {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("label=io.x-k8s.capictl.cluster=default/{name}"),
            "--filter",
            "label=io.x-k8s.kind.role",
            "--format",
            "{{.Names}} {{.Label \"io.x-k8s.kind.role\"}}",
        ])
        .output()
        .unwrap();
    let mut nodes = BTreeSet::new();
    let mut balancers = 0;
    for line in text(&out.stdout).lines() {
        match line.split_once(' ') {
            Some((_, "external-load-balancer")) => balancers += 1,
            Some((node, _)) => {
                nodes.insert(node.to_string());
            }
            None => {}
        }
    }
    (nodes, balancers)
}

/// Each crash comes while work is in flight on the Docker Engine: a cluster created, another
/// scaled up, an older one deleted, and one of the others upgraded or a worker of it marked
/// for remediation. After the restart every remaining cluster is Available with exactly the
/// Machines its spec asks for (never more on the way than a rollout's one at a time), each
/// Machine's node container and no other, one load balancer, etcd's members the control-plane
/// Machines; the Machines that were Ready before the crash and nothing asked to replace are
/// still there; every deleted cluster is gone with all its containers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_clusters_converge_after_the_management_cluster_is_killed_at_any_moment() {
    let runs = from_env("CAPICTL_DOCKER_CRASH_RUNS").unwrap_or(3);
    let seed = seed();
    let mut moments = Moments(seed);
    let s = Session::start("crash", &format!("{VERSION},{UPGRADE}")).await;
    let _sweep = Sweep(s.cluster.clone());
    let state = s.dir.join("management");
    let mut live: Vec<Live> = Vec::new();
    let mut deleted: Vec<String> = Vec::new();
    for run in 0..runs {
        let kept: Vec<String> = live.iter().flat_map(|c| machines_of(&s, &c.name)).collect();
        for c in &mut live {
            c.replacing = Replacing::Nothing;
        }
        let name = format!("{}-{run}", s.cluster);
        apply_cluster(&s, &name);
        live.push(Live::new(name, VERSION));
        change(&mut live, &mut deleted, &mut moments, 1, UPGRADE, &|args| {
            s.kubectl(args)
        });
        // Anywhere from the first writes to the middle of the nodes' bootstrap.
        let delay = Duration::from_millis(moments.below(12_000));
        tokio::time::sleep(delay).await;
        kill_management(&state);
        s.capictl(&["management", "up", "--dir", state.to_str().unwrap()]);
        eprintln!(
            "run {run}: killed {delay:?} after the changes ({}), started again",
            asked(&live)
        );

        for c in &live {
            wait(&s, &format!("{} Available", c.name), 420, || {
                let cluster = s.json(&["get", "cluster", &c.name]);
                match condition(&cluster, "Available").as_deref() {
                    Some("True") => Ok(()),
                    // What the Cluster says it waits for, should it never come.
                    other => Err(format!(
                        "seed {seed}, run {run}: Available {other:?}; conditions: {}",
                        cluster["status"]["conditions"]
                    )),
                }
            })
            .await;
            let count = 1 + c.workers;
            let victim = match &c.replacing {
                Replacing::One(v) => Some(v.as_str()),
                _ => None,
            };
            let machines = machines_converge(&s, &c.name, count, c.version, victim).await;
            let prefix = format!("{}-", c.name);
            for machine in kept.iter().filter(|k| k.starts_with(&prefix)) {
                assert!(
                    c.asked_to_replace(machine) || machines.contains(machine),
                    "seed {seed}, run {run}: {machine} was replaced: {machines:?}"
                );
            }
            containers_match_machines(&s, &c.name, seed, run).await;
            etcd_members_are_the_control_planes(&s, &c.name, seed, run).await;
        }
        for name in &deleted {
            wait(&s, &format!("{name} gone with its containers"), 180, || {
                let objects = s.kubectl(&[
                    "get",
                    "clusters,machines,dockermachines,dockerclusters,kubeadmconfigs",
                    "-l",
                    &format!("cluster.x-k8s.io/cluster-name={name}"),
                    "-o",
                    "name",
                ]);
                let (nodes, balancers) = cluster_containers(name);
                if objects.trim().is_empty() && nodes.is_empty() && balancers == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "seed {seed}, run {run}: left: {objects} {nodes:?} and {balancers} load balancers"
                    ))
                }
            })
            .await;
        }
    }
    for c in &live {
        s.kubectl(&["delete", "cluster", &c.name, "--wait=false"]);
    }
    for c in &live {
        wait(&s, &format!("{} deleted", c.name), 180, || {
            let (nodes, balancers) = cluster_containers(&c.name);
            if nodes.is_empty() && balancers == 0 {
                Ok(())
            } else {
                Err(format!("{nodes:?} and {balancers} load balancers"))
            }
        })
        .await;
    }
}

/// `capictl generate cluster NAME` (development flavor, one control plane, one worker) with
/// a MachineHealthCheck of its workers, applied.
fn apply_cluster(s: &Session, name: &str) {
    let manifest = s.capictl(&[
        "generate",
        "cluster",
        name,
        "--flavor",
        "development",
        "--kubernetes-version",
        VERSION,
        "--control-plane-machine-count",
        "1",
        "--worker-machine-count",
        "1",
        "--target-namespace",
        "default",
    ]);
    let file = s.dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!("{manifest}\n---\n{}", worker_health_check(name)),
    )
    .unwrap();
    s.kubectl(&["apply", "-f", file.to_str().unwrap()]);
}

/// SIGKILL of the server of the management cluster in `state`.
fn kill_management(state: &std::path::Path) {
    let info: Value =
        serde_json::from_slice(&std::fs::read(state.join("server.json")).unwrap()).unwrap();
    let pid = info["pid"].as_u64().unwrap().to_string();
    let status = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(status.success(), "kill -KILL {pid}");
}

/// The cluster's Machines as `name=uid`, sorted.
fn machines_of(s: &Session, cluster: &str) -> Vec<String> {
    let list = s.json(&[
        "get",
        "machines",
        "-l",
        &format!("cluster.x-k8s.io/cluster-name={cluster}"),
    ]);
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}={}",
                m["metadata"]["name"].as_str().unwrap(),
                m["metadata"]["uid"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    names
}

/// Waits until the cluster has `count` Machines, all Ready and at `version`, without
/// `replaced`; their `name=uid`. Fails at once when there are more than a rollout makes at a
/// time (one each for the control plane and the workers).
async fn machines_converge(
    s: &Session,
    cluster: &str,
    count: usize,
    version: &str,
    replaced: Option<&str>,
) -> Vec<String> {
    let selector = format!("cluster.x-k8s.io/cluster-name={cluster}");
    wait(s, &format!("{cluster}'s {count} Machines"), 420, || {
        let ms = machines(s, &selector);
        assert!(
            ms.len() <= count + 2,
            "more than {} Machines of {cluster}: {:?}",
            count + 2,
            ms.iter()
                .map(|m| m["metadata"]["name"].clone())
                .collect::<Vec<_>>()
        );
        rolled_out_of(&ms, version, count)?;
        let victim_left = replaced.is_some_and(|victim| {
            ms.iter()
                .any(|m| m["metadata"]["name"].as_str() == Some(victim))
        });
        if victim_left {
            return Err(format!("{replaced:?} not remediated yet"));
        }
        Ok(())
    })
    .await;
    machines_of(s, cluster)
}

/// Waits until the cluster's node containers are exactly its Machines' (a removed Machine's
/// container goes a moment after it), and it has one load balancer.
async fn containers_match_machines(s: &Session, cluster: &str, seed: u64, run: u64) {
    wait(s, &format!("{cluster}'s containers are its Machines'"), 120, || {
        let wanted: BTreeSet<String> = machines_of(s, cluster)
            .iter()
            .map(|m| {
                capictl::providers::docker::container::machine_container(
                    cluster,
                    m.split_once('=').unwrap().0,
                )
            })
            .collect();
        let (nodes, balancers) = cluster_containers(cluster);
        if nodes == wanted && balancers == 1 {
            Ok(())
        } else {
            Err(format!(
                "seed {seed}, run {run}: containers {nodes:?} and {balancers} load balancers for Machines {wanted:?}"
            ))
        }
    })
    .await;
}

/// Waits until etcd's members, asked through a control plane, are exactly the control-plane
/// Machines' nodes.
async fn etcd_members_are_the_control_planes(s: &Session, cluster: &str, seed: u64, run: u64) {
    let ca: Secret =
        serde_json::from_value(s.json(&["get", "secret", &format!("{cluster}-etcd")])).unwrap();
    let planes: BTreeSet<String> = machines(
        s,
        &format!("cluster.x-k8s.io/cluster-name={cluster},cluster.x-k8s.io/control-plane"),
    )
    .iter()
    .map(|m| {
        capictl::providers::docker::container::machine_container(
            cluster,
            m["metadata"]["name"].as_str().unwrap(),
        )
    })
    .collect();
    let ip = |container: &str| {
        text(
            &Command::new("docker")
                .args([
                    "inspect",
                    "-f",
                    "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                    container,
                ])
                .output()
                .unwrap()
                .stdout,
        )
        .trim()
        .to_string()
    };
    let through = ip(planes.iter().next().unwrap());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let members: Result<BTreeSet<String>, String> = async {
            let mut etcd = etcd_through(&ca, &through)
                .await
                .map_err(|e| e.to_string())?;
            let list = etcd.member_list().await.map_err(|e| e.to_string())?;
            Ok(list
                .members()
                .iter()
                .map(|m| m.name().to_string())
                .collect())
        }
        .await;
        match members {
            Ok(members) if members == planes => return,
            other => assert!(
                Instant::now() < deadline,
                "seed {seed}, run {run}: etcd members {other:?}, control-plane Machines {planes:?}"
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
