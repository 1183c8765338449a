//! One management cluster at a time (seed 003 §17): a backup of a running management cluster
//! restored into a second one holds the same Cluster, and exactly one of the two reconciles
//! it. The second says who holds it and leaves it alone, until the user takes it over; then the
//! first says so and leaves it alone in turn, and deletes its stale copy only once taken over.

use serde_json::Value;

use crate::common::quickstart::{Session, condition, rolled_out_of, text, wait};

const VERSION: &str = "v1.29.10";

/// The management cluster's own uid.
fn identity(s: &Session) -> String {
    s.kubectl(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "capictl-management-identity",
        "-o",
        "jsonpath={.data.uid}",
    ])
}

fn claimed_by(s: &Session) -> String {
    s.json(&["get", "cluster", &s.cluster])["metadata"]["annotations"]
        ["management.capictl.io/claimed-by"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The Paused condition of an object, as (status, reason, message).
fn paused(object: &Value) -> (String, String, String) {
    let c = object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Paused")
        .cloned()
        .unwrap_or_default();
    let field = |f: &str| c[f].as_str().unwrap_or_default().to_string();
    (field("status"), field("reason"), field("message"))
}

/// Waits until the Cluster is paused because `holder` holds its claim, and its
/// MachineDeployment is paused too; the Cluster's message.
async fn waits_for(s: &Session, holder: &str) -> String {
    let mut message = String::new();
    wait(s, &format!("the Cluster left to {holder}"), 90, || {
        let (status, reason, m) = paused(&s.json(&["get", "cluster", &s.cluster]));
        let md = paused(&s.json(&["get", "md", &format!("{}-md-0", s.cluster)]));
        if status == "True"
            && reason == "ClaimedByAnotherManagementCluster"
            && m.contains(holder)
            && md.0 == "True"
            && md.2.contains(holder)
        {
            message = m;
            Ok(())
        } else {
            Err(format!(
                "Cluster Paused {status} {reason}: {m}; MachineDeployment {md:?}"
            ))
        }
    })
    .await;
    message
}

fn machine_count(s: &Session) -> usize {
    s.json(&["get", "machines"])["items"]
        .as_array()
        .map_or(0, Vec::len)
}

fn scale(s: &Session, replicas: u32) {
    s.kubectl(&[
        "scale",
        "md",
        &format!("{}-md-0", s.cluster),
        &format!("--replicas={replicas}"),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_management_clusters_holding_one_cluster_never_both_reconcile_it() {
    let a = Session::start("owner", VERSION).await;
    a.apply_cluster(VERSION, 1, 1);
    a.wait_available(240).await;
    let a_uid = identity(&a);
    assert_eq!(
        claimed_by(&a),
        a_uid,
        "the management cluster claims what it makes"
    );

    // A backup of the running management cluster, restored into a second one.
    let backup = a.dir.join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    a.capictl(&["move", "--to-directory", backup.to_str().unwrap()]);
    let b = Session::up(&a.cluster);
    b.capictl(&["move", "--from-directory", backup.to_str().unwrap()]);
    let b_uid = identity(&b);
    assert_ne!(a_uid, b_uid);

    // The second says who holds the Cluster, in its conditions and in describe.
    let message = waits_for(&b, &a_uid).await;
    assert!(message.contains("capictl move --take-over"), "{message}");
    let described = b.capictl(&[
        "describe",
        "cluster",
        &b.cluster,
        "--show-conditions",
        "all",
    ]);
    assert!(described.contains(&a_uid), "{described}");
    // Scaled there by mistake, the copy makes no Machine; the first still holds the Cluster.
    let before = machine_count(&b);
    scale(&b, 2);
    tokio::time::sleep(std::time::Duration::from_secs(20)).await;
    assert_eq!(machine_count(&b), before, "the copy made a Machine");
    assert_eq!(machine_count(&a), 2);
    let (status, _, _) = paused(&a.json(&["get", "cluster", &a.cluster]));
    assert_eq!(status, "False", "the holder reconciles");

    // Taken over: the second reconciles (the scale it was asked for goes through), and the
    // first says who holds the Cluster now and leaves it alone.
    let took = b.capictl(&["move", "--take-over"]);
    assert!(
        took.contains(&format!("took over from management cluster {a_uid}")),
        "{took}"
    );
    assert_eq!(claimed_by(&b), b_uid);
    waits_for(&a, &b_uid).await;
    wait(&b, "the second worker Ready", 180, || {
        let workers = b.json(&["get", "machines", "-l", "cluster.x-k8s.io/deployment-name"]);
        rolled_out_of(workers["items"].as_array().unwrap(), VERSION, 2)
    })
    .await;
    let a_machines = machine_count(&a);
    scale(&a, 3);
    tokio::time::sleep(std::time::Duration::from_secs(15)).await;
    assert_eq!(machine_count(&a), a_machines, "the first made a Machine");

    // The holder deletes the cluster; the other's copy stays paused, touching nothing.
    let deleted = b.run(
        crate::common::quickstart::capictl_binary(),
        &["delete", "cluster", &b.cluster, "--yes"],
    );
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    wait(&b, "the cluster's containers gone", 120, || {
        let left = b.node_containers();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    let still = a.json(&["get", "cluster", &a.cluster]);
    assert_eq!(
        condition(&still, "Paused").as_deref(),
        Some("True"),
        "{still}"
    );
    // Deleting the stale copy there would wait forever: refused, saying why and what to do.
    let refused = a.run(
        crate::common::quickstart::capictl_binary(),
        &["delete", "cluster", &a.cluster, "--yes"],
    );
    assert!(!refused.status.success());
    let why = text(&refused.stderr);
    assert!(
        why.contains("reconciled by another management cluster") && why.contains("--take-over"),
        "{why}"
    );
    // Taken over there (the workload cluster is gone: nothing to confirm against), it goes.
    a.capictl(&["move", "--take-over", "--cluster", &a.cluster]);
    a.capictl(&["delete", "cluster", &a.cluster, "--yes"]);
    assert_eq!(a.kubectl(&["get", "clusters,machines", "-o", "name"]), "");
}
