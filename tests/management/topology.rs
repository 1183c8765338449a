//! Managed topologies on the embedded management cluster, as a user drives them with capictl
//! and kubectl: upstream's own ClusterClass templates applied unchanged, upgrades orchestrated
//! control plane first, MachineDeployments added and removed through the topology, version
//! changes upstream refuses, and template rotation when a patched variable changes.

use crate::common::management::*;

use serde_json::Value;
use std::time::{Duration, Instant};

fn json(m: &Management, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&m.kubectl(&all)).unwrap()
}

fn items(m: &Management, resource: &str) -> Vec<Value> {
    json(m, &["get", resource])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn wait_until<T>(what: &str, seconds: u64, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        match check() {
            Ok(v) => return v,
            Err(why) if Instant::now() > deadline => {
                panic!("{what} did not happen in {seconds}s: {why}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// `kubectl patch cluster NAME --type TYPE -p PATCH`, its output whatever happened.
fn patch_cluster(m: &Management, cluster: &str, type_: &str, patch: &str) -> std::process::Output {
    m.kubectl_output(
        &["patch", "cluster", cluster, "--type", type_, "-p", patch],
        None,
    )
}

/// A merge patch of the Cluster that must succeed.
fn merge_cluster(m: &Management, cluster: &str, patch: &str) {
    let out = patch_cluster(m, cluster, "merge", patch);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn available(m: &Management, cluster: &str) -> Result<(), String> {
    let c = json(m, &["get", "cluster", cluster]);
    match condition(&c, "Available") {
        Some(a) if a["status"] == "True" => Ok(()),
        other => Err(format!(
            "Available: {other:?}; TopologyReconciled: {:?}",
            condition(&c, "TopologyReconciled")
        )),
    }
}

fn init(m: &Management, infrastructure: &str) {
    let kubeconfig = m.kubeconfig().display().to_string();
    let out = capictl(&[
        "init",
        "--infrastructure",
        infrastructure,
        "--wait-providers",
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `capictl generate cluster NAME` from `source` (`["--from", FILE]` or a flavor's flags) with
/// one control plane Machine and `workers` workers in namespace default.
fn generate(source: &[&str], name: &str, version: &str, workers: u32) -> String {
    let workers = workers.to_string();
    let mut args = vec!["generate", "cluster", name];
    args.extend(source);
    args.extend([
        "--kubernetes-version",
        version,
        "--control-plane-machine-count",
        "1",
        "--worker-machine-count",
        &workers,
        "--target-namespace",
        "default",
    ]);
    let out = capictl(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// capictl's in-memory topology flavor (its ClusterClass first), for a cluster of one control
/// plane Machine and one worker.
fn in_memory_topology(name: &str) -> String {
    generate(
        &["--infrastructure", "in-memory", "--flavor", "topology"],
        name,
        "v1.30.4",
        1,
    )
}

/// Machines by role: (control plane versions, worker versions by MachineDeployment name label).
fn machine_versions(m: &Management) -> (Vec<String>, Vec<(String, String)>) {
    let mut cp = Vec::new();
    let mut workers = Vec::new();
    for machine in items(m, "machines") {
        let version = machine["spec"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let labels = &machine["metadata"]["labels"];
        if labels.get("cluster.x-k8s.io/control-plane").is_some() {
            cp.push(version);
        } else {
            let md = labels["topology.cluster.x-k8s.io/deployment-name"]
                .as_str()
                .unwrap_or_default();
            workers.push((md.to_string(), version));
        }
    }
    (cp, workers)
}

#[test]
fn upstreams_in_memory_cluster_class_comes_up_upgrades_in_order_and_follows_the_topology() {
    let m = Management::up();
    // Upstream's Dev kinds come with the Docker provider, whose controllers also simulate their
    // in-memory back end.
    init(&m, "docker");
    let class = crate::common::upstream("templates/clusterclass-in-memory.yaml");
    m.kubectl(&["apply", "-n", "default", "-f", class.to_str().unwrap()]);
    let template = crate::common::upstream("templates/cluster-template-in-memory.yaml");
    let cluster = generate(
        &["--from", template.to_str().unwrap()],
        "topo",
        "v1.30.4",
        1,
    );
    m.kubectl_in(&["apply", "-f", "-"], Some(&cluster));
    wait_until("the Cluster Available", 240, || available(&m, "topo"));

    // The objects, names and labels upstream's topology controller makes.
    let c = json(&m, &["get", "cluster", "topo"]);
    assert_eq!(
        c["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"],
        ""
    );
    let infra = &c["spec"]["infrastructureRef"];
    assert_eq!(infra["kind"], "DevCluster");
    assert!(
        infra["name"].as_str().unwrap().starts_with("topo-"),
        "{infra}"
    );
    let cp_name = c["spec"]["controlPlaneRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        cp_name.starts_with("topo-") && cp_name.len() == "topo-".len() + 5,
        "{cp_name}"
    );
    let kcp = json(&m, &["get", "kubeadmcontrolplane", &cp_name]);
    assert_eq!(kcp["spec"]["version"], "v1.30.4");
    assert_eq!(
        kcp["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"],
        "in-memory-control-plane"
    );
    let cp_machines = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let template = json(&m, &["get", "devmachinetemplate", &cp_machines]);
    assert_eq!(
        template["metadata"]["ownerReferences"][0]["kind"],
        "Cluster"
    );
    let mds = items(&m, "machinedeployments");
    assert_eq!(mds.len(), 1);
    let md = &mds[0];
    assert!(
        md["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("topo-md-0-"),
        "{}",
        md["metadata"]["name"]
    );
    assert_eq!(
        md["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"],
        "md-0"
    );
    let checks: Vec<String> = items(&m, "machinehealthchecks")
        .iter()
        .map(|h| h["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert!(checks.contains(&cp_name));
    let kcp = json(
        &m,
        &[
            "get",
            "kubeadmcontrolplane",
            &cp_name,
            "--show-managed-fields",
        ],
    );
    let managers: Vec<String> = kcp["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["manager"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        managers.contains(&"capi-topology".to_string()),
        "{managers:?}"
    );
    let reconciled = condition(&c, "TopologyReconciled").unwrap();
    assert_eq!(reconciled["reason"], "ReconcileSucceeded", "{reconciled}");

    // A second MachineDeployment through the topology.
    m.kubectl(&[
        "patch", "cluster", "topo", "--type", "json", "-p",
        r#"[{"op": "add", "path": "/spec/topology/workers/machineDeployments/-", "value": {"class": "default-worker", "name": "md-1", "replicas": 1}}]"#,
    ]);
    wait_until("md-1 with its Machine", 120, || {
        let (_, workers) = machine_versions(&m);
        if workers.iter().filter(|(md, _)| md == "md-1").count() == 1 {
            Ok(())
        } else {
            Err(format!("{workers:?}"))
        }
    });
    wait_until("the Cluster Available again", 120, || available(&m, "topo"));

    // Two minors at once, and down, are refused with upstream's messages.
    let refused = |version: &str, message: &str| {
        let patch = format!(r#"{{"spec":{{"topology":{{"version":"{version}"}}}}}}"#);
        let out = patch_cluster(&m, "topo", "merge", &patch);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(message), "{}", text(&out.stderr));
    };
    refused(
        "v1.32.0",
        r#"version cannot be increased from "v1.30.4" to "v1.32.0""#,
    );
    refused(
        "v1.29.0",
        r#"version cannot be decreased from "v1.30.4" to "v1.29.0""#,
    );

    // One minor up: the control plane first, then one MachineDeployment at a time.
    merge_cluster(&m, "topo", r#"{"spec":{"topology":{"version":"v1.31.0"}}}"#);
    // Not again while the parts are still moving.
    refused(
        "v1.32.0",
        "version cannot be changed: KubeadmControlPlane default/",
    );
    let mut seen = Vec::new();
    wait_until("every Machine at v1.31.0", 300, || {
        // The MachineDeployments first, then the Machines: a MachineDeployment seen at the new
        // version must find the control plane there afterwards. Read the other way round, the
        // last old control plane Machine could go and the MachineDeployments move in between.
        let md_versions: Vec<(String, String)> = items(&m, "machinedeployments")
            .iter()
            .map(|d| {
                (
                    d["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    d["spec"]["template"]["spec"]["version"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        let (cp, workers) = machine_versions(&m);
        let kcp_version = json(&m, &["get", "kubeadmcontrolplane", &cp_name])["spec"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // A MachineDeployment moves only once every control plane Machine is at the new version.
        for (md, v) in &md_versions {
            if v == "v1.31.0" {
                assert!(
                    cp.iter().all(|c| c == "v1.31.0"),
                    "{md} moved before the control plane: {cp:?}"
                );
                assert_eq!(kcp_version, "v1.31.0");
            }
        }
        // And not while the other one still rolls.
        let upgraded: Vec<&String> = md_versions
            .iter()
            .filter(|(_, v)| v == "v1.31.0")
            .map(|(n, _)| n)
            .collect();
        if upgraded.len() == 2 && !seen.contains(&"both".to_string()) {
            seen.push("both".to_string());
        }
        for (md, _) in md_versions.iter().filter(|(_, v)| v == "v1.31.0") {
            let others_rolling = workers
                .iter()
                .any(|(w, v)| w != md && v != "v1.30.4" && v != "v1.31.0");
            assert!(!others_rolling);
        }
        if upgraded.len() == 1 {
            let first = upgraded[0].clone();
            // The other's Machines still run the old version while this one's roll.
            if workers.iter().any(|(w, v)| *w == first && v != "v1.31.0") {
                assert!(
                    workers
                        .iter()
                        .filter(|(w, _)| *w != first)
                        .all(|(_, v)| v == "v1.30.4"),
                    "two MachineDeployments rolled at once: {workers:?}"
                );
            }
            if !seen.contains(&first) {
                seen.push(first);
            }
        }
        if cp.iter().all(|v| v == "v1.31.0")
            && workers.len() == 2
            && workers.iter().all(|(_, v)| v == "v1.31.0")
        {
            Ok(())
        } else {
            Err(format!("control plane {cp:?}, workers {workers:?}"))
        }
    });
    assert_eq!(
        seen.first().map(String::as_str),
        Some("md-0"),
        "the first in the list goes first: {seen:?}"
    );
    wait_until("the Cluster Available after the upgrade", 120, || {
        available(&m, "topo")
    });

    // md-1 leaves the topology: its MachineDeployment, templates and health check go.
    m.kubectl(&[
        "patch",
        "cluster",
        "topo",
        "--type",
        "json",
        "-p",
        r#"[{"op": "remove", "path": "/spec/topology/workers/machineDeployments/1"}]"#,
    ]);
    wait_until("md-1 deleted", 120, || {
        let names: Vec<String> = items(&m, "machinedeployments")
            .iter()
            .map(|d| {
                d["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let (_, workers) = machine_versions(&m);
        if names == ["md-0"] && workers.iter().all(|(w, _)| w == "md-0") {
            Ok(())
        } else {
            Err(format!("{names:?} {workers:?}"))
        }
    });
    assert_eq!(items(&m, "machinehealthchecks").len(), 2);

    // An upgrade asked for and not started yet (the Cluster is paused) can be taken back:
    // going back to the version every part still runs cancels it.
    merge_cluster(&m, "topo", r#"{"spec":{"paused":true}}"#);
    merge_cluster(&m, "topo", r#"{"spec":{"topology":{"version":"v1.32.0"}}}"#);
    let back = patch_cluster(
        &m,
        "topo",
        "merge",
        r#"{"spec":{"topology":{"version":"v1.31.0"}}}"#,
    );
    assert!(back.status.success(), "{}", text(&back.stderr));
    assert!(
        text(&back.stderr).contains("the upgrade to v1.32.0 had not started: it is cancelled"),
        "{}",
        text(&back.stderr)
    );
    merge_cluster(&m, "topo", r#"{"spec":{"paused":false}}"#);
    wait_until("the Cluster Available, still at v1.31.0", 60, || {
        available(&m, "topo")
    });
    assert_eq!(
        json(&m, &["get", "kubeadmcontrolplane", &cp_name])["spec"]["version"],
        "v1.31.0"
    );

    m.kubectl(&["delete", "cluster", "topo", "--timeout=120s"]);
    assert_eq!(
        m.kubectl(&[
            "get",
            "machines,devmachines,devclusters,kubeadmcontrolplanes,machinedeployments",
            "-o",
            "name"
        ]),
        ""
    );
}

#[test]
fn a_variable_a_patch_uses_rotates_the_template_as_the_plan_says_beforehand() {
    let m = Management::up();
    init(&m, "in-memory");
    let generated = in_memory_topology("rot");
    let kubeconfig = m.kubeconfig().display().to_string();
    // Planned before the class is applied: one error naming what to apply first, not a
    // warning per object that it "differs".
    let whole = m.dir.join("whole.yaml");
    std::fs::write(&whole, &generated).unwrap();
    let plan_whole = || {
        capictl(&[
            "topology",
            "plan",
            "-f",
            whole.to_str().unwrap(),
            "--kubeconfig",
            &kubeconfig,
        ])
    };
    let early = plan_whole();
    let said = text(&early.stderr);
    assert!(!early.status.success(), "{said}");
    assert!(!said.contains("differs"), "{said}");
    assert!(
        said.contains("ClusterClass default/")
            && said.contains(
                "in the files but not in the management cluster: apply them first, then plan"
            ),
        "{said}"
    );
    m.kubectl_in(&["apply", "-f", "-"], Some(&generated));
    wait_until("the Cluster Available", 180, || available(&m, "rot"));

    // Variables the class does not define, or of the wrong type, are refused at once.
    for (variables, field) in [
        (
            r#"[{"name": "nope", "value": 1}]"#,
            "spec.topology.variables[nope]",
        ),
        (
            r#"[{"name": "kubeletEvictionHard", "value": 5}]"#,
            "spec.topology.variables[kubeletEvictionHard].value",
        ),
    ] {
        let patch = format!(
            r#"[{{"op": "add", "path": "/spec/topology/variables", "value": {variables}}}]"#
        );
        let out = patch_cluster(&m, "rot", "json", &patch);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(field), "{}", text(&out.stderr));
    }

    // Nothing to do once it is up.
    let cluster_file = m.dir.join("rot.yaml");
    let mut cluster: Value = capictl::yaml::from_multiple::<Value>(&generated)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "Cluster")
        .unwrap();
    std::fs::write(&cluster_file, serde_json::to_string(&cluster).unwrap()).unwrap();
    let plan = |m: &Management| {
        let out = capictl(&[
            "topology",
            "plan",
            "-f",
            cluster_file.to_str().unwrap(),
            "--kubeconfig",
            &kubeconfig,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let _ = m;
        text(&out.stdout)
    };
    assert_eq!(plan(&m), "No changes for Cluster \"default/rot\".\n");
    // The whole generated file too: its ClusterClass and templates are the stored ones.
    let out = plan_whole();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "No changes for Cluster \"default/rot\".\n"
    );
    assert_eq!(
        text(&out.stderr),
        "",
        "the stored class and templates are the file's"
    );

    // The variable the worker's bootstrap patch uses changes: the plan says a new bootstrap
    // template is made and the MachineDeployment pointed at it.
    let md = &items(&m, "machinedeployments")[0];
    let old_template = md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let old_workers: Vec<String> = items(&m, "machines")
        .iter()
        .filter(|w| {
            w["metadata"]["labels"]
                .get("cluster.x-k8s.io/control-plane")
                .is_none()
        })
        .map(|w| w["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(old_workers.len(), 1);
    cluster["spec"]["topology"]["variables"] =
        serde_json::json!([{"name": "kubeletEvictionHard", "value": "memory.available<5%"}]);
    std::fs::write(&cluster_file, serde_json::to_string(&cluster).unwrap()).unwrap();
    let planned = plan(&m);
    assert!(
        planned.starts_with("Changes for Cluster \"default/rot\":"),
        "{planned}"
    );
    let created: Vec<&str> = planned
        .lines()
        .filter(|l| l.contains("KubeadmConfigTemplate") && l.trim_end().ends_with("created"))
        .collect();
    assert_eq!(created.len(), 1, "{planned}");
    let new_template = created[0].split_whitespace().nth(2).unwrap().to_string();
    assert_ne!(new_template, old_template);
    for row in ["MachineDeployment", "KubeadmControlPlane"] {
        assert!(
            planned
                .lines()
                .any(|l| l.contains(row) && l.trim_end().ends_with("modified")),
            "{row} not modified in:\n{planned}"
        );
    }
    assert!(
        planned.contains(&format!("+          name: {new_template}")),
        "{planned}"
    );
    assert!(planned.contains("memory.available<5%"), "{planned}");
    // The plan wrote nothing.
    assert_eq!(
        items(&m, "kubeadmconfigtemplates").len(),
        2,
        "the class's and the cluster's copy"
    );

    // Applied, the reconcile does what the plan said, and the workers roll.
    m.kubectl(&["apply", "-f", cluster_file.to_str().unwrap()]);
    wait_until("the MachineDeployment on the new template", 60, || {
        let md = &items(&m, "machinedeployments")[0];
        let name = md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name == new_template {
            Ok(())
        } else {
            Err(name)
        }
    });
    wait_until(
        "the worker replaced and the old template collected",
        180,
        || {
            let workers: Vec<Value> = items(&m, "machines")
                .into_iter()
                .filter(|w| {
                    w["metadata"]["labels"]
                        .get("cluster.x-k8s.io/control-plane")
                        .is_none()
                })
                .collect();
            let names: Vec<&str> = workers
                .iter()
                .map(|w| w["metadata"]["name"].as_str().unwrap())
                .collect();
            let templates: Vec<String> = items(&m, "kubeadmconfigtemplates")
                .iter()
                .map(|t| t["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            if names.len() == 1
                && !old_workers.contains(&names[0].to_string())
                && !templates.contains(&old_template)
            {
                Ok(workers[0]["spec"]["bootstrap"]["configRef"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string())
            } else {
                Err(format!("workers {names:?}, templates {templates:?}"))
            }
        },
    );
    let configs = items(&m, "kubeadmconfigs");
    assert!(
        configs.iter().any(|c| {
            c["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
                .to_string()
                .contains("memory.available<5%")
        }),
        "no bootstrap config with the new eviction threshold"
    );
    wait_until("the Cluster Available after the roll", 120, || {
        available(&m, "rot")
    });
    assert_eq!(plan(&m), "No changes for Cluster \"default/rot\".\n");

    // describe shows the class and how the topology stands.
    let described = capictl(&["describe", "cluster", "rot", "--kubeconfig", &kubeconfig]);
    let tree = text(&described.stdout);
    let class_row = tree
        .lines()
        .find(|l| l.contains("ClusterClass default/in-memory"))
        .unwrap_or_else(|| panic!("{tree}"));
    assert!(
        class_row.contains("True") && class_row.contains("ReconcileSucceeded"),
        "{tree}"
    );
}

#[test]
fn a_topology_cluster_moves_with_its_class_and_the_target_makes_nothing_new() {
    let (source, target) = (Management::up(), Management::up());
    init(&source, "in-memory");
    init(&target, "in-memory");
    source.kubectl_in(&["apply", "-f", "-"], Some(&in_memory_topology("mv")));
    wait_until("the Cluster Available", 180, || available(&source, "mv"));
    let names = |m: &Management| -> Vec<String> {
        let mut all: Vec<String> = m
            .kubectl(&[
                "get",
                "clusterclasses,machines,machinedeployments,kubeadmcontrolplanes,kubeadmconfigtemplates,inmemorymachinetemplates,inmemoryclustertemplates,machinehealthchecks",
                "-o",
                "name",
            ])
            .lines()
            .map(String::from)
            .collect();
        all.sort();
        all
    };
    let before = names(&source);
    let kubeconfig = source.kubeconfig().display().to_string();
    let to = target.kubeconfig().display().to_string();
    let moved = capictl(&["move", "--to-kubeconfig", &to, "--kubeconfig", &kubeconfig]);
    assert!(moved.status.success(), "{}", text(&moved.stderr));
    wait_until("the Cluster Available in the target", 120, || {
        available(&target, "mv")
    });
    assert_eq!(
        names(&target),
        before,
        "the class, its templates and the Cluster's objects moved; nothing new was made"
    );
    assert_eq!(
        source.kubectl(&["get", "clusters,clusterclasses,machines", "-o", "name"]),
        ""
    );
    let c = json(&target, &["get", "cluster", "mv"]);
    assert_eq!(
        condition(&c, "TopologyReconciled").unwrap()["status"],
        "True",
        "{c}"
    );
}

/// A ClusterClass written for Cluster API v1.10 (v1beta1) and seed 003's v1beta1 Cluster.
fn v1beta1_class_and_cluster() -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/testdata/v1beta1-standard-ha.yaml"),
    )
    .unwrap()
}

#[test]
fn v1beta1_yaml_comes_up_reads_in_both_versions_and_restores_from_a_v1beta1_directory() {
    let (source, target) = (Management::up(), Management::up());
    // The Dev kinds come with the Docker provider.
    init(&source, "docker");
    init(&target, "docker");
    let yaml = v1beta1_class_and_cluster();
    source.kubectl_in(&["apply", "-n", "default", "-f", "-"], Some(&yaml));
    wait_until("the v1beta1 Cluster Available", 240, || {
        available(&source, "prod-a")
    });

    // Read in v1beta1: upstream's v1beta1 fields, the v1beta2 conditions under status.v1beta2.
    let old = json(
        &source,
        &["get", "clusters.v1beta1.cluster.x-k8s.io", "prod-a"],
    );
    assert_eq!(old["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(old["spec"]["topology"]["class"], "standard-ha");
    assert_eq!(
        old["status"]["controlPlaneReady"], true,
        "{}",
        old["status"]
    );
    let available_v1beta2 = old["status"]["v1beta2"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(available_v1beta2["status"], "True");
    let table = source.kubectl(&["get", "clusters.v1beta1.cluster.x-k8s.io", "prod-a"]);
    assert!(
        table.lines().nth(1).unwrap().contains("standard-ha"),
        "{table}"
    );

    // Stored in v1beta2, as upstream's conversion places each field.
    let class = json(&source, &["get", "clusterclass", "standard-ha"]);
    let workers = &class["spec"]["workers"]["machineDeployments"][0];
    assert_eq!(workers["deletion"]["order"], "Oldest");
    assert_eq!(
        workers["rollout"]["strategy"]["rollingUpdate"]["maxSurge"],
        1
    );
    assert_eq!(
        workers["healthCheck"]["checks"]["unhealthyNodeConditions"][0]["timeoutSeconds"],
        300
    );
    assert_eq!(
        workers["healthCheck"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"],
        "40%"
    );
    let c = json(&source, &["get", "cluster", "prod-a"]);
    let kcp_name = c["spec"]["controlPlaneRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let kcp = json(&source, &["get", "kubeadmcontrolplane", &kcp_name]);
    let spec = &kcp["spec"]["kubeadmConfigSpec"];
    assert_eq!(
        spec["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        serde_json::json!([{"name": "eviction-hard", "value": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"}])
    );
    assert_eq!(
        spec["initConfiguration"]["timeouts"]["controlPlaneComponentHealthCheckSeconds"],
        1200
    );
    assert_eq!(
        kcp["spec"]["machineTemplate"]["spec"]["deletion"]["nodeDrainTimeoutSeconds"],
        90
    );
    assert_eq!(kcp["spec"]["replicas"], 3);

    // Applied again, nothing changes: the round trip through v1beta2 loses nothing.
    let again = source.kubectl_in(&["apply", "-n", "default", "-f", "-"], Some(&yaml));
    assert!(again.lines().all(|l| l.ends_with(" unchanged")), "{again}");

    // Field ownership across versions: the topology controller applies the control plane in
    // v1beta2, and a v1beta1 server-side apply of the same field under its v1beta1 name
    // conflicts with it, named as its owner wrote it.
    let drain = format!(
        "apiVersion: controlplane.cluster.x-k8s.io/v1beta1\nkind: KubeadmControlPlane\nmetadata:\n  name: {kcp_name}\n  namespace: default\nspec:\n  machineTemplate:\n    nodeDrainTimeout: 2m0s\n"
    );
    let refused = source.kubectl_output(&["apply", "--server-side", "-f", "-"], Some(&drain));
    let said = text(&refused.stderr);
    assert!(!refused.status.success(), "{}", text(&refused.stdout));
    assert!(
        said.contains("conflict with \"capi-topology\"")
            && said.contains(".spec.machineTemplate.spec.deletion.nodeDrainTimeoutSeconds"),
        "{said}"
    );

    // A watch in v1beta1 sees a change written in v1beta2.
    let mut watch = source
        .kubectl_command(&[
            "get",
            "clusters.v1beta1.cluster.x-k8s.io",
            "prod-a",
            "--watch-only",
            "-o",
            "jsonpath={.apiVersion} {.metadata.labels.team}{\"\\n\"}",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // Labelled until the watch (which may not be open yet) shows a label it was given.
    let mut seen = None;
    for i in 0..60 {
        let label = format!("team=t{i}");
        source.kubectl(&[
            "label",
            "clusters.v1beta2.cluster.x-k8s.io",
            "prod-a",
            &label,
            "--overwrite",
        ]);
        let deadline = Instant::now() + Duration::from_secs(1);
        while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            if line.contains(" t") {
                seen = Some(line);
                break;
            }
        }
        if seen.is_some() {
            break;
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let seen = seen.expect("the v1beta1 watch saw the label written in v1beta2");
    assert!(seen.starts_with("cluster.x-k8s.io/v1beta1 t"), "{seen}");

    // Saved, written back as v1beta1 (as a management cluster that stored v1beta1 would have
    // saved it), and restored into another management cluster: it comes up there.
    // A move waits for no Machine, as upstream's: every one of the 3 + 5 has its Node first.
    wait_until("every Machine with a Node", 240, || {
        let nodes = source.kubectl(&[
            "get",
            "machines",
            "-o",
            "jsonpath={.items[*].status.nodeRef.name}",
        ]);
        match nodes.split_whitespace().count() {
            8 => Ok(()),
            n => Err(format!("{n} of 8")),
        }
    });
    // The versions the machines run (upstream v1.12's status), read in v1beta1.
    wait_until("the workers' versions on the Cluster", 60, || {
        let c = json(
            &source,
            &["get", "clusters.v1beta1.cluster.x-k8s.io", "prod-a"],
        );
        let want = serde_json::json!([{"version": "v1.34.0", "replicas": 5}]);
        match &c["status"]["v1beta2"]["workers"]["versions"] {
            v if *v == want => Ok(()),
            other => Err(other.to_string()),
        }
    });
    let backup = source.dir.join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    let kubeconfig = source.kubeconfig().display().to_string();
    let saved = capictl(&[
        "move",
        "--to-directory",
        backup.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(saved.status.success(), "{}", text(&saved.stderr));
    source.down();
    let mut spoke_files = 0;
    for entry in std::fs::read_dir(&backup).unwrap() {
        let path = entry.unwrap().path();
        let out = capictl(&["convert", "-f", path.to_str().unwrap(), "--to", "v1beta1"]);
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        let converted = text(&out.stdout);
        spoke_files += usize::from(converted.contains("/v1beta1\n"));
        std::fs::write(&path, converted).unwrap();
    }
    assert!(spoke_files > 10, "{spoke_files} files in v1beta1");
    let to = target.kubeconfig().display().to_string();
    let restored = capictl(&[
        "move",
        "--from-directory",
        backup.to_str().unwrap(),
        "--kubeconfig",
        &to,
    ]);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    wait_until("the restored Cluster Available", 240, || {
        available(&target, "prod-a")
    });
    let class = json(&target, &["get", "clusterclass", "standard-ha"]);
    assert_eq!(
        class["spec"]["workers"]["machineDeployments"][0]["deletion"]["order"],
        "Oldest"
    );
}
