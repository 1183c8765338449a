//! Upstream's "self-hosted" flow on capictl's Docker nodes, as `capictl quickstart
//! --self-hosted` runs it: `init` against the new cluster installs Deployments that run the
//! controller image `capictl images build` made offline, their admission webhooks answer
//! through their Services, the Docker provider's Pod drives the host's Engine through the
//! socket its Deployment mounts, and the cluster is moved into itself. It then scales,
//! remediates a worker and upgrades itself under its own controllers, and moves back out.

use std::process::Command;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::common::quickstart::{
    Session, Workload, all_nodes_ready, condition, kubectl_binary, rolled_out_of, text, wait,
};

/// The providers `init` installs, by namespace and Deployment.
const DEPLOYMENTS: [(&str, &str); 4] = [
    ("capi-system", "capi-controller-manager"),
    (
        "capi-kubeadm-bootstrap-system",
        "capi-kubeadm-bootstrap-controller-manager",
    ),
    (
        "capi-kubeadm-control-plane-system",
        "capi-kubeadm-control-plane-controller-manager",
    ),
    ("capd-system", "capd-controller-manager"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_runs_its_own_providers_as_pods_and_manages_itself() {
    let s = Session::start("self", "v1.28.13,v1.29.10").await;
    let kubeconfig = s.dir.join("self.conf").display().to_string();
    let host = Workload {
        session: &s,
        kubeconfig: kubeconfig.clone(),
    };

    // One command: the cluster, the providers installed into it as Deployments of the
    // controller image, and the cluster moved into itself.
    let started = std::time::Instant::now();
    s.capictl(&[
        "quickstart",
        &s.cluster,
        "--self-hosted",
        "--control-plane-machine-count",
        "1",
        "--worker-machine-count",
        "1",
        "--write-kubeconfig",
        &kubeconfig,
    ]);
    eprintln!("quickstart --self-hosted: {:.1?}", started.elapsed());
    assert_eq!(
        s.kubectl(&["get", "clusters,machines", "-A", "-o", "name"]),
        "",
        "the cluster left the embedded management cluster"
    );
    // The move replaced no Machine: they are still the node containers.
    let nodes: Vec<String> = s
        .node_containers()
        .into_iter()
        .filter(|c| !c.ends_with("-lb"))
        .collect();
    assert_eq!(machine_names(&host.json(&["get", "machines"])), nodes);
    all_nodes_ready(&s, &kubeconfig, 2).await;
    for (namespace, deployment) in DEPLOYMENTS {
        let d = host.json(&["get", "deployment", "-n", namespace, deployment]);
        assert_eq!(
            d["status"]["availableReplicas"], 1,
            "{namespace}/{deployment}: {d}"
        );
        let pod = &host.json(&["get", "pods", "-n", namespace])["items"][0];
        assert_eq!(pod["status"]["phase"], "Running", "{pod}");
        assert_eq!(
            pod["spec"]["containers"][0]["image"],
            capictl::build_info::controller_image(),
        );
    }

    // The webhooks answer through their Services: the cluster's API server (capictl's) sends
    // the write to the core provider's Pod, whose verdict comes back in its words.
    let client = client_of(&kubeconfig).await;
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "cluster.x-k8s.io",
            "v1beta2",
            "Cluster",
        )),
    );
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"topology": {"classRef": {"name": "nothing"}, "version": "not-a-version"}}
    }))
    .unwrap();
    let refused = clusters
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &bad,
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert!(
        status.message.starts_with(
            "admission webhook \"default.cluster.cluster.x-k8s.io\" denied the request"
        ) && status.message.contains("spec.topology.version"),
        "{status:?}"
    );

    wait(
        &s,
        "the cluster Available under its own providers",
        300,
        || {
            available(&host.json(&["get", "cluster", &s.cluster])).map_err(|cluster| {
                // What the control plane and its Machines say, for a run where it is not.
                let kcp = &host.json(&["get", "kcp"])["items"][0]["status"];
                let machines: Vec<Value> = host.json(&["get", "machines"])["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| {
                        serde_json::json!({"name": m["metadata"]["name"], "annotations": m["metadata"]["annotations"], "conditions": m["status"]["conditions"]})
                    })
                    .collect();
                format!("{cluster}\nKubeadmControlPlane status: {kcp}\nMachines: {machines:?}")
            })
        },
    )
    .await;

    // The core provider runs two replicas, one leading. Its leader's container is killed
    // while a scale-up is in flight: the other replica takes the Lease over within its
    // duration and finishes the scale-up, the Docker provider's Pod making the container on
    // the host's Engine through the socket its Deployment mounts, and no Machine is made twice.
    host.kubectl(&[
        "scale",
        "deployment",
        "-n",
        "capi-system",
        "capi-controller-manager",
        "--replicas",
        "2",
    ]);
    wait(&s, "two core provider replicas Available", 120, || {
        let d = host.json(&[
            "get",
            "deployment",
            "-n",
            "capi-system",
            "capi-controller-manager",
        ]);
        match d["status"]["availableReplicas"].as_i64() {
            Some(2) => Ok(()),
            other => Err(format!("{other:?} available")),
        }
    })
    .await;
    let leader = lease_holder(&host);
    host.kubectl(&[
        "scale",
        "machinedeployment",
        &format!("{}-md-0", s.cluster),
        "--replicas",
        "2",
    ]);
    let killed = std::time::Instant::now();
    let kill = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("name=^k8s_manager_{leader}_capi-system_"),
        ])
        .output()
        .unwrap();
    let container = text(&kill.stdout).trim().to_string();
    assert!(!container.is_empty(), "the leader {leader}'s container");
    let kill = Command::new("docker")
        .args(["kill", &container])
        .output()
        .unwrap();
    assert!(kill.status.success(), "{}", text(&kill.stderr));
    wait(&s, "the other replica leads", 60, || {
        let now = lease_holder(&host);
        if now != leader && !now.is_empty() {
            Ok(())
        } else {
            Err(format!("the Lease is held by {now:?}"))
        }
    })
    .await;
    eprintln!(
        "failover of the core provider after its leader's container was killed: {:.1?}",
        killed.elapsed()
    );
    let mut seen = std::collections::BTreeSet::new();
    wait(
        &s,
        "two workers Ready, made by the cluster itself",
        180,
        || {
            seen.extend(machine_names(&host.json(&[
                "get",
                "machines",
                "-l",
                &workers(&s),
            ])));
            ready_machines(&host, &workers(&s), "v1.28.13", 2)
        },
    )
    .await;
    assert_eq!(
        seen.len(),
        2,
        "worker Machines seen during the failover: {seen:?}"
    );
    host.kubectl(&[
        "scale",
        "deployment",
        "-n",
        "capi-system",
        "capi-controller-manager",
        "--replicas",
        "1",
    ]);

    // A stopped worker is replaced by its MachineHealthCheck: one that runs none of the
    // providers' Pods, so that the rest of the cluster can see it fail.
    let mhc = format!(
        "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineHealthCheck\nmetadata:\n  name: {c}-md-0\n  namespace: default\nspec:\n  clusterName: {c}\n  selector:\n    matchLabels:\n      cluster.x-k8s.io/deployment-name: {c}-md-0\n  checks:\n    unhealthyNodeConditions:\n    - type: Ready\n      status: Unknown\n      timeoutSeconds: 20\n    - type: Ready\n      status: \"False\"\n      timeoutSeconds: 20\n",
        c = s.cluster
    );
    host.apply(&mhc);
    let hosting: Vec<String> = DEPLOYMENTS
        .iter()
        .flat_map(|(namespace, _)| {
            host.json(&["get", "pods", "-n", namespace])["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    p["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let victim = machine_names(&host.json(&["get", "machines", "-l", &workers(&s)]))
        .into_iter()
        .find(|m| !hosting.contains(m))
        .expect("a worker without the providers' Pods");
    let stop = Command::new("docker")
        .args(["stop", &victim])
        .output()
        .unwrap();
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    wait(
        &s,
        "the stopped worker replaced by the cluster itself",
        240,
        || {
            let names = machine_names(&host.try_json(&["get", "machines", "-l", &workers(&s)])?);
            if names.contains(&victim) {
                return Err(format!("{victim} is still there"));
            }
            ready_machines(&host, &workers(&s), "v1.28.13", 2)
        },
    )
    .await;

    // It upgrades itself version by version: its own control plane, one machine at a time,
    // while its controllers run on its workers; then those workers, draining the
    // controllers' Pods, which run again on the new workers and carry on.
    host.kubectl(&[
        "patch",
        "kcp",
        &format!("{}-control-plane", s.cluster),
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"version":"v1.29.10"}}"#,
    ]);
    wait(&s, "its control plane upgraded by itself", 300, || {
        ready_machines(&host, &s.control_plane_selector(), "v1.29.10", 1)
    })
    .await;

    host.kubectl(&[
        "patch",
        "md",
        &format!("{}-md-0", s.cluster),
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"version":"v1.29.10"}}}}"#,
    ]);
    wait(&s, "its workers upgraded by itself", 300, || {
        ready_machines(&host, &workers(&s), "v1.29.10", 2)
    })
    .await;
    for (namespace, deployment) in DEPLOYMENTS {
        let d = host.json(&["get", "deployment", "-n", namespace, deployment]);
        assert_eq!(
            d["status"]["availableReplicas"], 1,
            "{namespace}/{deployment} after the drain: {d}"
        );
    }

    // It moves back out, with the same Machines, and is deleted from there.
    let before = machine_names(&host.json(&["get", "machines"]));
    s.capictl(&[
        "move",
        "--kubeconfig",
        &kubeconfig,
        "--to-kubeconfig",
        &s.kubeconfig,
    ]);
    s.wait_available(120).await;
    assert_eq!(
        machine_names(&s.json(&["get", "machines"])),
        before,
        "no Machine replaced"
    );
    s.kubectl(&["delete", "cluster", &s.cluster, "--timeout=180s"]);
    assert_eq!(
        s.node_containers(),
        Vec::<String>::new(),
        "nothing left behind"
    );
}

/// The Pod that holds the core provider's leader Lease (upstream's name), or "".
fn lease_holder(host: &Workload<'_>) -> String {
    let lease = host.json(&[
        "get",
        "lease",
        "-n",
        "capi-system",
        "controller-leader-election-capi",
    ]);
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    // client-go's identity: the Pod's name, `_`, a unique suffix.
    holder.split('_').next().unwrap_or_default().to_string()
}

/// A kube-rs client of a kubeconfig file.
async fn client_of(path: &str) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The label selector of the session cluster's worker Machines.
fn workers(s: &Session) -> String {
    format!("cluster.x-k8s.io/deployment-name={}-md-0", s.cluster)
}

fn machine_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["metadata"]["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn available(cluster: &Value) -> Result<(), String> {
    match condition(cluster, "Available").as_deref() {
        Some("True") => Ok(()),
        _ => Err(cluster["status"]["conditions"].to_string()),
    }
}

/// Every Machine of the selector at `version` and Ready, `count` of them; else what is not
/// and what the providers' managers last said.
fn ready_machines(
    host: &Workload<'_>,
    selector: &str,
    version: &str,
    count: usize,
) -> Result<(), String> {
    // The cluster's own API server may not answer for a moment while its control plane is
    // replaced: asked again.
    let machines = host.try_json(&["get", "machines", "-l", selector])?;
    let machines = machines["items"].as_array().cloned().unwrap_or_default();
    rolled_out_of(&machines, version, count).map_err(|e| format!("{e}{}", manager_logs(host)))
}

/// The last lines of every provider's manager, for a failure's message.
fn manager_logs(host: &Workload<'_>) -> String {
    let mut out = String::new();
    for (namespace, deployment) in DEPLOYMENTS {
        let logs = host.session.run(
            &kubectl_binary(),
            &[
                "--kubeconfig",
                &host.kubeconfig,
                "logs",
                "-n",
                namespace,
                &format!("deployment/{deployment}"),
                "--tail",
                "15",
            ],
        );
        out.push_str(&format!(
            "\n--- {namespace}/{deployment}\n{}{}",
            text(&logs.stdout),
            text(&logs.stderr)
        ));
    }
    out
}
