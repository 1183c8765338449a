//! `capictl move` and `capictl upgrade` between real embedded management clusters (each a
//! `capictl management up` process), as users run them.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::management::*;

pub(crate) fn with(m: &Management, args: &[&str]) -> std::process::Output {
    let kubeconfig = m.kubeconfig().display().to_string();
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", &kubeconfig]);
    capictl(&all)
}

pub(crate) fn succeeds(m: &Management, args: &[&str]) -> String {
    let out = with(m, args);
    assert!(
        out.status.success(),
        "capictl {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

pub(crate) fn init(m: &Management, infrastructure: &str) {
    succeeds(
        m,
        &[
            "init",
            "--infrastructure",
            infrastructure,
            "--wait-providers",
        ],
    );
}

fn condition(m: &Management, kind: &str, name: &str, condition: &str) -> String {
    let path = format!("jsonpath={{.status.conditions[?(@.type==\"{condition}\")].status}}");
    let out = m
        .kubectl_command(&["get", kind, name, "-o", &path])
        .output()
        .unwrap();
    text(&out.stdout)
}

pub(crate) fn wait_available(m: &Management, cluster: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while condition(m, "cluster", cluster, "Available") != "True" {
        if Instant::now() > deadline {
            let tree = with(
                m,
                &["describe", "cluster", cluster, "--show-conditions", "all"],
            );
            let objects = m
                .kubectl_command(&[
                    "get",
                    "clusters,machines,kcp,md,inmemoryclusters,inmemorymachines",
                    "-A",
                ])
                .output()
                .unwrap();
            panic!(
                "Cluster {cluster} not Available in {}:\n{}{}\n{}{}",
                m.server(),
                text(&tree.stdout),
                text(&tree.stderr),
                text(&objects.stdout),
                text(&objects.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A line per Machine of the cluster: `fields`, a JSONPath template of one Machine.
pub(crate) fn machine_lines(m: &Management, cluster: &str, fields: &str) -> String {
    m.kubectl(&[
        "get",
        "machines",
        "-l",
        &format!("cluster.x-k8s.io/cluster-name={cluster}"),
        "-o",
        &format!("jsonpath={{range .items[*]}}{fields}{{\"\\n\"}}{{end}}"),
    ])
}

/// The cluster's Machines, by name, all Ready.
pub(crate) fn ready_machines(m: &Management, cluster: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = machine_lines(
            m,
            cluster,
            "{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}",
        );
        let rows: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect();
        if !rows.is_empty() && rows.iter().all(|(_, s)| s == "True") {
            let mut names: Vec<String> = rows.into_iter().map(|(n, _)| n).collect();
            names.sort();
            return names;
        }
        assert!(
            Instant::now() < deadline,
            "Machines of {cluster} not Ready:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Names of the objects of `kinds` that belong to `cluster` (by label or name).
pub(crate) fn objects_of(m: &Management, cluster: &str) -> String {
    let labelled = m.kubectl(&[
        "get",
        "clusters,machines,machinesets,machinedeployments,kubeadmcontrolplanes,kubeadmconfigs,inmemoryclusters,inmemorymachines,secrets",
        "-l",
        &format!("cluster.x-k8s.io/cluster-name={cluster}"),
        "-o",
        "name",
    ]);
    let named = m.kubectl(&["get", "clusters,secrets", "-o", "name"]);
    let named: Vec<&str> = named
        .lines()
        .filter(|l| l.ends_with(&format!("/{cluster}")) || l.contains(&format!("/{cluster}-")))
        .collect();
    format!("{labelled}{}", named.join("\n"))
}

fn paused(m: &Management, cluster: &str) -> String {
    m.kubectl(&["get", "cluster", cluster, "-o", "jsonpath={.spec.paused}"])
}

#[test]
fn clusters_move_between_embedded_management_clusters_and_through_a_directory() {
    let (source, target, third) = (Management::up(), Management::up(), Management::up());
    init(&source, "in-memory");
    init(&target, "in-memory");
    // The third lacks the in-memory provider at first.
    init(&third, "docker");
    source.apply_in_memory_cluster("sim", 1);
    source.apply_in_memory_cluster("other", 1);
    wait_available(&source, "sim");
    wait_available(&source, "other");
    let mut machines = ready_machines(&source, "sim");
    assert_eq!(machines.len(), 2, "{machines:?}");
    let to = |m: &Management| m.kubeconfig().display().to_string();

    // A target without a provider of the source: refused before anything is paused.
    let refused = with(&source, &["move", "--to-kubeconfig", &to(&third)]);
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains("provider infrastructure-in-memory not found in the target cluster"),
        "{said}"
    );
    assert_eq!(paused(&source, "sim"), "");
    assert_eq!(third.kubectl(&["get", "clusters", "-A", "-o", "name"]), "");

    // The same cluster as source and target is no move.
    let same = with(&source, &["move", "--to-kubeconfig", &to(&source)]);
    assert_eq!(same.status.code(), Some(1));
    assert!(
        text(&same.stderr).contains("the same cluster"),
        "{}",
        text(&same.stderr)
    );

    // A dry run says what would move and changes nothing.
    let dry = succeeds(
        &source,
        &[
            "move",
            "--to-kubeconfig",
            &to(&target),
            "--cluster",
            "sim",
            "--dry-run",
        ],
    );
    assert!(dry.contains("Cluster default/sim\n"), "{dry}");
    assert!(dry.contains("Staying in the source:"), "{dry}");
    assert!(!dry.contains("Cluster default/other\n"), "{dry}");
    assert_eq!(target.kubectl(&["get", "clusters", "-A", "-o", "name"]), "");
    assert_eq!(paused(&source, "sim"), "");

    // One of the two Clusters moves; it is Available in the target with the same Machines.
    // Its deletion protection moves with it: the source copy gives it up to be deleted.
    let protection = capictl::api::DELETION_PROTECTION_ANNOTATION;
    source.kubectl(&["annotate", "cluster", "sim", &format!("{protection}=true")]);
    let moved = succeeds(
        &source,
        &["move", "--to-kubeconfig", &to(&target), "--cluster", "sim"],
    );
    assert!(
        moved.contains("of 1 Cluster (default/sim) moved to"),
        "{moved}"
    );
    assert_eq!(objects_of(&source, "sim"), "");
    assert_eq!(paused(&source, "other"), "");
    wait_available(&target, "sim");
    assert_eq!(ready_machines(&target, "sim"), machines, "no rollout");
    assert_eq!(paused(&target, "sim"), "");
    assert_eq!(
        target.kubectl(&[
            "get",
            "cluster",
            "sim",
            "-o",
            &format!(
                "jsonpath={{.metadata.annotations.{}}}",
                protection.replace('.', "\\.")
            )
        ]),
        "true"
    );
    let managers = target.kubectl(&[
        "get",
        "cluster",
        "sim",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert!(!managers.contains("capictl-move"), "{managers}");
    // Its kubeconfig still reaches the workload cluster, now served by the target.
    let workload = target.dir.join("sim.kubeconfig");
    succeeds(
        &target,
        &[
            "get",
            "kubeconfig",
            "sim",
            "--write-to",
            workload.to_str().unwrap(),
        ],
    );
    let nodes = target.kubectl(&[
        "--kubeconfig",
        workload.to_str().unwrap(),
        "get",
        "nodes",
        "-o",
        "name",
    ]);
    assert_eq!(nodes.lines().count(), 2, "{nodes}");

    // Moved back to where it was, the cluster is reached afresh (its workload API server is a
    // new one, whose resource versions start again): a new Machine gets its Node, and a
    // removed Machine's Node goes.
    succeeds(
        &target,
        &["move", "--to-kubeconfig", &to(&source), "--cluster", "sim"],
    );
    wait_available(&source, "sim");
    assert_eq!(ready_machines(&source, "sim"), machines, "no rollout");
    let scale = |replicas: u32| {
        source.kubectl(&[
            "patch",
            "machinedeployment",
            "sim-md-0",
            "--type",
            "merge",
            "-p",
            &format!("{{\"spec\":{{\"replicas\":{replicas}}}}}"),
        ]);
    };
    let machine_count = |want: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = ready_machines(&source, "sim");
            if ready.len() == want {
                return ready;
            }
            assert!(Instant::now() < deadline, "{want} Machines: {ready:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    scale(2);
    let grown = machine_count(3);
    scale(1);
    machines = machine_count(2);
    assert!(machines.iter().all(|m| grown.contains(m)), "{machines:?}");
    let back = source.dir.join("sim.kubeconfig");
    succeeds(
        &source,
        &[
            "get",
            "kubeconfig",
            "sim",
            "--write-to",
            back.to_str().unwrap(),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let nodes = source.kubectl(&[
            "--kubeconfig",
            back.to_str().unwrap(),
            "get",
            "nodes",
            "-o",
            "name",
        ]);
        let mut names: Vec<&str> = nodes
            .lines()
            .map(|l| l.trim_start_matches("node/"))
            .collect();
        names.sort();
        let refs = source.kubectl(&[
            "get",
            "machines",
            "-l",
            "cluster.x-k8s.io/cluster-name=sim",
            "-o",
            "jsonpath={.items[*].status.nodeRef.name}",
        ]);
        let mut expected: Vec<&str> = refs.split_whitespace().collect();
        expected.sort();
        if names == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the workload cluster's Nodes {names:?}, its Machines' {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // A move that fails after deleting some source objects (this user may not delete
    // Machines) leaves a journal; running it again finishes it.
    let mover = kubeconfig_of(&source, "mover", &["movers"]);
    source.kubectl_in(&["apply", "-f", "-"], Some(MOVER_RBAC));
    let mover_flag = mover.display().to_string();
    let interrupted = capictl(&[
        "move",
        "--kubeconfig",
        &mover_flag,
        "--to-kubeconfig",
        &to(&target),
    ]);
    assert_eq!(
        interrupted.status.code(),
        Some(1),
        "{}",
        text(&interrupted.stderr)
    );
    let said = text(&interrupted.stderr);
    assert!(said.contains("run the same move again"), "{said}");
    assert_eq!(
        paused(&source, "other"),
        "true",
        "the source stays paused until the move is done"
    );
    let finished = succeeds(&source, &["move", "--to-kubeconfig", &to(&target)]);
    assert!(
        finished.contains("Finished the unfinished move"),
        "{finished}"
    );
    assert_eq!(objects_of(&source, "other"), "");
    assert_eq!(
        source.kubectl(&[
            "get",
            "configmaps",
            "capictl-move-journal",
            "--ignore-not-found",
            "-o",
            "name"
        ]),
        ""
    );
    wait_available(&target, "other");
    assert_eq!(paused(&target, "other"), "");
    // sim came along too, a second time: a move refuses while a Machine has no Node yet
    // (upstream's rule), so wait until its Machines are Ready there again.
    assert_eq!(ready_machines(&target, "sim"), machines, "no rollout");

    // Saved to a directory, the target keeps running; restored into a third management cluster
    // after the target is gone, the clusters come up there.
    let missing = with(&target, &["move", "--to-directory", "/nonexistent/backup"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr).contains("/nonexistent/backup"),
        "{}",
        text(&missing.stderr)
    );
    let backup = target.dir.join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    let saved = succeeds(
        &target,
        &["move", "--to-directory", backup.to_str().unwrap()],
    );
    assert!(saved.starts_with("Saved "), "{saved}");
    assert_eq!(paused(&target, "sim"), "");
    let cluster_file = backup.join("Cluster_default_sim.yaml");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&cluster_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert!(
        std::fs::read_to_string(&cluster_file)
            .unwrap()
            .contains("status:")
    );
    let not_yaml = third.dir.join("not-a-backup");
    std::fs::create_dir_all(&not_yaml).unwrap();
    std::fs::write(not_yaml.join("notes.txt"), "{ not: [yaml").unwrap();
    let bad = with(
        &third,
        &["move", "--from-directory", not_yaml.to_str().unwrap()],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("notes.txt"),
        "{}",
        text(&bad.stderr)
    );

    target.down();
    init(&third, "in-memory");
    // An object the target would refuse (a Secret over etcd's request limit) is found before
    // anything is restored: the dry run says so, and the real run restores nothing.
    let oversize = third.dir.join("oversize-backup");
    std::fs::create_dir_all(&oversize).unwrap();
    let mut padded = None;
    for entry in std::fs::read_dir(&backup).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if padded.is_none() && name.starts_with("Secret_") {
            let mut secret: serde_json::Value = capictl::yaml::from_str(&text).unwrap();
            use base64::Engine;
            secret["data"]["padding"] = base64::engine::general_purpose::STANDARD
                .encode(vec![b'x'; 2 << 20])
                .into();
            text = serde_json::to_string(&secret).unwrap();
            padded = Some(secret["metadata"]["name"].as_str().unwrap().to_string());
        }
        std::fs::write(oversize.join(&name), text).unwrap();
    }
    let padded = padded.expect("the backup holds a Secret");
    for dry in [true, false] {
        let mut args = vec!["move", "--from-directory", oversize.to_str().unwrap()];
        if dry {
            args.push("--dry-run");
        }
        let refused = with(&third, &args);
        let said = text(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "dry run {dry}: {said}");
        assert!(
            said.contains(&padded) && said.contains("too large"),
            "dry run {dry}: {said}"
        );
        assert_eq!(
            third.kubectl(&["get", "clusters", "-A", "-o", "name"]),
            "",
            "nothing was restored"
        );
    }
    succeeds(
        &third,
        &["move", "--from-directory", backup.to_str().unwrap()],
    );
    wait_available(&third, "sim");
    wait_available(&third, "other");
    assert_eq!(ready_machines(&third, "sim"), machines);
    assert_eq!(paused(&third, "sim"), "");
    assert_eq!(
        third.kubectl(&[
            "get",
            "machine",
            &machines[0],
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}"
        ]),
        if machines[0].contains("control-plane") {
            "KubeadmControlPlane"
        } else {
            "MachineSet"
        }
    );
    assert!(Path::new(&backup).exists());
}

/// Everything but deleting Machines, for the user who interrupts a move.
const MOVER_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: mover}
rules:
- apiGroups: ["", "apiextensions.k8s.io", "clusterctl.cluster.x-k8s.io", "addons.cluster.x-k8s.io", "runtime.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io"]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["*"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters", "machinesets", "machinedeployments", "machinehealthchecks", "clusterclasses"]
  verbs: ["delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: movers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mover}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: movers}
"#;

#[test]
fn upgrade_plan_and_apply_on_the_embedded_management_cluster() {
    let m = Management::up();
    let empty = succeeds(&m, &["upgrade", "plan"]);
    assert!(
        empty.starts_with("There are no providers in the cluster."),
        "{empty}"
    );
    init(&m, "in-memory");
    let ours = format!("v{}", env!("CARGO_PKG_VERSION"));
    let fresh = succeeds(&m, &["upgrade", "plan"]);
    assert!(
        fresh.contains("Latest release available for the v1beta2 Cluster API contract version:"),
        "{fresh}"
    );
    assert!(fresh.contains(&format!("cluster-api                capi-system                         CoreProvider             {ours}            Already up to date")), "{fresh}");
    assert!(
        fresh.ends_with("You are already up to date!\n\n"),
        "{fresh}"
    );

    // An older inventory entry gets an upgrade row and the command to apply it.
    m.kubectl(&[
        "-n",
        "capim-system",
        "patch",
        "provider",
        "infrastructure-in-memory",
        "--type",
        "merge",
        "-p",
        r#"{"version":"v0.0.3"}"#,
    ]);
    m.apply_in_memory_cluster("sim", 1);
    let older = succeeds(&m, &["upgrade", "plan"]);
    assert!(
        older.contains(&format!(
            "InfrastructureProvider   v0.0.3            {ours}"
        )),
        "{older}"
    );
    assert!(
        older.contains("capictl upgrade apply --contract v1beta2\n"),
        "{older}"
    );
    // Beyond clusterctl: where each workload cluster's Kubernetes version can go next.
    assert!(
        older.contains("sim       default     v1.30.4   v1.31          not needed"),
        "{older}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&succeeds(&m, &["upgrade", "plan", "-o", "json"])).unwrap();
    assert_eq!(json["contract"], "v1beta2");
    assert_eq!(json["clusters"][0]["nextVersion"], "v1.31");

    let wrong = with(&m, &["upgrade", "apply", "--contract", "v1beta1"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong.stderr).contains("could only upgrade to v1beta2 contract, requested v1beta1")
    );
    let applied = with(&m, &["upgrade", "apply", "--contract", "v1beta2"]);
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(text(&applied.stderr).contains(&format!("Installing provider=\"infrastructure-in-memory\" version=\"{ours}\" targetNamespace=\"capim-system\"")));
    assert_eq!(
        m.kubectl(&[
            "-n",
            "capim-system",
            "get",
            "provider",
            "infrastructure-in-memory",
            "-o",
            "jsonpath={.version}"
        ]),
        ours
    );
    assert!(succeeds(&m, &["upgrade", "plan"]).contains("You are already up to date!"));
}

/// The control-plane Machines of `cluster` and their `status.certificatesExpiryDate`.
fn control_plane_expiries(m: &Management, cluster: &str) -> Vec<(String, String)> {
    m.kubectl(&[
        "get",
        "machines",
        "-l",
        &format!("cluster.x-k8s.io/cluster-name={cluster},cluster.x-k8s.io/control-plane"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.certificatesExpiryDate}{\"\\n\"}{end}",
    ])
    .lines()
    .map(|l| {
        let (name, expiry) = l.split_once(' ').unwrap_or((l, ""));
        (name.to_string(), expiry.trim().to_string())
    })
    .collect()
}

#[test]
fn a_control_plane_whose_certificates_expire_within_the_configured_days_is_rolled() {
    let m = Management::up();
    init(&m, "in-memory");
    m.apply_in_memory_cluster("certs", 0);
    wait_available(&m, "certs");

    // The control plane's certificate expiry is read from its API server and recorded.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (first, expiry) = loop {
        let machines = control_plane_expiries(&m, "certs");
        if let [(name, expiry)] = machines.as_slice()
            && !expiry.is_empty()
        {
            break (name.clone(), expiry.clone());
        }
        assert!(
            Instant::now() < deadline,
            "no expiry recorded: {machines:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let expiry: k8s_openapi::jiff::Timestamp = expiry.parse().unwrap();
    let days_left = expiry
        .duration_since(k8s_openapi::jiff::Timestamp::now())
        .as_secs()
        / 86_400;
    assert!((300..=366).contains(&days_left), "{days_left} days left");
    let described = succeeds(&m, &["describe", "cluster", "certs"]);
    assert!(described.contains("certificates expire"), "{described}");

    // Asked to roll Machines whose certificates expire within 400 days, the control plane
    // replaces its Machine, saying why; back at 30 days, it stops.
    let roll_before = |days: u32| {
        let patch =
            format!(r#"{{"spec":{{"rollout":{{"before":{{"certificatesExpiryDays":{days}}}}}}}}}"#);
        m.kubectl(&[
            "patch",
            "kubeadmcontrolplane",
            "certs-control-plane",
            "--type=merge",
            "-p",
            &patch,
        ])
    };
    roll_before(400);
    let deadline = Instant::now() + Duration::from_secs(120);
    while control_plane_expiries(&m, "certs")
        .iter()
        .any(|(name, _)| *name == first)
    {
        assert!(
            Instant::now() < deadline,
            "{first} was not rolled out: {:?}",
            control_plane_expiries(&m, "certs")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    roll_before(30);
    let events = m.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=certs-control-plane,reason=SuccessfulScaleDown",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(events.contains(&first), "{events}");
    assert!(
        events.contains("spec.rollout.before.certificatesExpiryDays (400 days)"),
        "{events}"
    );
    wait_available(&m, "certs");
}
