//! The seeds' quick-start on this machine's Docker Engine, as a user runs it: the embedded
//! management cluster, `capictl init --infrastructure docker`, a generated cluster of three
//! control planes and three workers applied with kubectl, its nodes through the real HAProxy,
//! a control-plane upgrade while the load balancer keeps answering, a worker rollout, a
//! stopped worker remediated by a MachineHealthCheck, and deletion leaving nothing behind.
//! Needs a Docker Engine (and root, for `capictl images build`).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::quickstart::{
    Session, Workload, all_nodes_ready, busybox_image, condition, fetch_from_pod, kubectl_binary,
    machines, rolled_out, text, wait,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_on_docker_upgrades_remediates_and_deletes() {
    let s = Session::start("qs", "v1.28.13,v1.29.10").await;

    // The cluster, generated and applied as the quick-start says.
    let started = Instant::now();
    s.apply_cluster("v1.28.13", 3, 3);
    s.kubectl(&[
        "wait",
        "--for=condition=Available",
        &format!("cluster/{}", s.cluster),
        "--timeout=300s",
    ]);
    eprintln!("3+3 Available after {:.1?}", started.elapsed());
    // The tree shows the Docker objects and their conditions, and each control-plane Machine's
    // health as the control plane provider judges it.
    let tree = s.capictl(&[
        "describe",
        "cluster",
        &s.cluster,
        "--show-conditions",
        "all",
        "--echo",
        // Every Machine on its own row, with its DockerMachine: alike Machines would fold into
        // one row once they all are Ready, which a loaded machine can reach before this runs.
        "--grouping=false",
    ]);
    for row in [
        "DockerCluster default/",
        "LoadBalancerAvailable",
        "DockerMachine default/",
        "BootstrapCompleted",
        "EtcdMemberHealthy",
        "APIServerPodHealthy",
    ] {
        assert!(tree.contains(row), "{row:?} in\n{tree}");
    }

    // Six Ready nodes through the real HAProxy, at 127.0.0.1 and its published port.
    let workload = s.dir.join("workload.conf").display().to_string();
    s.capictl(&["get", "kubeconfig", &s.cluster, "--write-to", &workload]);
    let server = std::fs::read_to_string(&workload).unwrap();
    assert!(server.contains("server: https://127.0.0.1:"), "{server}");
    let port: u16 = server
        .split("https://127.0.0.1:")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let cp = s.control_plane_selector();
    let workers = format!("cluster.x-k8s.io/deployment-name={}-md-0", s.cluster);
    all_nodes_ready(&s, &workload, 6).await;

    // Workloads run on the workers: a Deployment's Pods spread over them, each with an address
    // of its own on the Docker network, reaching each other across nodes; kubelet's failure
    // states are reported in kubelet's words.
    let cluster = Workload {
        session: &s,
        kubeconfig: workload.clone(),
    };
    let busybox = busybox_image();
    cluster.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image",
        &busybox,
        "--replicas",
        "3",
        "--",
        // Ends at SIGTERM, as a well-behaved server does (busybox's httpd, PID 1 of its
        // container, would ignore it and hold every drain for its 30 s grace period).
        "sh",
        "-c",
        "trap 'exit 0' TERM; httpd -f -p 8080 -h /etc & wait",
    ]);
    cluster.kubectl(&[
        "run",
        "crash",
        "--image",
        &busybox,
        "--",
        "sh",
        "-c",
        "echo crashed; exit 3",
    ]);
    cluster.kubectl(&["run", "unpullable", "--image", "example.invalid/nothing:1"]);
    // It allocates after a second: containerd watches a container's memory cgroup for OOM
    // kills only once the task has started, so a process killed within its first moments on
    // a busy machine can exit 137 with no OOM event or mark at all, as it would under kubelet
    // and Docker (seen in full-suite runs: exit 137 within its first second, no mark from the
    // Engine's inspection or events for 90 s).
    let oom = r#"{"spec":{"restartPolicy":"Never","containers":[{"name":"oom","image":"IMAGE","command":["sh","-c","sleep 1; x=a; while true; do x=$x$x; done"],"resources":{"limits":{"memory":"16Mi"}}}]}}"#
        .replace("IMAGE", &busybox);
    cluster.kubectl(&["run", "oom", "--image", &busybox, "--overrides", &oom]);
    let worker_nodes = |s: &Session| -> Vec<String> {
        machines(s, &workers)
            .iter()
            .map(|m| {
                m["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    // Three web Pods Running with addresses on the workers, over at least `spread` of them.
    let web_on_workers = |spread: usize| {
        let (cluster, s) = (&cluster, &s);
        move || {
            let running = cluster.running("app=web");
            let nodes: std::collections::BTreeSet<&String> =
                running.iter().map(|(_, n, _)| n).collect();
            let workers = worker_nodes(s);
            if running.len() == 3
                && nodes.len() >= spread
                && nodes.iter().all(|n| workers.contains(n))
                && running.iter().all(|(_, _, ip)| !ip.is_empty())
            {
                Ok(())
            } else {
                // A Pod off the workers: what its Node's taints were then says how it got there.
                let taints: Vec<String> = nodes
                    .iter()
                    .filter(|n| !workers.contains(n))
                    .map(|n| match cluster.try_json(&["get", "node", n]) {
                        Ok(node) => format!("{n}: {}", node["spec"]["taints"]),
                        Err(e) => format!("{n}: {e}"),
                    })
                    .collect();
                Err(format!(
                    "web Pods Running: {running:?}; workers {workers:?}; other Nodes' taints {taints:?}"
                ))
            }
        }
    };
    wait(
        &s,
        "3 web Pods run, one on each worker",
        120,
        web_on_workers(3),
    )
    .await;
    let web = cluster.running("app=web");
    for (from, _, _) in &web {
        for (to, _, ip) in &web {
            let answer = fetch_from_pod(from, "busybox", &format!("http://{ip}:8080/hostname"));
            assert_eq!(
                answer.as_deref(),
                Ok(to.as_str()),
                "{from} asks {to} at {ip}"
            );
        }
    }
    // A Service answers from any Pod by its cluster IP and by its DNS names, spreading the
    // requests over its endpoints.
    cluster.kubectl(&[
        "expose",
        "deployment",
        "web",
        "--port",
        "80",
        "--target-port",
        "8080",
    ]);
    let cluster_ip = cluster.json(&["get", "service", "web"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let names: Vec<&String> = web.iter().map(|(name, _, _)| name).collect();
    let asker = web[0].0.clone();
    wait(
        &s,
        "the web Service answers by name and cluster IP",
        60,
        || {
            let mut answered = std::collections::BTreeSet::new();
            for host in [
                "web.default.svc.cluster.local",
                "web",
                "web.default",
                cluster_ip.as_str(),
            ] {
                for _ in 0..4 {
                    let answer =
                        fetch_from_pod(&asker, "busybox", &format!("http://{host}/hostname"))?;
                    if !names.contains(&&answer) {
                        return Err(format!("{host} answered {answer:?}, not a web Pod"));
                    }
                    answered.insert(answer);
                }
            }
            if answered.len() < 2 {
                return Err(format!("16 requests reached only {answered:?}"));
            }
            Ok(())
        },
    )
    .await;
    let lookup = fetch_from_pod(&asker, "busybox", "http://kubernetes-no-such-service/")
        .expect_err("an unknown Service name does not resolve");
    assert!(lookup.contains("bad address"), "{lookup}");
    services_beyond_the_basics(&s, &cluster, &busybox, &asker, &names).await;
    node_port(&s, &cluster, &names).await;
    api_endpoints_follow_the_control_planes(&s, &cluster).await;
    // A Pod reaches the API by the `kubernetes` Service's name.
    let reached = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=io.kubernetes.pod.name={asker}"),
            "--filter",
            "label=io.kubernetes.container.name=busybox",
        ])
        .output()
        .unwrap();
    let container = text(&reached.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let out = Command::new("docker")
        .args([
            "exec",
            &container,
            "nc",
            "-w",
            "3",
            "kubernetes.default.svc.cluster.local",
            "443",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubernetes.default.svc:443 from {asker}: {}",
        text(&out.stderr)
    );
    // `kubectl port-forward` to a web Pod, with both kubectls.
    for kubectl in crate::common::management::all_kubectls() {
        let answer = through_port_forward(&kubectl, &workload, &web[0].0, 8080, "/hostname");
        assert_eq!(
            answer.as_deref(),
            Ok(web[0].0.as_str()),
            "{kubectl} port-forward"
        );
    }
    // A DaemonSet that tolerates the control plane's taint runs a Pod on every node.
    let agent = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "agents"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "agent", "image": busybox, "command": ["sleep", "3600"]}],
                },
            },
        },
    });
    let path = s.dir.join("agent.json");
    std::fs::write(&path, agent.to_string()).unwrap();
    // In a namespace of its own: the checks below count the default namespace's containers.
    cluster.kubectl(&["create", "namespace", "agents"]);
    cluster.kubectl(&["apply", "-f", &path.display().to_string()]);
    wait(
        &s,
        "the DaemonSet runs a Pod on each of the 6 nodes",
        90,
        || {
            let pods = cluster.json(&["get", "pods", "-n", "agents", "-l", "app=agent"]);
            let running: Vec<&Value> = pods["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["status"]["phase"] == "Running")
                .collect();
            let nodes: std::collections::BTreeSet<&str> = running
                .iter()
                .filter_map(|p| p["spec"]["nodeName"].as_str())
                .collect();
            if running.len() == 6 && nodes.len() == 6 {
                Ok(())
            } else {
                // Every Pod, where it is and what it waits for: the Nodes alone do not say
                // whether the missing one was never created, never bound or never started.
                let all: Vec<String> = pods["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        format!(
                            "{} on {} {} {}",
                            p["metadata"]["name"].as_str().unwrap_or("?"),
                            p["spec"]["nodeName"].as_str().unwrap_or("(unbound)"),
                            p["status"]["phase"].as_str().unwrap_or("?"),
                            p["status"]["conditions"]
                        )
                    })
                    .collect();
                Err(format!("running on {nodes:?}; pods: {all:#?}"))
            }
        },
    )
    .await;
    wait(&s, "kubelet reports the failing Pods", 90, || {
        let states = [
            ("crash", cluster.state("crash")),
            ("unpullable", cluster.state("unpullable")),
            ("oom", cluster.state("oom")),
        ];
        let restarts = cluster.json(&["get", "pod", "crash"])["status"]["containerStatuses"][0]
            ["restartCount"]
            .as_i64()
            .unwrap_or(0);
        let expected = [
            (
                "crash",
                ("waiting".to_string(), "CrashLoopBackOff".to_string()),
            ),
            ("unpullable", ("waiting".into(), "ImagePullBackOff".into())),
            ("oom", ("terminated".into(), "OOMKilled".into())),
        ];
        if states == expected && restarts >= 1 {
            Ok(())
        } else {
            let oom = &cluster.json(&["get", "pod", "oom"])["status"]["containerStatuses"];
            Err(format!(
                "{states:?}, crash restarted {restarts} times; oom: {oom}"
            ))
        }
    })
    .await;
    // `kubectl logs` through the workload API server, with both kubectls: the output of the
    // last run and of the one before it.
    for kubectl in crate::common::management::all_kubectls() {
        for args in [vec!["logs", "crash"], vec!["logs", "crash", "--previous"]] {
            let mut all = vec!["--kubeconfig", workload.as_str()];
            all.extend(args);
            // The current run may have just started and not written yet.
            wait(
                &s,
                &format!("{kubectl} {all:?} shows the output"),
                30,
                || {
                    let out = s.run(&kubectl, &all);
                    match text(&out.stdout).trim() {
                        "crashed" => Ok(()),
                        other => Err(format!("{other:?} {}", text(&out.stderr))),
                    }
                },
            )
            .await;
        }
    }
    // `kubectl exec` with both kubectls (SPDY for 1.20, WebSocket for the current one): the
    // command's output, its standard input, its exit code; `kubectl cp` (tar through exec).
    let pod = &web[0].0;
    for kubectl in crate::common::management::all_kubectls() {
        let exec = |args: &[&str], stdin: &str| {
            let mut child = Command::new(&kubectl)
                .args(["--kubeconfig", workload.as_str(), "exec"])
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(stdin.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        };
        let out = exec(&[pod, "--", "hostname"], "");
        assert_eq!(
            (text(&out.stdout).trim(), out.status.code()),
            (pod.as_str(), Some(0)),
            "{kubectl} exec: {}",
            text(&out.stderr)
        );
        let out = exec(
            &["-i", pod, "--", "sh", "-c", "cat; echo err >&2"],
            "from stdin\n",
        );
        assert_eq!(
            (text(&out.stdout).trim(), text(&out.stderr).trim()),
            ("from stdin", "err"),
            "{kubectl} exec -i"
        );
        let out = exec(&[pod, "--", "sh", "-c", "exit 3"], "");
        assert_eq!(
            out.status.code(),
            Some(3),
            "{kubectl}: {}",
            text(&out.stderr)
        );
        let missing = exec(&[pod, "-c", "nope", "--", "true"], "");
        assert!(
            text(&missing.stderr).contains("container nope is not valid"),
            "{kubectl}: {}",
            text(&missing.stderr)
        );
    }
    let copied = s.dir.join("hostname-copy");
    cluster.kubectl(&[
        "cp",
        &format!("{pod}:/etc/hostname"),
        &copied.display().to_string(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&copied).unwrap().trim(),
        pod.as_str()
    );
    // What runs is confined (Node,RBAC with kubeadm's policy): the token mounted in the web
    // Pod (its ServiceAccount, `default`) is refused the cluster's Secrets and Pods and may
    // discover; the cluster CA and the namespace are mounted beside it.
    let mounted = |file: &str| {
        cluster.kubectl(&[
            "exec",
            pod,
            "--",
            "cat",
            &format!("/var/run/secrets/kubernetes.io/serviceaccount/{file}"),
        ])
    };
    assert_eq!(mounted("namespace").trim(), "default");
    assert!(mounted("ca.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    let token = mounted("token");
    let server = cluster.kubectl(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let as_pod = |args: &[&str]| {
        let mut all = vec![
            "--kubeconfig",
            "/dev/null",
            "--server",
            server.trim(),
            "--insecure-skip-tls-verify",
            "--token",
            token.trim(),
        ];
        all.extend(args);
        s.run(&kubectl_binary(), &all)
    };
    let secrets = as_pod(&["get", "secrets", "-A"]);
    assert!(
        !secrets.status.success()
            && text(&secrets.stderr).contains(
                "User \"system:serviceaccount:default:default\" cannot list resource \"secrets\""
            ),
        "a Pod's token listed Secrets: {} {}",
        text(&secrets.stdout),
        text(&secrets.stderr)
    );
    let pods = as_pod(&["auth", "can-i", "list", "pods", "-A"]);
    assert_eq!(text(&pods.stdout).trim(), "no", "{}", text(&pods.stderr));
    let discovery = as_pod(&["get", "--raw", "/version"]);
    assert!(discovery.status.success(), "{}", text(&discovery.stderr));
    // A Job runs its Pod to completion, and `kubectl wait` sees it Complete.
    cluster.kubectl(&[
        "create",
        "job",
        "once",
        "--image",
        &busybox,
        "--",
        "sh",
        "-c",
        "echo done",
    ]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/once",
        "--timeout=90s",
    ]);
    let job = cluster.json(&["get", "job", "once"]);
    assert_eq!(job["status"]["succeeded"], 1, "{job}");
    cluster.kubectl(&["delete", "job", "once", "--wait=true"]);
    probes_and_hooks(&s, &cluster, &busybox).await;
    attach_to_a_pod(&s, &cluster, &busybox).await;
    volumes_follow_their_sources(&s, &cluster, &busybox).await;
    // Deleted Pods take their containers with them.
    cluster.kubectl(&["delete", "pod", "crash", "unpullable", "oom", "--wait=true"]);
    wait(&s, "the deleted Pods' containers are gone", 60, || {
        let out = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                "label=io.kubernetes.pod.namespace=default",
            ])
            .output()
            .unwrap();
        // The web Pods' sandboxes and containers are all that is left.
        match text(&out.stdout).lines().count() {
            6 => Ok(()),
            n => Err(format!("{n} containers of Pods in namespace default")),
        }
    })
    .await;

    // The control plane upgrade, one container at a time, while /healthz through the load
    // balancer keeps answering.
    let probing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let prober = {
        let probing = probing.clone();
        tokio::spawn(async move {
            let probe = capictl::node::static_pods::Probe {
                https: true,
                host: "127.0.0.1".into(),
                port,
                path: "/healthz".into(),
            };
            let (mut longest, mut down_since): (Duration, Option<Instant>) = (Duration::ZERO, None);
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                if capictl::node::probe::check(&probe, Duration::from_secs(2)).await {
                    if let Some(t) = down_since.take() {
                        longest = longest.max(t.elapsed());
                    }
                } else {
                    down_since.get_or_insert_with(Instant::now);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            longest.max(down_since.map(|t| t.elapsed()).unwrap_or_default())
        })
    };
    let upgrade = Instant::now();
    s.upgrade_control_plane("v1.29.10");
    wait(&s, "every control-plane Machine runs v1.29.10", 300, || {
        rolled_out(&s, &cp, "v1.29.10", 3)
    })
    .await;
    eprintln!("control plane upgraded after {:.1?}", upgrade.elapsed());
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    let longest = prober.await.unwrap();
    assert!(
        longest < Duration::from_secs(5),
        "the API through the load balancer was down for {longest:?} during the upgrade"
    );
    let kcp = s.json(&["get", "kcp", &format!("{}-control-plane", s.cluster)]);
    wait(&s, "etcd has three healthy members", 60, || {
        let kcp = s.json(&["get", "kcp", &format!("{}-control-plane", s.cluster)]);
        match condition(&kcp, "EtcdClusterHealthy").as_deref() {
            Some("True") => Ok(()),
            other => Err(format!("EtcdClusterHealthy is {other:?}")),
        }
    })
    .await;
    api_endpoints_follow_the_control_planes(&s, &cluster).await;
    let etcd_pods = s.run(
        &kubectl_binary(),
        &[
            "--kubeconfig",
            &workload,
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "component=etcd",
            "-o",
            "json",
        ],
    );
    let etcd_pods: Value = serde_json::from_slice(&etcd_pods.stdout).unwrap();
    assert_eq!(etcd_pods["items"].as_array().unwrap().len(), 3, "{kcp}");
    // The workload cluster follows the version: kubeadm-config (which joins read), each API
    // server's mirror Pod, then kube-proxy and CoreDNS once every Machine is up to date.
    let in_workload = |args: &[&str]| -> Value {
        let mut all = vec!["--kubeconfig", workload.as_str(), "-n", "kube-system"];
        all.extend(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&s.ok(&kubectl_binary(), &all)).unwrap()
    };
    let config = in_workload(&["get", "configmap", "kubeadm-config"]);
    let cluster_configuration = config["data"]["ClusterConfiguration"].as_str().unwrap();
    assert!(
        cluster_configuration.contains("kubernetesVersion: v1.29.10"),
        "{cluster_configuration}"
    );
    let apiservers = in_workload(&["get", "pods", "-l", "component=kube-apiserver"]);
    for pod in apiservers["items"].as_array().unwrap() {
        let image = pod["spec"]["containers"][0]["image"].as_str().unwrap();
        assert!(image.ends_with(":v1.29.10"), "{image}");
    }
    wait(
        &s,
        "kube-proxy and CoreDNS follow the control plane",
        60,
        || {
            let proxy = in_workload(&["get", "daemonset", "kube-proxy"]);
            let dns = in_workload(&["get", "deployment", "coredns"]);
            let images = (
                proxy["spec"]["template"]["spec"]["containers"][0]["image"].clone(),
                dns["spec"]["template"]["spec"]["containers"][0]["image"].clone(),
            );
            if images
                == (
                    json!("registry.k8s.io/kube-proxy:v1.29.10"),
                    json!("registry.k8s.io/coredns/coredns:v1.11.1"),
                )
            {
                Ok(())
            } else {
                Err(format!("{images:?}"))
            }
        },
    )
    .await;

    // A PodDisruptionBudget that allows no disruption holds a worker's drain, and the
    // Machine's Deleting condition says so; relaxed, it lets the drain finish.
    cluster.kubectl(&[
        "create",
        "poddisruptionbudget",
        "web",
        "--selector",
        "app=web",
        "--min-available",
        "3",
    ]);
    let held = machines(&s, &workers)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    s.kubectl(&["delete", "machine", &held, "--wait=false"]);
    wait(&s, "the budget holds the drain", 60, || {
        let machine = s.json(&["get", "machine", &held]);
        let deleting = machine["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Deleting")
            .cloned()
            .unwrap_or_default();
        let message = deleting["message"].as_str().unwrap_or_default();
        if message.contains("disruption budget web") {
            Ok(())
        } else {
            Err(format!("Deleting: {deleting}"))
        }
    })
    .await;
    // `capictl describe cluster` shows the drain on the Machine's row.
    let tree = s.ok(
        crate::common::quickstart::capictl_binary(),
        &["describe", "cluster", &s.cluster],
    );
    let row = tree
        .lines()
        .skip_while(|l| !l.contains(&held))
        .take(4)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        row.contains("Deleting") && row.contains("Drain"),
        "the held Machine's row: {row}\n{tree}"
    );
    // The workers roll to the new version; the budget, now allowing one web Pod down at a
    // time, keeps the Service an endpoint through every drain.
    cluster.kubectl(&[
        "patch",
        "poddisruptionbudget",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"minAvailable":null,"maxUnavailable":1}}"#,
    ]);
    wait(
        &s,
        "the held Machine is gone once the budget allows",
        120,
        || {
            let out = s.run(&kubectl_binary(), &["get", "machine", &held]);
            if out.status.success() {
                Err("still there".into())
            } else {
                Ok(())
            }
        },
    )
    .await;
    let endpoints = EndpointWatch::start(&workload, "web");
    s.kubectl(&[
        "patch",
        "md",
        &format!("{}-md-0", s.cluster),
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"version":"v1.29.10"}}}}"#,
    ]);
    wait(&s, "every worker runs v1.29.10", 300, || {
        rolled_out(&s, &workers, "v1.29.10", 3)
    })
    .await;
    // The drains moved the web Pods onto the new workers.
    wait(
        &s,
        "the web Pods run on the new workers",
        120,
        web_on_workers(3),
    )
    .await;
    let fewest = endpoints.stop();
    assert!(
        fewest >= 1,
        "the web Service had {fewest} ready endpoints during the rollout"
    );

    // A stopped worker is replaced by its MachineHealthCheck.
    let mhc = format!(
        "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineHealthCheck\nmetadata:\n  name: {c}-md-0\nspec:\n  clusterName: {c}\n  selector:\n    matchLabels:\n      cluster.x-k8s.io/deployment-name: {c}-md-0\n  checks:\n    unhealthyNodeConditions:\n    - type: Ready\n      status: Unknown\n      timeoutSeconds: 20\n    - type: Ready\n      status: \"False\"\n      timeoutSeconds: 20\n",
        c = s.cluster
    );
    let path = s.dir.join("mhc.yaml");
    std::fs::write(&path, mhc).unwrap();
    s.kubectl(&["apply", "-f", &path.display().to_string()]);
    let victim = machines(&s, &workers)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let stop = Command::new("docker")
        .args(["stop", &victim])
        .output()
        .unwrap();
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    wait(&s, "the stopped worker's Machine is replaced", 240, || {
        if machines(&s, &workers)
            .iter()
            .any(|m| m["metadata"]["name"] == victim.as_str())
        {
            return Err(format!("{victim} is still there"));
        }
        rolled_out(&s, &workers, "v1.29.10", 3)
    })
    .await;

    // The cluster moves to a second management cluster with its containers untouched and the
    // same Machines, and is Available there; it is deleted from there.
    let containers = s.node_containers();
    let names = |s: &Session| -> Vec<String> {
        let mut names: Vec<String> =
            machines(s, &format!("cluster.x-k8s.io/cluster-name={}", s.cluster))
                .iter()
                .map(|m| {
                    m["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect();
        names.sort();
        names
    };
    let before = names(&s);
    let started = Instant::now();
    let target = Session::up(&s.cluster);
    s.capictl(&["move", "--to-kubeconfig", &target.kubeconfig]);
    // On timeout this shows what the target's controllers made of the moved objects.
    target.wait_available(120).await;
    eprintln!(
        "moved and Available in the target after {:.1?}",
        started.elapsed()
    );
    assert_eq!(
        s.kubectl(&["get", "clusters,machines", "-A", "-o", "name"]),
        ""
    );
    assert_eq!(
        target.node_containers(),
        containers,
        "the node containers are untouched"
    );
    assert_eq!(names(&target), before, "no rollout");
    let s = target;

    // Deleting the Cluster leaves no container, volume or load balancer.
    let volumes: Vec<String> = s
        .node_containers()
        .iter()
        .flat_map(|c| {
            let out = Command::new("docker")
                .args(["inspect", "-f", "{{range .Mounts}}{{.Name}} {{end}}", c])
                .output()
                .unwrap();
            text(&out.stdout)
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!volumes.is_empty(), "the nodes have /var volumes");
    s.kubectl(&["delete", "cluster", &s.cluster, "--timeout=180s"]);
    assert_eq!(
        s.containers(),
        Vec::<String>::new(),
        "no container of the cluster is left"
    );
    for v in volumes {
        let out = Command::new("docker")
            .args(["volume", "inspect", &v])
            .output()
            .unwrap();
        assert!(!out.status.success(), "volume {v} is left behind");
    }
}

/// The InternalIP a Node or a Machine reports in `status.addresses` (the same shape on both).
fn internal_ip(object: &Value) -> Option<String> {
    object["status"]["addresses"]
        .as_array()?
        .iter()
        .find(|a| a["type"] == "InternalIP")?["address"]
        .as_str()
        .map(str::to_string)
}

/// The InternalIP of each Node of a `kubectl get nodes -o json`.
fn internal_ips(nodes: &Value) -> Vec<String> {
    nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(internal_ip)
        .collect()
}

/// The `default/kubernetes` Endpoints list the control planes' addresses, as kube-apiserver's
/// endpoint reconciler keeps them.
async fn api_endpoints_follow_the_control_planes(s: &Session, cluster: &Workload<'_>) {
    wait(s, "default/kubernetes lists the control planes", 60, || {
        // The control planes as Cluster API knows them: Machines that are not going.
        let machines = s.json(&[
            "get",
            "machines",
            "-l",
            &format!(
                "cluster.x-k8s.io/cluster-name={},cluster.x-k8s.io/control-plane",
                s.cluster
            ),
        ]);
        let mut wanted: Vec<String> = machines["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["metadata"]["deletionTimestamp"].is_null())
            .filter_map(internal_ip)
            .collect();
        wanted.sort();
        let endpoints = cluster.json(&["get", "endpoints", "kubernetes"]);
        let mut listed: Vec<String> = endpoints["subsets"][0]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str().map(str::to_string))
            .collect();
        listed.sort();
        if listed == wanted && wanted.len() == 3 {
            Ok(())
        } else {
            // The Nodes too, as the workload cluster has them: once (stop 57) the labelled
            // control-plane Nodes' addresses were two of the three.
            let nodes = cluster.json(&["get", "nodes"]);
            let nodes: Vec<String> = nodes["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|n| {
                    format!(
                        "{} {} {}",
                        n["metadata"]["name"].as_str().unwrap_or("?"),
                        n["metadata"]["labels"],
                        n["status"]["addresses"]
                    )
                })
                .collect();
            Err(format!(
                "endpoints {listed:?}, control-plane Machines {wanted:?}; nodes: {nodes:#?}"
            ))
        }
    })
    .await;
}

/// The web Service made a NodePort: every node, a control plane as much as a worker, answers
/// on the node port with one of the web Pods.
async fn node_port(s: &Session, cluster: &Workload<'_>, web: &[&String]) {
    cluster.kubectl(&[
        "patch",
        "service",
        "web",
        "-p",
        r#"{"spec":{"type":"NodePort"}}"#,
    ]);
    let service = cluster.json(&["get", "service", "web"]);
    let port = service["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&port), "{service}");
    let nodes = cluster.json(&["get", "nodes"]);
    let addresses = internal_ips(&nodes);
    assert_eq!(addresses.len(), 6, "{nodes}");
    wait(
        s,
        "every node answers on the web Service's node port",
        60,
        || {
            for address in &addresses {
                let answer = http_get(&format!("{address}:{port}"), "/hostname")?;
                if !web.iter().any(|w| **w == answer) {
                    return Err(format!(
                        "{address}:{port} answered {answer:?}, not a web Pod"
                    ));
                }
            }
            Ok(())
        },
    )
    .await;
    cluster.kubectl(&[
        "patch",
        "service",
        "web",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ]);
}

/// The body of a plain HTTP GET from this host.
fn http_get(address: &str, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(
        &address.parse().map_err(|e| format!("{address}: {e}"))?,
        Duration::from_secs(2),
    )
    .map_err(|e| format!("{address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("{address}: {e}"))?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.trim().to_string())
        .ok_or(format!("{address} answered {response:?}"))
}

/// kubelet's probes and lifecycle hooks on a Docker node: a startup probe on a named HTTP port,
/// a readiness probe that holds the Pod unready until a file appears, a liveness probe that
/// restarts the container once its file goes, and a preStop hook that reaches another Pod
/// before the container stops.
async fn probes_and_hooks(s: &Session, cluster: &Workload<'_>, busybox: &str) {
    cluster.kubectl(&[
        "run", "listener", "--image", busybox, "--", "httpd", "-f", "-v", "-p", "8080", "-h",
        "/etc",
    ]);
    let listener_ip = || {
        let p = cluster.json(&["get", "pod", "listener"]);
        p["status"]["podIP"]
            .as_str()
            .map(str::to_string)
            .filter(|_| condition(&p, "Ready").as_deref() == Some("True"))
    };
    wait(s, "the listener Pod runs", 90, || {
        listener_ip().map(|_| ()).ok_or("not Ready yet".into())
    })
    .await;
    let listener = listener_ip().unwrap();
    let probed = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed"},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app", "image": busybox,
                "command": ["sh", "-c", "touch /tmp/alive; exec httpd -f -p 8080 -h /etc"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "startupProbe": {"httpGet": {"port": "http", "path": "/hostname"}, "periodSeconds": 1, "failureThreshold": 30},
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1},
                "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2},
                "lifecycle": {"preStop": {"exec": {"command": ["wget", "-q", "-O", "/dev/null", format!("http://{listener}:8080/hostname")]}}},
            }],
        },
    });
    let path = s.dir.join("probed.json");
    std::fs::write(&path, probed.to_string()).unwrap();
    cluster.kubectl(&["apply", "-f", &path.display().to_string()]);
    let app = || cluster.json(&["get", "pod", "probed"]);
    // Started once its HTTP port answers; unready while /tmp/ready is missing.
    wait(s, "the probed Pod is started and unready", 90, || {
        let p = app();
        let c = &p["status"]["containerStatuses"][0];
        match (
            &c["started"],
            &c["ready"],
            condition(&p, "Ready").as_deref(),
        ) {
            (Value::Bool(true), Value::Bool(false), Some("False")) => Ok(()),
            _ => Err(format!("{}", p["status"])),
        }
    })
    .await;
    let events = |reason: &str| -> Vec<String> {
        let list = cluster.json(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=probed",
        ]);
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == reason)
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    wait(s, "the readiness probe's failure is an Event", 30, || {
        let unhealthy = events("Unhealthy");
        match unhealthy
            .iter()
            .any(|m| m.starts_with("Readiness probe failed: cat: can't open '/tmp/ready'"))
        {
            true => Ok(()),
            false => Err(format!("{unhealthy:?}")),
        }
    })
    .await;
    cluster.kubectl(&["exec", "probed", "--", "touch", "/tmp/ready"]);
    wait(
        s,
        "the probed Pod is Ready once its file is there",
        30,
        || match condition(&app(), "Ready").as_deref() {
            Some("True") => Ok(()),
            other => Err(format!("Ready {other:?}")),
        },
    )
    .await;
    // Liveness fails twice in a row: the container is killed and started again (the new
    // container is unready again, its /tmp/ready gone).
    cluster.kubectl(&["exec", "probed", "--", "rm", "/tmp/alive"]);
    wait(
        s,
        "a failed liveness probe restarts the container",
        60,
        || {
            let p = app();
            let c = &p["status"]["containerStatuses"][0];
            match (&c["restartCount"], &c["state"]["running"]) {
                (Value::Number(n), running) if n.as_u64() == Some(1) && running.is_object() => {
                    Ok(())
                }
                _ => Err(format!("{c}")),
            }
        },
    )
    .await;
    let killing = events("Killing");
    assert!(
        killing.contains(&"Container app failed liveness probe, will be restarted".to_string()),
        "{killing:?}"
    );
    // The preStop hook runs before the container stops, for a liveness kill as for a
    // deletion: the listener logs its request each time (busybox's httpd -v logs each answer
    // with the asker's address).
    let probed_ip = app()["status"]["podIP"].as_str().unwrap().to_string();
    let from_probed = format!(":{probed_ip}]:");
    let hooked = || {
        let logs = cluster.kubectl(&["logs", "listener"]);
        logs.lines()
            .filter(|l| l.contains(&from_probed) && l.ends_with("response:200"))
            .count()
    };
    assert_eq!(hooked(), 1, "the liveness kill's preStop request");
    cluster.kubectl(&["delete", "pod", "probed", "--wait=true"]);
    assert_eq!(hooked(), 2, "the deletion's preStop request");
    // busybox's httpd, PID 1 of its container, ignores SIGTERM: a short grace period.
    cluster.kubectl(&[
        "delete",
        "pod",
        "listener",
        "--grace-period=1",
        "--wait=true",
    ]);
}

/// `kubectl attach -i` to a Pod's own process, with both kubectls: what it reads from the
/// attached stdin it answers on the attached stdout, and kubectl ends when the process does.
async fn attach_to_a_pod(s: &Session, cluster: &Workload<'_>, busybox: &str) {
    use std::io::Write;
    for (i, kubectl) in crate::common::management::all_kubectls().iter().enumerate() {
        let name = format!("reader-{i}");
        cluster.kubectl(&[
            "run",
            &name,
            "--image",
            busybox,
            "--restart=Never",
            "--stdin",
            "--attach=false",
            "--",
            "sh",
            "-c",
            "read line; echo \"got $line\"",
        ]);
        wait(s, &format!("{name} runs"), 90, || {
            match cluster.state(&name).0.as_str() {
                "running" => Ok(()),
                other => Err(other.to_string()),
            }
        })
        .await;
        let mut attach = Command::new("timeout")
            .args([
                "60",
                kubectl,
                "--kubeconfig",
                &cluster.kubeconfig,
                "attach",
                "-i",
                &name,
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        attach.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let out = attach.wait_with_output().unwrap();
        assert!(
            text(&out.stdout).contains("got hello"),
            "{kubectl} attach: {} {}",
            text(&out.stdout),
            text(&out.stderr)
        );
        wait(s, &format!("{name} completes"), 30, || {
            match cluster.state(&name) {
                (state, reason) if state == "terminated" && reason == "Completed" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        cluster.kubectl(&["delete", "pod", &name, "--wait=true"]);
    }
}

/// ClientIP session affinity keeps a Pod's requests on one endpoint, and a `hostNetwork` Pod
/// reaches a Service by its cluster IP as kube-proxy's node rules let it.
async fn services_beyond_the_basics(
    s: &Session,
    cluster: &Workload<'_>,
    busybox: &str,
    asker: &str,
    web: &[&String],
) {
    let cluster_ip = cluster.json(&["get", "service", "web"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let affinity = |value: &str| {
        let patch = format!(r#"{{"spec": {{"sessionAffinity": "{value}"}}}}"#);
        cluster.kubectl(&["patch", "service", "web", "-p", &patch]);
    };
    affinity("ClientIP");
    wait(s, "the web Service keeps the asker on one Pod", 60, || {
        let mut answered = std::collections::BTreeSet::new();
        for _ in 0..8 {
            let url = format!("http://{cluster_ip}/hostname");
            answered.insert(fetch_from_pod(asker, "busybox", &url)?);
        }
        match answered.len() {
            1 => Ok(()),
            _ => Err(format!("8 requests reached {answered:?}")),
        }
    })
    .await;
    affinity("None");
    let host = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-host"},
        "spec": {
            "hostNetwork": true, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": busybox, "command": ["sleep", "3600"]}],
        },
    });
    let path = s.dir.join("on-host.json");
    std::fs::write(&path, host.to_string()).unwrap();
    cluster.kubectl(&["apply", "-f", &path.display().to_string()]);
    wait(s, "the hostNetwork Pod reaches the web Service", 90, || {
        let url = format!("http://{cluster_ip}/hostname");
        let out = s.run(
            &crate::common::quickstart::kubectl_binary(),
            &[
                "--kubeconfig",
                &cluster.kubeconfig,
                "exec",
                "on-host",
                "--",
                // wget's own -T crashes Debian's static busybox.
                "timeout",
                "5",
                "wget",
                "-q",
                "-O",
                "-",
                &url,
            ],
        );
        let answer = text(&out.stdout).trim().to_string();
        match web.iter().any(|w| **w == answer) {
            true => Ok(()),
            false => Err(format!("{answer:?} {}", text(&out.stderr))),
        }
    })
    .await;
    cluster.kubectl(&["delete", "pod", "on-host", "--wait=true"]);
}

/// A running Pod's configMap and downwardAPI volumes follow what they project, as kubelet
/// updates them: a key changed and one removed in the ConfigMap, a label added to the Pod;
/// the files live behind `..data`, which names the directory they are in now.
async fn volumes_follow_their_sources(s: &Session, cluster: &Workload<'_>, busybox: &str) {
    cluster.kubectl(&[
        "create",
        "configmap",
        "greeting",
        "--from-literal=message=hello",
        "--from-literal=farewell=bye",
    ]);
    let reader = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mounts", "labels": {"app": "mounts"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": busybox, "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "greeting", "mountPath": "/etc/greeting"},
                                 {"name": "info", "mountPath": "/etc/info"}],
            }],
            "volumes": [
                {"name": "greeting", "configMap": {"name": "greeting"}},
                {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            ],
        },
    });
    let path = s.dir.join("mounts.json");
    std::fs::write(&path, reader.to_string()).unwrap();
    cluster.kubectl(&["apply", "-f", &path.display().to_string()]);
    wait(s, "the mounts Pod runs", 90, || {
        match cluster.state("mounts").0.as_str() {
            "running" => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await;
    let read = |command: &str| cluster.kubectl(&["exec", "mounts", "--", "sh", "-c", command]);
    assert_eq!(read("cat /etc/greeting/message"), "hello");
    assert_eq!(read("ls /etc/greeting"), "farewell\nmessage\n");
    let first = read("readlink /etc/greeting/..data");
    assert!(first.starts_with("..20"), "{first}");
    cluster.kubectl(&[
        "patch",
        "configmap",
        "greeting",
        "--type=merge",
        "-p",
        r#"{"data": {"message": "bonjour", "farewell": null}}"#,
    ]);
    cluster.kubectl(&["label", "pod", "mounts", "tier=gold"]);
    wait(s, "the volumes show the new content", 60, || {
        let now = read("cat /etc/greeting/message; echo; ls /etc/greeting; cat /etc/info/labels");
        match now.contains("bonjour\nmessage\n") && now.contains("tier=\"gold\"") {
            true => Ok(()),
            false => Err(now),
        }
    })
    .await;
    assert_ne!(read("readlink /etc/greeting/..data"), first);
    assert_eq!(
        read("ls -a /etc/greeting | grep -c '^\\.\\.20'"),
        "1\n",
        "the old directory is gone"
    );
    cluster.kubectl(&["delete", "pod", "mounts", "--wait=true"]);
    cluster.kubectl(&["delete", "configmap", "greeting"]);
}

/// The names of the Machines of the cluster's MachinePools.
fn pool_machines(s: &Session) -> Vec<String> {
    s.json(&["get", "machines", "-l", "cluster.x-k8s.io/pool-name"])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["metadata"]["name"].as_str().map(String::from))
        .collect()
}

/// The quick-start class's `machinePools` class on Docker: a pool of the topology comes up
/// with a container and a Node per instance, grows to two, replaces its instances when its back
/// end changes, and goes when the topology drops it.
async fn pool_on_docker(s: &Session) {
    let set_pools = |pools: serde_json::Value| {
        let patch = json!({"spec": {"topology": {"workers": {"machinePools": pools}}}});
        s.kubectl(&[
            "patch",
            "cluster",
            &s.cluster,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ]);
    };
    let pool_ready = |n: i64| {
        move || {
            let pools = s.json(&["get", "machinepools"]);
            let pool = pools["items"].get(0).ok_or("no MachinePool yet")?;
            let status = &pool["status"];
            let machines = s.json(&["get", "machines", "-l", "cluster.x-k8s.io/pool-name"]);
            let with_node = machines["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["status"]["nodeRef"]["name"].is_string())
                .count() as i64;
            if status["readyReplicas"] == n && status["replicas"] == n && with_node == n {
                Ok(())
            } else {
                Err(format!(
                    "MachinePool status: {status}; Machines with a Node: {with_node}"
                ))
            }
        }
    };
    set_pools(json!([{"class": "default-worker", "name": "mp-0", "replicas": 1}]));
    wait(
        s,
        "the pool runs one instance with its Node",
        300,
        pool_ready(1),
    )
    .await;
    let pool = &s.json(&["get", "machinepools"])["items"][0];
    let infra = pool["spec"]["template"]["spec"]["infrastructureRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let dev_pool = s.json(&["get", "devmachinepool", &infra]);
    assert_eq!(
        dev_pool["spec"]["backend"]["docker"]["customImage"], "kindest/node:v1.28.13",
        "the class's machinePool patch reached the pool: {dev_pool}"
    );
    set_pools(json!([{"class": "default-worker", "name": "mp-0", "replicas": 2}]));
    wait(
        s,
        "the pool runs two instances with their Nodes",
        300,
        pool_ready(2),
    )
    .await;
    assert_eq!(
        s.json(&["get", "devmachinepool", &infra])["spec"]["providerIDList"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // The pool's back end changes: each instance is replaced, new ones first.
    let before = pool_machines(s);
    let mount =
        json!({"containerPath": "/var/run/docker.sock", "hostPath": "/var/run/docker.sock"});
    let changed = json!({"spec": {"backend": {"docker": {"extraMounts": [mount]}}}});
    s.kubectl(&[
        "patch",
        "devmachinepool",
        &infra,
        "--type=merge",
        "-p",
        &changed.to_string(),
    ]);
    wait(s, "the pool's instances are replaced", 300, || {
        pool_ready(2)()?;
        let now = pool_machines(s);
        if now.iter().any(|m| before.contains(m)) {
            Err(format!("old instances left: {now:?} (before: {before:?})"))
        } else {
            Ok(())
        }
    })
    .await;
    set_pools(json!([]));
    wait(s, "the pool and its containers are gone", 300, || {
        let pools = s.json(&["get", "machinepools"]);
        let left = s
            .containers()
            .into_iter()
            .filter(|c| c.contains("-mp-0-"))
            .collect::<Vec<_>>();
        if pools["items"].as_array().is_some_and(Vec::is_empty) && left.is_empty() {
            Ok(())
        } else {
            Err(format!("pools: {}, containers: {left:?}", pools["items"]))
        }
    })
    .await;
}

/// Upstream's ClusterClass quick-start (`cluster-template-development.yaml` with the
/// `quick-start` class and its Dev kinds, patches and variables) applied unchanged: the
/// topology controller makes the objects, the Docker back end of the Dev kinds runs them.
/// Then, in the same management cluster, capictl's own Docker topology flavor (its
/// ClusterClass on the Docker kinds, written before the Cluster by `--flavor topology`), and
/// its development-mp flavor, whose workers are a MachinePool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_class_quick_starts_come_up_on_docker() {
    let s = Session::start("cc", "v1.28.13").await;
    // Up, both nodes Ready through the load balancer at 127.0.0.1, then deleted to the last
    // container.
    let up_and_gone = async |s: &Session| {
        s.wait_available(400).await;
        let workload = s.dir.join("workload.conf").display().to_string();
        s.capictl(&["get", "kubeconfig", &s.cluster, "--write-to", &workload]);
        assert!(
            std::fs::read_to_string(&workload)
                .unwrap()
                .contains("server: https://127.0.0.1:")
        );
        all_nodes_ready(s, &workload, 2).await;
        // The ClusterResourceSet's DaemonSet came with the cluster and runs on both nodes.
        let cluster = Workload {
            session: s,
            kubeconfig: workload.clone(),
        };
        wait(
            s,
            "the resource set's DaemonSet runs on both nodes",
            120,
            || {
                let ds =
                    cluster.try_json(&["get", "daemonset", "-n", "kube-system", "node-agent"])?;
                let status = &ds["status"];
                if status["desiredNumberScheduled"] == 2 && status["numberReady"] == 2 {
                    Ok(())
                } else {
                    Err(format!("DaemonSet status: {status}"))
                }
            },
        )
        .await;
        let binding = s.json(&["get", "clusterresourcesetbinding", &s.cluster]);
        assert_eq!(
            binding["spec"]["bindings"][0]["resources"][0]["applied"], true,
            "{binding}"
        );
        s.kubectl(&["delete", "cluster", &s.cluster, "--timeout=180s"]);
        assert_eq!(
            s.containers(),
            Vec::<String>::new(),
            "no container of the cluster is left"
        );
        assert!(
            s.json(&["get", "clusterresourcesetbindings"])["items"]
                .as_array()
                .unwrap()
                .is_empty(),
            "the binding went with its Cluster"
        );
    };
    // Every Cluster labelled `node-agent: busybox` gets a DaemonSet on each of its nodes, as
    // a CNI is installed with a ClusterResourceSet.
    let busybox = busybox_image();
    let daemon_set = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-agent"}},
            "template": {
                "metadata": {"labels": {"app": "node-agent"}},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "agent", "image": busybox, "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}],
                },
            },
        },
    });
    let resource_set = json!({"apiVersion": "v1", "kind": "List", "items": [
        {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "node-agent", "namespace": "default"},
            "data": {"agent.json": daemon_set.to_string()},
        },
        {
            "apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
            "metadata": {"name": "node-agent", "namespace": "default"},
            "spec": {
                "clusterSelector": {"matchLabels": {"node-agent": "busybox"}},
                "resources": [{"name": "node-agent", "kind": "ConfigMap"}],
            },
        },
    ]});
    let resource_set_file = s.dir.join("resource-set.json");
    std::fs::write(&resource_set_file, resource_set.to_string()).unwrap();
    s.kubectl(&["apply", "-f", resource_set_file.to_str().unwrap()]);
    let label = |s: &Session| {
        s.kubectl(&["label", "cluster", &s.cluster, "node-agent=busybox"]);
    };

    let class = crate::common::upstream("templates/clusterclass-quick-start.yaml");
    s.kubectl(&["apply", "-n", "default", "-f", class.to_str().unwrap()]);
    let template = crate::common::upstream("templates/cluster-template-development.yaml");
    s.apply_generated(&["--from", template.to_str().unwrap()], "v1.28.13", 1, 1);
    label(&s);
    s.wait_available(400).await;
    // The patches reached the objects: kind's node image asked for (capictl's ran instead),
    // the Pod Security admission configuration on the control plane.
    let machines = s.json(&["get", "devmachines"]);
    let machines = machines["items"].as_array().unwrap();
    assert_eq!(machines.len(), 2);
    for m in machines {
        assert_eq!(
            m["spec"]["backend"]["docker"]["customImage"], "kindest/node:v1.28.13",
            "{m}"
        );
    }
    // Its machine templates report the Docker host's resources, for scaling from zero.
    let templates = s.json(&["get", "devmachinetemplates"]);
    for t in templates["items"].as_array().unwrap() {
        let capacity = &t["status"]["capacity"];
        let cpus: u32 = capacity["cpu"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0);
        let memory: u64 = capacity["memory"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0);
        assert!(cpus >= 1 && memory > 1 << 20, "{t}");
    }
    let kcp = &s.json(&["get", "kcp"])["items"][0];
    assert!(
        kcp["spec"]["kubeadmConfigSpec"]["files"]
            .to_string()
            .contains("PodSecurityConfiguration"),
        "{kcp}"
    );
    pool_on_docker(&s).await;
    up_and_gone(&s).await;

    // capictl's Docker topology flavor written in v1beta1, as a v1.10 user's repository has
    // it: every Docker, kubeadm and core kind converts on its way in.
    let generated = s.dir.join("topology.yaml");
    std::fs::write(
        &generated,
        s.capictl(&[
            "generate",
            "cluster",
            &s.cluster,
            "--infrastructure",
            "docker",
            "--flavor",
            "topology",
            "--kubernetes-version",
            "v1.28.13",
            "--control-plane-machine-count",
            "1",
            "--worker-machine-count",
            "1",
            "--target-namespace",
            "default",
        ]),
    )
    .unwrap();
    let v1beta1 = s.capictl(&[
        "convert",
        "-f",
        generated.to_str().unwrap(),
        "--to",
        "v1beta1",
    ]);
    for kind in [
        "DockerClusterTemplate",
        "DockerMachineTemplate",
        "KubeadmControlPlaneTemplate",
        "ClusterClass",
        "Cluster",
    ] {
        assert!(
            v1beta1.contains(&format!("/v1beta1\nkind: {kind}\n")),
            "{kind} in v1beta1:\n{v1beta1}"
        );
    }
    let written = s.dir.join("topology-v1beta1.yaml");
    std::fs::write(&written, v1beta1).unwrap();
    s.kubectl(&["apply", "-f", written.to_str().unwrap()]);
    label(&s);
    s.wait_available(400).await;
    let c = s.json(&["get", "cluster", &s.cluster]);
    assert_eq!(c["spec"]["infrastructureRef"]["kind"], "DockerCluster");
    assert_eq!(
        s.json(&["get", "dockermachines"])["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    up_and_gone(&s).await;

    // The development-mp flavor: its workers are a MachinePool on a DockerMachinePool, one
    // instance here, a DockerMachine.
    s.apply_generated(&["--flavor", "development-mp"], "v1.28.13", 1, 1);
    label(&s);
    s.wait_available(400).await;
    let pool = format!("{}-mp-0", s.cluster);
    wait(&s, "the pool's instance Ready with its Node", 180, || {
        let p = s.json(&["get", "machinepool", &pool]);
        let status = &p["status"];
        let nodes = status["nodeRefs"].as_array().map_or(0, Vec::len);
        let infra = s.json(&["get", "dockermachinepool", &pool]);
        let kind = &infra["status"]["infrastructureMachineKind"];
        if status["readyReplicas"] == 1 && nodes == 1 && kind == "DockerMachine" {
            Ok(())
        } else {
            Err(format!(
                "MachinePool status: {status}; instances' kind {kind}"
            ))
        }
    })
    .await;
    let instances = s.json(&["get", "dockermachines", "-l", "cluster.x-k8s.io/pool-name"]);
    assert_eq!(
        instances["items"].as_array().map(Vec::len),
        Some(1),
        "{instances}"
    );
    up_and_gone(&s).await;
}

/// The fewest ready endpoints a Service had, read every half second until stopped.
struct EndpointWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<usize>,
}

impl EndpointWatch {
    fn start(kubeconfig: &str, service: &str) -> EndpointWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (kubeconfig, service, stopped) =
            (kubeconfig.to_string(), service.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut fewest = usize::MAX;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let out = Command::new(kubectl_binary())
                    .args(["--kubeconfig", &kubeconfig, "get", "endpointslices", "-l"])
                    .arg(format!("kubernetes.io/service-name={service}"))
                    .args(["-o", "json"])
                    .output()
                    .unwrap();
                if let Ok(slices) = serde_json::from_slice::<Value>(&out.stdout) {
                    let ready = slices["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                        .filter(|e| e["conditions"]["ready"] == json!(true))
                        .count();
                    fewest = fewest.min(ready);
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            fewest
        });
        EndpointWatch { stop, thread }
    }

    fn stop(self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// What `kubectl port-forward` to `port` of `pod` fetches from `path`, over HTTP/1.0.
fn through_port_forward(
    kubectl: &str,
    kubeconfig: &str,
    pod: &str,
    port: u16,
    path: &str,
) -> Result<String, String> {
    use std::io::{BufRead, Read, Write};
    let mut forward = Command::new(kubectl)
        .args(["--kubeconfig", kubeconfig, "port-forward"])
        .arg(format!("pod/{pod}"))
        .arg(format!(":{port}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // "Forwarding from 127.0.0.1:40123 -> 8080". The pipe stays open while kubectl runs: it
    // writes a second line, and a closed pipe would end it.
    let mut stdout = std::io::BufReader::new(forward.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let local = line
        .split_whitespace()
        .nth(2)
        .map(str::to_string)
        .ok_or(format!("kubectl port-forward said {line:?}"));
    let answer = local.and_then(|local| {
        let mut stream = std::net::TcpStream::connect(&local).map_err(|e| e.to_string())?;
        write!(stream, "GET {path} HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .map_err(|e| format!("{e} after {:?}", text(&response)))?;
        Ok(text(&response)
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .trim()
            .to_string())
    });
    let _ = forward.kill();
    drop(stdout);
    let output = forward.wait_with_output().unwrap();
    answer.map_err(|e| format!("{e}; kubectl said: {}", text(&output.stderr)))
}
