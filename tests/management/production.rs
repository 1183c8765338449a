//! The embedded management cluster in production: several `capictl management up` servers on
//! one etcd, as behind a load balancer (every server answers; one at a time runs the providers'
//! controllers, and another takes over when it stops or dies), and the recovery drill of a
//! management cluster lost and rebuilt from its backup.

use std::time::{Duration, Instant};

use crate::common::management::*;
use crate::move_and_upgrade::{init, machine_lines, ready_machines, wait_available};

const LEASE: &str = "capictl-management-controllers";

fn holder(m: &Management) -> String {
    m.kubectl(&[
        "get",
        "lease",
        "-n",
        "kube-system",
        LEASE,
        "-o",
        "jsonpath={.spec.holderIdentity}",
        "--ignore-not-found",
    ])
}

/// Waits until the controllers' Lease names a holder other than `previous`; how long that took.
fn new_holder(m: &Management, previous: &str, seconds: u64) -> (String, Duration) {
    let start = Instant::now();
    loop {
        let now = holder(m);
        if !now.is_empty() && now != previous {
            return (now, start.elapsed());
        }
        assert!(
            start.elapsed() < Duration::from_secs(seconds),
            "no server took the controllers' Lease from {previous:?} within {seconds} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The cluster's Machines as `name=uid`, sorted.
pub(crate) fn machine_uids(m: &Management, cluster: &str) -> Vec<String> {
    let out = machine_lines(m, cluster, "{.metadata.name}={.metadata.uid}");
    let mut rows: Vec<String> = out.lines().map(str::to_string).collect();
    rows.sort();
    rows
}

/// Waits until the cluster has `count` Machines, all Ready; their `name=uid`. Fails at once
/// when there are more: each Machine is made once.
pub(crate) fn machines_once_ready(m: &Management, cluster: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let uids = machine_uids(m, cluster);
        assert!(
            uids.len() <= count,
            "more than {count} Machines: {uids:?}\n{}",
            m.kubectl(&["get", "machines,machinesets", "-o", "wide"])
        );
        if uids.len() == count && ready_machines(m, cluster).len() == count {
            return uids;
        }
        assert!(
            Instant::now() < deadline,
            "not {count} Ready Machines: {uids:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(crate) fn scale(m: &Management, machine_deployment: &str, replicas: u32) {
    m.kubectl(&[
        "scale",
        "machinedeployment",
        machine_deployment,
        &format!("--replicas={replicas}"),
    ]);
}

/// Two servers of one management cluster on etcd: only the one holding the Lease runs the
/// controllers, so a Cluster applied through the other comes up with each Machine made once.
/// The leader killed (SIGKILL, no goodbye), the other takes the Lease after the lease duration
/// and finishes the scale-up in flight, replacing no Machine; the first back as a candidate and
/// the second stopped (`management down` releases the Lease), the first takes over at once.
#[test]
fn servers_on_one_etcd_run_one_set_of_controllers_and_fail_over() {
    let etcd = crate::common::Etcd::start();
    let a = Management::up_with_extra_args(&[&format!("--etcd-endpoints={}", etcd.endpoint)]);
    let (first, _) = new_holder(&a, "", 30);
    let b = Management::up_beside(&a);
    init(&b, "in-memory");
    b.apply_in_memory_cluster("ha", 2);
    wait_available(&b, "ha");
    assert_eq!(ready_machines(&b, "ha").len(), 3);
    assert_eq!(holder(&b), first, "the first server leads throughout");
    let before = machine_uids(&b, "ha");
    assert_eq!(before.len(), 3, "each Machine made once: {before:?}");

    // The leader dies; work arrives through the other server before anyone leads.
    let killed = Instant::now();
    a.kill();
    scale(&b, "ha-md-0", 3);
    let (second, waited) = new_holder(&b, &first, 30);
    let failover = killed.elapsed().max(waited);
    eprintln!("failover after SIGKILL: {:.1} s", failover.as_secs_f64());
    // The Lease lasts 15 s after its last renewal (every 2 s), by the candidate's clock.
    assert!(
        failover >= Duration::from_secs(12) && failover < Duration::from_secs(25),
        "the second server took over {failover:?} after the first died"
    );
    let uids = machines_once_ready(&b, "ha", 4);
    for machine in &before {
        assert!(uids.contains(machine), "{machine} was replaced: {uids:?}");
    }
    wait_available(&b, "ha");

    // A graceful stop hands the Lease over at once.
    a.start();
    let stopped = Instant::now();
    b.down();
    let (third, _) = new_holder(&a, &second, 10);
    let handover = stopped.elapsed();
    eprintln!(
        "handover after management down: {:.1} s",
        handover.as_secs_f64()
    );
    assert_ne!(third, first, "the restarted server is a new candidate");
    assert!(
        handover < Duration::from_secs(8),
        "handover took {handover:?}"
    );
    scale(&a, "ha-md-0", 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    while machine_uids(&a, "ha").len() != 2 {
        assert!(
            Instant::now() < deadline,
            "the new leader did not scale down: {:?}",
            machine_uids(&a, "ha")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for machine in machine_uids(&a, "ha") {
        assert!(uids.contains(&machine), "{machine} is new");
    }
    wait_available(&a, "ha");
}

/// Seed 003's recovery drill: the management cluster is lost (its server killed, its state
/// directory gone), a new one is made from the backup taken while it ran, and it takes every
/// Cluster over without replacing a Machine: the same Machines, the same CA, and a scale-up
/// whose new Machine gets its Node.
#[test]
fn a_management_cluster_lost_is_rebuilt_from_its_backup_without_replacing_a_machine() {
    use std::os::unix::fs::PermissionsExt;
    let lost = Management::up();
    init(&lost, "in-memory");
    lost.apply_in_memory_cluster("drill", 2);
    wait_available(&lost, "drill");
    let before = machines_once_ready(&lost, "drill", 3);
    let backup = lost.dir.join("drill.backup");
    let saved = capictl(&[
        "management",
        "backup",
        backup.to_str().unwrap(),
        "--dir",
        &lost.state(),
    ]);
    assert!(saved.status.success(), "{}", text(&saved.stderr));
    assert!(text(&saved.stderr).contains("from the running server"));
    let mode = std::fs::metadata(&backup).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the backup holds every Secret");
    let ca = std::fs::read(std::path::Path::new(&lost.state()).join("ca.crt")).unwrap();

    // Lost: the server dies and its state with it.
    lost.kill();
    let kept = std::env::temp_dir().join(format!("capictl-backup-{}", uuid::Uuid::new_v4()));
    std::fs::rename(&backup, &kept).unwrap();
    drop(lost);

    let rebuilt = Management::unstarted();
    let restore = |dir: &str| {
        capictl(&[
            "management",
            "restore",
            kept.to_str().unwrap(),
            "--dir",
            dir,
        ])
    };
    let restored = restore(&rebuilt.state());
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    rebuilt.start();
    assert_eq!(
        std::fs::read(std::path::Path::new(&rebuilt.state()).join("ca.crt")).unwrap(),
        ca,
        "the CA comes back: the clients' kubeconfigs keep working"
    );
    // A second restore over a running (or any restored) state is refused and changes nothing.
    let again = restore(&rebuilt.state());
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("stop it first"),
        "{}",
        text(&again.stderr)
    );
    wait_available(&rebuilt, "drill");
    assert_eq!(machines_once_ready(&rebuilt, "drill", 3), before);
    scale(&rebuilt, "drill-md-0", 3);
    let after = machines_once_ready(&rebuilt, "drill", 4);
    for machine in &before {
        assert!(after.contains(machine), "{machine} was replaced: {after:?}");
    }
    let nodes = machine_lines(&rebuilt, "drill", "{.status.nodeRef.name}");
    assert_eq!(
        nodes.lines().filter(|n| !n.is_empty()).count(),
        4,
        "every Machine has its Node: {nodes}"
    );
    std::fs::remove_file(kept).unwrap();
}

/// Behind a load balancer, clients reach the servers by the balancer's name or address: with
/// `--tls-san`, the serving certificate carries it and kubectl trusts the server there; by an
/// address the certificate does not name, kubectl refuses it.
#[test]
fn the_serving_certificate_names_the_addresses_given_to_it() {
    let m = Management::up_with_extra_args(&["--listen", "0.0.0.0:0", "--tls-san", "127.0.0.2"]);
    let port = m.server().rsplit(':').next().unwrap().to_string();
    let by = |address: &str| {
        m.kubectl_command(&[
            "--server",
            &format!("https://{address}:{port}"),
            "get",
            "namespace",
            "default",
            "-o",
            "name",
        ])
        .output()
        .unwrap()
    };
    let named = by("127.0.0.2");
    assert!(named.status.success(), "{}", text(&named.stderr));
    assert_eq!(text(&named.stdout).trim(), "namespace/default");
    let unnamed = by("127.0.0.3");
    assert!(!unnamed.status.success());
    assert!(
        text(&unnamed.stderr).contains("certificate"),
        "{}",
        text(&unnamed.stderr)
    );
}
