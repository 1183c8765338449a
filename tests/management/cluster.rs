//! The embedded management cluster as a user meets it: `capictl management up` in the
//! background, then real kubectl (current and 1.20) and the Python kubernetes client.

use crate::common::management::*;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The YAML documents of the seed's quick start.
fn seed_yaml() -> String {
    let path = crate::common::shared("seeds/000_77626d998c6405e5.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<&str> = text
        .split("\n\n")
        .map(str::trim)
        .filter(|b| b.starts_with("apiVersion:"))
        .collect();
    docs.join("\n---\n")
}

#[test]
fn the_quick_start_objects_with_kubectl() {
    let seed = seed_yaml();
    for kubectl in all_kubectls() {
        quick_start_with(Management::up_with(kubectl), &seed);
    }
}

/// Removes the containers the Docker provider made for the seed's cluster (its controllers
/// run in the management cluster once the CRDs are installed), whatever the test's outcome.
struct SeedContainers;

impl Drop for SeedContainers {
    fn drop(&mut self) {
        let listed = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                "label=io.x-k8s.capictl.cluster=default/capi-quickstart",
            ])
            .output();
        if let Ok(out) = listed {
            for id in text(&out.stdout).split_whitespace() {
                let _ = Command::new("docker").args(["rm", "-f", "-v", id]).output();
            }
        }
    }
}

fn quick_start_with(m: Management, seed: &str) {
    let _containers = SeedContainers;
    m.kubectl(&["create", "namespace", "team-a"]);
    assert!(m.kubectl(&["get", "namespaces"]).contains("team-a"));

    let crds = capictl(&["generate", "crds"]);
    assert!(crds.status.success());
    let applied = m.kubectl_in(&["apply", "-f", "-"], Some(&text(&crds.stdout)));
    assert!(
        applied.contains(
            "customresourcedefinition.apiextensions.k8s.io/clusters.cluster.x-k8s.io created"
        ),
        "{applied}"
    );
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/clusters.cluster.x-k8s.io",
        "--timeout=10s",
    ]);

    let applied = m.kubectl_in(&["apply", "-f", "-"], Some(seed));
    for line in [
        "cluster.cluster.x-k8s.io/capi-quickstart created",
        "dockercluster.infrastructure.cluster.x-k8s.io/quick-start-cluster created",
        "dockermachinetemplate.infrastructure.cluster.x-k8s.io/quickstart-control-plane-template created",
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/quickstart-control-plane created",
    ] {
        assert!(applied.contains(line), "{applied}");
    }
    // Applying again changes nothing.
    let again = m.kubectl_in(&["apply", "-f", "-"], Some(seed));
    assert!(
        again.contains("cluster.cluster.x-k8s.io/capi-quickstart unchanged"),
        "{again}"
    );

    // The columns upstream's CRDs print.
    let table = m.kubectl(&["get", "clusters"]);
    let header = table.lines().next().unwrap();
    for column in [
        "NAME",
        "CLUSTERCLASS",
        "AVAILABLE",
        "CP DESIRED",
        "CP AVAILABLE",
        "W DESIRED",
        "W AVAILABLE",
        "PHASE",
        "AGE",
        "VERSION",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        m.kubectl(&["get", "clusters", "-o", "wide"])
            .lines()
            .next()
            .unwrap()
            .contains("CP CURRENT")
    );
    assert!(
        m.kubectl(&["get", "kcp"]).contains("v1.28.13"),
        "short names work"
    );
    let yaml = m.kubectl(&["get", "cluster", "capi-quickstart", "-o", "yaml"]);
    assert!(
        yaml.contains("name: quickstart-control-plane") && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&m.kubectl(&["get", "kcp", "quickstart-control-plane", "-o", "json"]))
            .unwrap();
    assert_eq!(
        json["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["certSANs"][3],
        "host.docker.internal"
    );

    // A watch sees a later patch.
    let mut watch = m
        .kubectl_command(&[
            "get",
            "kcp",
            "quickstart-control-plane",
            "-w",
            "-o",
            "jsonpath={.spec.version}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    m.kubectl(&[
        "patch",
        "kubeadmcontrolplane",
        "quickstart-control-plane",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"version":"v1.29.10"}}"#,
    ]);
    let stdout = watch.stdout.take().unwrap();
    let seen = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("v1.29.10"))
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !seen.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        seen.join().unwrap().as_deref(),
        Some("v1.29.10"),
        "kubectl get -w saw the patch"
    );

    let generation = || {
        m.kubectl(&[
            "get",
            "cluster",
            "capi-quickstart",
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .parse::<i64>()
        .unwrap()
    };
    let before = generation();
    m.kubectl(&[
        "patch",
        "cluster",
        "capi-quickstart",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/spec/paused","value":true}]"#,
    ]);
    // A spec change counts a generation (the controllers, which run here because the CRDs
    // are installed, may have counted some before: paused, they stop); metadata changes do not.
    let paused = generation();
    assert!(paused > before, "{paused} after {before}");
    m.kubectl(&["label", "cluster", "capi-quickstart", "env=dev"]);
    m.kubectl(&["annotate", "cluster", "capi-quickstart", "owner=platform"]);
    let got = m.kubectl(&["get", "cluster", "-l", "env=dev", "-o", "jsonpath={.items[0].spec.paused} {.items[0].metadata.annotations.owner} {.items[0].metadata.generation}"]);
    assert_eq!(got, format!("true platform {paused}"));

    m.kubectl(&["scale", "kcp", "quickstart-control-plane", "--replicas=3"]);
    assert_eq!(
        m.kubectl(&[
            "get",
            "kcp",
            "quickstart-control-plane",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );

    // A finalizer holds the deletion; `kubectl wait --for=delete` sees the object go once the
    // finalizer is removed.
    m.kubectl(&[
        "patch",
        "dockercluster",
        "quick-start-cluster",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["test.capictl.io/hold"]}}"#,
    ]);
    let deleted = m.kubectl(&[
        "delete",
        "dockercluster",
        "quick-start-cluster",
        "--wait=false",
    ]);
    assert!(deleted.contains("deleted"), "{deleted}");
    let stamp = m.kubectl(&[
        "get",
        "dockercluster",
        "quick-start-cluster",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(
        !stamp.is_empty(),
        "a deletionTimestamp while the finalizer holds it"
    );
    let waiter = m
        .kubectl_command(&[
            "wait",
            "--for=delete",
            "dockercluster/quick-start-cluster",
            "--timeout=20s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    m.kubectl(&[
        "patch",
        "dockercluster",
        "quick-start-cluster",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let waited = waiter.wait_with_output().unwrap();
    assert!(
        waited.status.success(),
        "kubectl wait: {}",
        text(&waited.stderr)
    );
    let gone = m
        .kubectl_command(&["get", "dockercluster", "quick-start-cluster"])
        .output()
        .unwrap();
    assert!(!gone.status.success());
    assert!(
        text(&gone.stderr).contains("not found"),
        "{}",
        text(&gone.stderr)
    );

    // Every object is still there after `management down` and `up` on the same directory.
    let before = m.kubectl(&[
        "get",
        "clusters,kcp,dockermachinetemplates,namespaces",
        "-A",
        "-o",
        "name",
    ]);
    assert!(m.down().contains("stopped"));
    let again = m.start();
    assert!(again.contains("started"), "{again}");
    let after = m.kubectl(&[
        "get",
        "clusters,kcp,dockermachinetemplates,namespaces",
        "-A",
        "-o",
        "name",
    ]);
    assert_eq!(before, after);
    assert_eq!(
        m.kubectl(&[
            "get",
            "kcp",
            "quickstart-control-plane",
            "-o",
            "jsonpath={.spec.version}"
        ]),
        "v1.29.10"
    );
}

#[test]
fn up_twice_says_it_runs_and_status_reports() {
    let m = Management::up();
    let second = m.start();
    assert!(second.contains("already running"), "{second}");
    // The four namespaces and their default ServiceAccounts, the default/kubernetes Service,
    // the bootstrap RBAC policy, an APIService for every built-in group version, and the
    // management cluster's identity (its controllers make it as they start, so it may come a
    // moment after the server answers).
    let api_services: usize = capictl::apiserver::builtin::registry()
        .group_versions()
        .iter()
        .map(|(_, versions)| versions.len())
        .sum();
    let objects = 4 + 4 + 1 + capictl::apiserver::authz::default_policy().len() + api_services + 1;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = capictl(&["management", "status", "--dir", &m.state()]);
        let out = text(&status.stdout);
        if out.contains("running")
            && out.contains("https://127.0.0.1:")
            && out.contains(&format!("Objects: {objects}"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{objects} objects wanted:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The Service in-cluster clients look for, as every cluster has it.
    assert_eq!(
        m.kubectl(&[
            "get",
            "service",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP} {.spec.ports[0].port}"
        ]),
        "10.96.0.1 443"
    );
    let mode = std::fs::metadata(m.kubeconfig()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        mode.permissions().mode() & 0o777,
        0o600,
        "the kubeconfig holds a private key"
    );
    m.down();
    let status = capictl(&["management", "status", "--dir", &m.state()]);
    assert!(text(&status.stdout).contains("not running"));
}

#[test]
fn requests_without_valid_credentials_are_refused() {
    let m = Management::up();
    let server = m.server();
    // A bearer token is not a credential this server accepts: only its client certificates are.
    let refused = Command::new(&m.kubectl)
        .args([
            "--kubeconfig",
            "/dev/null",
            "--server",
            &server,
            "--insecure-skip-tls-verify",
            "--token",
            "guess",
            "get",
            "namespaces",
        ])
        .env("HOME", m.dir.join("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("You must be logged in to the server"),
        "{}",
        text(&refused.stderr)
    );
    // The health and version endpoints answer anyone.
    let health = Command::new(&m.kubectl)
        .args([
            "--kubeconfig",
            "/dev/null",
            "--server",
            &server,
            "--insecure-skip-tls-verify",
            "--token",
            "guess",
            "get",
            "--raw",
            "/healthz",
        ])
        .env("HOME", m.dir.join("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(text(&health.stdout), "ok", "{}", text(&health.stderr));
}

#[test]
fn kubectl_create_sends_protobuf_for_built_in_kinds() {
    let m = Management::up();
    m.kubectl(&["create", "namespace", "apps"]);
    m.kubectl(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "apps",
        "--from-literal=password=s3cret",
    ]);
    m.kubectl(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "apps",
        "--from-literal=mode=fast",
    ]);
    m.kubectl(&["create", "serviceaccount", "robot", "-n", "apps"]);
    assert_eq!(
        m.kubectl(&[
            "get",
            "secret",
            "creds",
            "-n",
            "apps",
            "-o",
            "jsonpath={.type} {.data.password}"
        ]),
        "Opaque czNjcmV0"
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "apps",
            "-o",
            "jsonpath={.data.mode}"
        ]),
        "fast"
    );
    let table = m.kubectl(&["get", "secrets", "-n", "apps"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .eq(["NAME", "TYPE", "DATA", "AGE"]),
        "{table}"
    );
    // Every imperative `kubectl create` of a kind the server serves sends protobuf.
    let creates: &[&[&str]] = &[
        &[
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=80",
        ],
        &["service", "clusterip", "web", "--tcp=80:8080"],
        &[
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ],
        &["role", "reader", "--verb=get,list", "--resource=configmaps"],
        &["rolebinding", "readers", "--role=reader", "--user=alice"],
        &[
            "clusterrole",
            "watcher",
            "--verb=watch",
            "--resource=secrets",
        ],
        &[
            "clusterrolebinding",
            "watchers",
            "--clusterrole=watcher",
            "--group=ops",
        ],
        &["job", "once", "--image=busybox", "--", "date"],
        &[
            "cronjob",
            "nightly",
            "--image=busybox",
            "--schedule=0 3 * * *",
            "--",
            "date",
        ],
        &["ingress", "site", "--rule=example.com/=web:80"],
        &[
            "priorityclass",
            "important",
            "--value=1000",
            "--description=first",
        ],
        &["quota", "small", "--hard=pods=10,cpu=2"],
    ];
    for args in creates {
        let mut all = vec!["create", "-n", "apps"];
        all.extend_from_slice(args);
        m.kubectl(&all);
    }
    let got = |what: &str, path: &str| {
        m.kubectl(&["get", what, "-n", "apps", "-o", &format!("jsonpath={path}")])
    };
    assert_eq!(
        got(
            "deployment/web",
            "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.selector.matchLabels.app}"
        ),
        "2 nginx:1.27 80 web"
    );
    assert_eq!(
        got(
            "service/web",
            "{.spec.ports[0].port} {.spec.ports[0].targetPort}"
        ),
        "80 8080"
    );
    assert_eq!(got("pdb/web", "{.spec.minAvailable}"), "1");
    assert_eq!(got("role/reader", "{.rules[0].verbs}"), r#"["get","list"]"#);
    assert_eq!(got("rolebinding/readers", "{.subjects[0].name}"), "alice");
    assert_eq!(
        got(
            "clusterrolebinding/watchers",
            "{.roleRef.name} {.subjects[0].name}"
        ),
        "watcher ops"
    );
    assert_eq!(
        got("job/once", "{.spec.template.spec.containers[0].command}"),
        r#"["date"]"#
    );
    assert_eq!(got("cronjob/nightly", "{.spec.schedule}"), "0 3 * * *");
    assert_eq!(
        got(
            "ingress/site",
            "{.spec.rules[0].host} {.spec.rules[0].http.paths[0].backend.service.port.number}"
        ),
        "example.com 80"
    );
    assert_eq!(got("priorityclass/important", "{.value}"), "1000");
    assert_eq!(got("quota/small", "{.spec.hard.cpu}"), "2");
    m.kubectl(&["delete", "namespace", "apps"]);
    assert!(
        !m.kubectl(&["get", "namespaces", "-o", "name"])
            .contains("namespace/apps")
    );
}

#[test]
fn the_python_kubernetes_client() {
    let python = std::env::var("PYTHON_KUBERNETES").expect(
        "set PYTHON_KUBERNETES to a python with the kubernetes package (scripts/test does)",
    );
    let m = Management::up();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let out = Command::new(python)
        .arg(script)
        .env("KUBECONFIG", m.kubeconfig())
        .env("HOME", m.dir.join("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("watch: ok"),
        "{}",
        text(&out.stdout)
    );
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, enum: [red, blue], default: blue}
"#;

#[test]
fn schemas_default_validate_and_prune_with_kubectl() {
    let m = Management::up();
    m.kubectl_in(&["apply", "-f", "-"], Some(WIDGET_CRD));
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=10s",
    ]);
    let widget = |spec: &str| {
        format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec: {spec}\n")
    };

    // Defaults are applied.
    m.kubectl_in(&["apply", "-f", "-"], Some(&widget("{size: 3}")));
    assert_eq!(
        m.kubectl(&["get", "widget", "w", "-o", "jsonpath={.spec.color}"]),
        "blue"
    );

    // Invalid values are refused with 422 naming the field; nothing changes.
    let refused = m
        .kubectl_command(&["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = feed(refused, &widget("{size: 30, color: green}"));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("is invalid") && err.contains("spec.size") && err.contains("spec.color"),
        "{err}"
    );
    assert_eq!(
        m.kubectl(&["get", "widget", "w", "-o", "jsonpath={.spec.size}"]),
        "3"
    );

    // kubectl asks for strict field validation: an unknown field is an error...
    let strict = m
        .kubectl_command(&["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = feed(strict, &widget("{size: 4, shape: round}"));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("unknown field \"spec.shape\""),
        "{}",
        text(&out.stderr)
    );
    // ...and with --validate=false the field is pruned.
    m.kubectl_in(
        &["apply", "--validate=false", "-f", "-"],
        Some(&widget("{size: 4, shape: round}")),
    );
    let spec = m.kubectl(&["get", "widget", "w", "-o", "jsonpath={.spec}"]);
    assert!(
        spec.contains("\"size\":4") && !spec.contains("shape"),
        "{spec}"
    );
}

fn feed(mut child: std::process::Child, input: &str) -> Output {
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn cascading_deletion_with_kubectl() {
    let m = Management::up();
    for cascade in ["background", "foreground", "orphan"] {
        m.kubectl(&["create", "configmap", "owner"]);
        let uid = m.kubectl(&[
            "get",
            "configmap",
            "owner",
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        let child = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: owner\n    uid: {uid}\n    blockOwnerDeletion: true\n"
        );
        m.kubectl_in(&["apply", "-f", "-"], Some(&child));
        m.kubectl(&[
            "delete",
            "configmap",
            "owner",
            &format!("--cascade={cascade}"),
        ]);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let child_left = loop {
            let names = m.kubectl(&["get", "configmaps", "-o", "name"]);
            let settled = match cascade {
                "orphan" => !names.contains("configmap/owner"),
                _ => !names.contains("configmap/child"),
            };
            if settled || std::time::Instant::now() > deadline {
                break names.contains("configmap/child");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(child_left, cascade == "orphan", "--cascade={cascade}");
        assert!(
            !m.kubectl(&["get", "configmaps", "-o", "name"])
                .contains("configmap/owner"),
            "--cascade={cascade}"
        );
        if child_left {
            let refs = m.kubectl(&[
                "get",
                "configmap",
                "child",
                "-o",
                "jsonpath={.metadata.ownerReferences}",
            ]);
            assert!(
                refs.is_empty(),
                "an orphan keeps no reference to its owner: {refs}"
            );
            m.kubectl(&["delete", "configmap", "child"]);
        }
    }
}

#[test]
fn upstream_crds_apply_cleanly() {
    let dir = crate::common::upstream("crds");
    let m = Management::up();
    let out = m.kubectl(&["apply", "--server-side", "-f", dir.to_str().unwrap()]);
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("serverside-applied"))
            .count(),
        15,
        "{out}"
    );
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--all",
        "crd",
        "--timeout=10s",
    ]);
    // Upstream's CRDs serve v1beta1 too; the seed's objects are accepted by their schemas.
    let applied = m.kubectl_in(&["apply", "-f", "-"], Some(&seed_yaml()));
    assert!(
        applied.contains(
            "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/quickstart-control-plane created"
        ),
        "{applied}"
    );
    assert!(
        m.kubectl(&["api-resources", "--api-group=cluster.x-k8s.io"])
            .contains("machinedeployments")
    );
}

#[test]
fn server_side_apply_with_kubectl() {
    let m = Management::up();
    let manifest = |replicas: u32| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    team: a\ndata:\n  replicas: \"{replicas}\"\n  mode: fast\n"
        )
    };
    let out = m.kubectl_in(
        &["apply", "--server-side", "--field-manager=alice", "-f", "-"],
        Some(&manifest(1)),
    );
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let managers = m.kubectl(&[
        "get",
        "configmap",
        "settings",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ]);
    assert_eq!(managers, "alice");

    // Another manager changing alice's field conflicts...
    let conflict = feed(
        m.kubectl_command(&["apply", "--server-side", "--field-manager=bob", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        &manifest(2),
    );
    assert!(!conflict.status.success());
    let err = text(&conflict.stderr);
    assert!(
        err.contains("conflict") && err.contains("alice") && err.contains(".data.replicas"),
        "{err}"
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.replicas}"
        ]),
        "1"
    );

    // ...unless forced.
    m.kubectl_in(
        &[
            "apply",
            "--server-side",
            "--field-manager=bob",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&manifest(2)),
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.replicas}"
        ]),
        "2"
    );

    // A field alice stops applying goes away; one that bob applies too stays.
    m.kubectl_in(
        &["apply", "--server-side", "--field-manager=alice", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n"),
    );
    let data = m.kubectl(&["get", "configmap", "settings", "-o", "jsonpath={.data}"]);
    assert!(!data.contains("note"), "{data}");
    assert_eq!(
        m.kubectl(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.metadata.labels.team}"
        ]),
        "a"
    );
}

/// The user's flow, command by command: init, generate cluster | kubectl apply, describe until
/// Available, get kubeconfig, kubectl on the workload cluster, delete the cluster, delete the
/// providers.
#[test]
fn an_in_memory_cluster_on_the_embedded_management_cluster() {
    let m = Management::up();
    let kubeconfig_flag = m.kubeconfig().display().to_string();
    let with_kubeconfig = |args: &[&str]| -> Output {
        let mut all = args.to_vec();
        all.extend(["--kubeconfig", &kubeconfig_flag]);
        capictl(&all)
    };
    let init = with_kubeconfig(&["init", "--infrastructure", "in-memory", "--wait-providers"]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let said = text(&init.stderr);
    for line in [
        "Fetching providers",
        "Installing provider=\"cluster-api\"",
        "Installing provider=\"bootstrap-kubeadm\"",
        "Installing provider=\"control-plane-kubeadm\"",
        "Installing provider=\"infrastructure-in-memory\"",
        "Your management cluster has been initialized successfully!",
    ] {
        assert!(said.contains(line), "{said}");
    }
    let providers = m.kubectl(&["get", "providers", "-A", "-o", "name"]);
    assert_eq!(providers.lines().count(), 4, "{providers}");
    // Running init again changes nothing and says no more than that.
    let again = with_kubeconfig(&["init", "--infrastructure", "in-memory"]);
    assert!(again.status.success());
    assert_eq!(text(&again.stderr), "Fetching providers\n");
    // init's hint as printed: generate cluster takes the installed infrastructure provider.
    let generated = with_kubeconfig(&[
        "generate",
        "cluster",
        "hinted",
        "--kubernetes-version",
        "v1.30.0",
    ]);
    assert!(generated.status.success(), "{}", text(&generated.stderr));
    assert!(
        text(&generated.stdout).contains("kind: InMemoryCluster"),
        "{}",
        text(&generated.stdout)
    );
    assert!(!text(&generated.stdout).contains("kind: DockerCluster"));
    assert_eq!(
        text(&generated.stderr),
        "Using the in-memory infrastructure provider, the one installed in the management cluster\n"
    );

    m.apply_in_memory_cluster("sim", 2);

    // `capictl describe cluster` until the Cluster is Available; the controllers run inside the
    // embedded management cluster.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let tree = loop {
        let described = with_kubeconfig(&["describe", "cluster", "sim"]);
        assert!(described.status.success(), "{}", text(&described.stderr));
        let tree = text(&described.stdout);
        let cluster_row = tree.lines().nth(1).unwrap_or_default().to_string();
        if cluster_row.starts_with("Cluster default/sim")
            && cluster_row.contains("True    Available")
        {
            break tree;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not Available in time:\n{tree}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(tree.starts_with("NAME "), "{tree}");
    assert!(
        tree.contains("KubeadmControlPlane default/sim-control-plane, v1.30.4"),
        "{tree}"
    );
    assert!(tree.contains("└─Workers"), "{tree}");
    // --show-templates adds what the control plane and the workers are made from.
    let with_templates = with_kubeconfig(&["describe", "cluster", "sim", "--show-templates"]);
    let tree = text(&with_templates.stdout);
    for row in [
        "│ ├─InMemoryMachineTemplate default/sim-control-plane",
        "Templates",
        "KubeadmConfigTemplate default/sim-md-0",
    ] {
        assert!(tree.contains(row), "{row} missing:\n{tree}");
    }

    // `capictl get kubeconfig` prints the workload kubeconfig, or writes it 0600.
    let printed = with_kubeconfig(&["get", "kubeconfig", "sim"]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    assert!(text(&printed.stdout).contains("current-context: sim-admin@sim"));
    let workload = m.dir.join("sim.kubeconfig");
    let written = with_kubeconfig(&[
        "get",
        "kubeconfig",
        "sim",
        "-n",
        "default",
        "--write-to",
        workload.to_str().unwrap(),
    ]);
    assert!(written.status.success(), "{}", text(&written.stderr));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&workload).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let unknown = with_kubeconfig(&["get", "kubeconfig", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        text(&unknown.stderr),
        "Error: \"nope-kubeconfig\" not found in namespace \"default\": is there a Cluster \"nope\" there, and has its control plane written the kubeconfig yet? `kubectl get clusters -A` lists the clusters\n"
    );
    let nodes = m.kubectl(&["--kubeconfig", workload.to_str().unwrap(), "get", "nodes"]);
    assert_eq!(
        nodes
            .lines()
            .filter(|l| l.contains("Ready") && l.contains("v1.30.4"))
            .count(),
        3,
        "{nodes}"
    );
    assert!(nodes.contains("control-plane"), "{nodes}");

    // clusterctl's rollout commands: pause, a refused restart while paused, resume, restart.
    let md = "machinedeployment/sim-md-0";
    let paused = with_kubeconfig(&["alpha", "rollout", "pause", md]);
    assert!(paused.status.success(), "{}", text(&paused.stderr));
    assert_eq!(
        text(&paused.stdout),
        "machinedeployment.cluster.x-k8s.io/sim-md-0 paused\n"
    );
    assert_eq!(
        m.kubectl(&["get", "md", "sim-md-0", "-o", "jsonpath={.spec.paused}"]),
        "true"
    );
    let refused = with_kubeconfig(&["alpha", "rollout", "restart", md]);
    assert_eq!(refused.status.code(), Some(1));
    // The hint repeats the flags given, so it works as printed.
    assert!(text(&refused.stderr).contains(&format!("can't restart paused machinedeployment.cluster.x-k8s.io/sim-md-0 (run `capictl alpha rollout resume machinedeployment/sim-md-0 --kubeconfig {kubeconfig_flag}` first)")), "{}", text(&refused.stderr));
    let resumed = with_kubeconfig(&["alpha", "rollout", "resume", md]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let workers = || {
        m.kubectl(&[
            "get",
            "machines",
            "-l",
            "cluster.x-k8s.io/deployment-name=sim-md-0",
            "-o",
            "name",
        ])
    };
    let before = workers();
    assert_eq!(before.lines().count(), 2, "{before}");
    let restarted = with_kubeconfig(&["alpha", "rollout", "restart", md]);
    assert!(restarted.status.success(), "{}", text(&restarted.stderr));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = workers();
        if now.lines().count() == 2 && now.lines().all(|l| !before.contains(l)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the restart replaced the workers:\nbefore {before}\nnow {now}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Once the rollout is complete its old MachineSet is gone (as upstream deletes them), and
    // undo says there is nothing to go back to.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while m
        .kubectl(&[
            "get",
            "machinesets",
            "-l",
            "cluster.x-k8s.io/deployment-name=sim-md-0",
            "-o",
            "name",
        ])
        .lines()
        .count()
        > 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the old MachineSet went"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let undone = with_kubeconfig(&["alpha", "rollout", "undo", md]);
    assert_eq!(undone.status.code(), Some(1), "{}", text(&undone.stderr));
    assert!(
        text(&undone.stderr).contains(
            "machinedeployment.cluster.x-k8s.io/sim-md-0 has no revision before 2 to go back to"
        ),
        "{}",
        text(&undone.stderr)
    );
    let no_undo = with_kubeconfig(&["alpha", "rollout", "undo", "kcp/sim-control-plane"]);
    assert_eq!(no_undo.status.code(), Some(2), "{}", text(&no_undo.stderr));

    // The providers' CRDs cannot go while a Cluster still uses them.
    let refused = with_kubeconfig(&["delete", "--all", "--include-crd"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("Cluster default/sim"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        m.kubectl(&["get", "providers", "-A", "-o", "name"])
            .lines()
            .count(),
        4
    );

    m.kubectl(&["delete", "cluster", "sim", "--timeout=90s"]);
    assert_eq!(
        m.kubectl(&[
            "get",
            "machines,inmemorymachines,inmemoryclusters,kubeadmcontrolplanes",
            "-o",
            "name"
        ]),
        ""
    );
    // The templates the Cluster used are its own (as upstream's controllers make them): the
    // garbage collector takes them with it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !m
        .kubectl(&[
            "get",
            "kubeadmconfigtemplates,inmemorymachinetemplates",
            "-o",
            "name",
        ])
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "templates left behind"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let deleted = with_kubeconfig(&["delete", "--all", "--include-crd", "--include-namespace"]);
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    assert!(
        text(&deleted.stderr)
            .contains("Deleting Provider={\"name\":\"cluster-api\",\"namespace\":\"capi-system\"}"),
        "{}",
        text(&deleted.stderr)
    );
    assert_eq!(m.kubectl(&["get", "providers", "-A", "-o", "name"]), "");
    let crds = m.kubectl(&["get", "crds", "-o", "name"]);
    assert!(!crds.contains("clusters.cluster.x-k8s.io"), "{crds}");
    assert!(
        crds.contains("providers.clusterctl.cluster.x-k8s.io"),
        "the inventory stays: {crds}"
    );
}

/// A container, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// `capictl get kubeconfig` of a Docker cluster points at 127.0.0.1 and the port its load
/// balancer container publishes, as kind does, so the cluster is reachable from this host.
#[test]
fn get_kubeconfig_of_a_docker_cluster_uses_the_published_load_balancer_port() {
    let m = Management::up();
    m.install_crds();
    let name = format!("dk-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://172.18.0.3:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: {name}-admin@{name}\n  context: {{cluster: {name}, user: {name}-admin}}\ncurrent-context: {name}-admin@{name}\nusers:\n- name: {name}-admin\n  user: {{client-key-data: S0VZ}}\n"
    );
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  infrastructureRef: {{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: {name}}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-kubeconfig, labels: {{cluster.x-k8s.io/cluster-name: {name}}}}}\ntype: cluster.x-k8s.io/secret\nstringData:\n  value: |\n{}",
            kubeconfig
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        )),
    );
    let kubeconfig_flag = m.kubeconfig().display().to_string();
    let get = || {
        let out = capictl(&["get", "kubeconfig", &name, "--kubeconfig", &kubeconfig_flag]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        out
    };

    // No load balancer container here: the Cluster's own address stays, and it says why.
    let out = get();
    assert!(text(&out.stdout).contains("server: https://172.18.0.3:6443"));
    assert!(
        text(&out.stderr).contains(&format!("no load balancer container {name}-lb")),
        "{}",
        text(&out.stderr)
    );

    // With one that publishes 6443 on 127.0.0.1, the kubeconfig points there.
    let image = Command::new("scripts/test-image").output().unwrap();
    assert!(image.status.success(), "{}", text(&image.stderr));
    let image = text(&image.stdout).trim().to_string();
    let lb = Container(format!("{name}-lb"));
    let run = Command::new("docker")
        .args([
            "run",
            "-d",
            "--name",
            &lb.0,
            "-p",
            "127.0.0.1::6443",
            &image,
        ])
        .args(["/bin/busybox", "sleep", "300"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let port = text(
        &Command::new("docker")
            .args(["port", &lb.0, "6443/tcp"])
            .output()
            .unwrap()
            .stdout,
    );
    let port = port.trim().rsplit(':').next().unwrap().to_string();
    let out = get();
    let rewritten = text(&out.stdout);
    assert!(
        rewritten.contains(&format!("server: https://127.0.0.1:{port}")),
        "{rewritten}"
    );
    assert!(rewritten.contains(&format!("current-context: {name}-admin@{name}")));
    assert!(!rewritten.contains("172.18.0.3"));
}

/// A newcomer's `capictl quickstart` in an empty home: nothing configured, nothing running.
/// The embedded management cluster it starts is stopped when this is dropped.
struct Newcomer {
    home: PathBuf,
}

impl Newcomer {
    fn new() -> Newcomer {
        let home =
            std::env::temp_dir().join(format!("capictl-quickstart-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&home).unwrap();
        Newcomer { home }
    }

    fn command(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("KUBECONFIG", self.home.join("kubeconfig"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn capictl(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_capictl"), args)
    }
}

impl Drop for Newcomer {
    fn drop(&mut self) {
        let _ = self.capictl(&["management", "down"]);
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

#[test]
fn quickstart_brings_a_cluster_up_from_nothing() {
    let user = Newcomer::new();
    let quickstart = [
        "quickstart",
        "--infrastructure",
        "in-memory",
        "--control-plane-machine-count",
        "1",
        "--worker-machine-count",
        "1",
    ];
    // A mistake is refused before anything starts.
    let even = user.capictl(&[
        "quickstart",
        "-i",
        "in-memory",
        "--control-plane-machine-count",
        "2",
    ]);
    assert_eq!(even.status.code(), Some(2), "{}", text(&even.stderr));
    assert!(
        text(&even.stderr).contains("odd number"),
        "{}",
        text(&even.stderr)
    );
    assert!(!user.home.join("data").exists(), "nothing was started");

    let first = user.capictl(&quickstart);
    let (out, err) = (text(&first.stdout), text(&first.stderr));
    assert!(first.status.success(), "{out}{err}");
    // The tree on stdout, the story on stderr.
    assert!(
        out.contains("Cluster default/capi-quickstart")
            && out.lines().next().unwrap().starts_with("NAME"),
        "{out}"
    );
    assert!(out.lines().nth(1).unwrap().contains("Available"), "{out}");
    for said in [
        "Management cluster started",
        "Installing provider=\"infrastructure-in-memory\"",
        "Cluster capi-quickstart is Available after",
    ] {
        assert!(err.contains(said), "{said:?} in {err}");
    }
    // The kubeconfig it wrote reaches the workload cluster, and only its owner can read it.
    let kubeconfig = user.home.join("capi-quickstart.kubeconfig");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let nodes = user.command(
        &kubectl_binary(),
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "get",
            "nodes",
            "-o",
            "name",
        ],
    );
    assert_eq!(
        text(&nodes.stdout).lines().count(),
        2,
        "{}",
        text(&nodes.stderr)
    );

    // Again: the same cluster, nothing installed or started twice.
    let again = user.capictl(&quickstart);
    let err = text(&again.stderr);
    assert!(again.status.success(), "{err}");
    assert!(
        !err.contains("Management cluster started") && !err.contains("Installing provider"),
        "{err}"
    );
    assert!(err.contains("is Available after"), "{err}");
}

/// Mallory: a certificate claiming system:masters, signed by a CA of her own.
fn mallory_kubeconfig(m: &Management) -> PathBuf {
    let elsewhere = m.dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let foreign = capictl::pki::Pki::load_or_create(&elsewhere).unwrap();
    kubeconfig_signed_by(m, &foreign, "mallory", &["system:masters"])
}

#[test]
fn a_certificate_from_the_cluster_ca_is_not_an_administrator() {
    let m = Management::up();
    let alice = kubeconfig_of(&m, "alice", &["developers"]);
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", alice.to_str().unwrap()];
        all.extend(args);
        m.kubectl_command(&all).output().unwrap()
    };
    m.kubectl(&["create", "namespace", "team"]);
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "configmap",
        "settings",
        "--from-literal=a=1",
    ]);

    // Nothing is allowed that no binding names, in kube-apiserver's words.
    let secrets = as_alice(&["-n", "kube-system", "get", "secrets"]);
    assert!(!secrets.status.success());
    assert!(
        text(&secrets.stderr).contains(
            "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""
        ),
        "{}",
        text(&secrets.stderr)
    );
    let delete = as_alice(&["delete", "namespace", "team"]);
    assert!(!delete.status.success());
    assert!(
        text(&delete.stderr).contains("Forbidden") || text(&delete.stderr).contains("forbidden"),
        "{}",
        text(&delete.stderr)
    );
    assert!(
        m.kubectl(&["get", "namespace", "team", "-o", "name"])
            .contains("team"),
        "nothing was deleted"
    );

    // kubectl auth whoami and can-i answer for her.
    let whoami = as_alice(&["auth", "whoami"]);
    let out = text(&whoami.stdout);
    assert!(whoami.status.success(), "{}", text(&whoami.stderr));
    assert!(
        out.contains("alice") && out.contains("developers") && out.contains("system:authenticated"),
        "{out}"
    );
    let can = |args: &[&str]| {
        text(&as_alice(&[&["auth", "can-i"], args].concat()).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(can(&["get", "configmaps", "-n", "team"]), "no");

    // A RoleBinding allows exactly what it names.
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "role",
        "configs",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    m.kubectl(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "developers",
        "--role=configs",
        "--group=developers",
    ]);
    assert_eq!(can(&["get", "configmaps", "-n", "team"]), "yes");
    assert_eq!(can(&["delete", "configmaps", "-n", "team"]), "no");
    assert_eq!(can(&["get", "configmaps", "-n", "default"]), "no");
    let got = as_alice(&[
        "-n",
        "team",
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(text(&got.stdout), "1", "{}", text(&got.stderr));
    let changed = as_alice(&["-n", "team", "delete", "configmap", "settings"]);
    assert!(!changed.status.success(), "delete is not granted");
    let listed = as_alice(&["auth", "can-i", "--list", "-n", "team"]);
    assert!(
        text(&listed.stdout).contains("configmaps"),
        "{}",
        text(&listed.stdout)
    );

    // The administrator (system:masters) still does everything.
    assert_eq!(
        text(
            &m.kubectl_command(&["auth", "can-i", "*", "*"])
                .output()
                .unwrap()
                .stdout
        )
        .trim(),
        "yes"
    );
}

#[test]
fn a_certificate_from_another_ca_is_unauthorized_not_a_broken_handshake() {
    let m = Management::up();
    let path = mallory_kubeconfig(&m);
    let out = m
        .kubectl_command(&[
            "--kubeconfig",
            path.to_str().unwrap(),
            "get",
            "secrets",
            "-A",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("You must be logged in to the server"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn idle_connections_neither_stop_the_server_nor_fill_its_log() {
    let m = Management::up();
    let address = m.server().trim_start_matches("https://").to_string();
    // 20,000 connections that never start TLS, held by another process (this one runs other
    // tests beside this one); it reports how many it opened, and 13 s later (past the
    // server's 10 s handshake timeout) how many of a sample the server still keeps open.
    const FLOOD: &str = r#"
import socket, sys, time, resource
host, port = sys.argv[1].rsplit(":", 1)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range(min(20000, hard - 50)):
    try:
        held.append(socket.create_connection((host, int(port)), timeout=5))
    except OSError:
        break
print(len(held), flush=True)
time.sleep(13)
still_open = 0
for s in held[::97]:
    s.settimeout(0.2)
    try:
        if s.recv(1):
            still_open += 1
    except socket.timeout:
        still_open += 1
    except OSError:
        pass
print(still_open, flush=True)
"#;
    let python = std::env::var("PYTHON_KUBERNETES").unwrap_or_else(|_| "python3".into());
    let mut flood = Command::new(python)
        .args(["-c", FLOOD, &address])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(flood.stdout.take().unwrap()).lines();
    let opened: usize = lines.next().unwrap().unwrap().trim().parse().unwrap();
    assert!(opened >= 5_000, "opened only {opened} connections");
    // The server still answers while they are open.
    assert!(
        m.kubectl(&["get", "namespaces", "-o", "name"])
            .contains("namespace/default")
    );
    let still_open: usize = lines.next().unwrap().unwrap().trim().parse().unwrap();
    flood.wait().unwrap();
    assert_eq!(
        still_open, 0,
        "the server keeps connections that never started TLS open"
    );
    let log = std::fs::metadata(std::path::Path::new(&m.state()).join("server.log")).unwrap();
    assert!(
        log.len() < 1 << 20,
        "server.log grew to {} bytes",
        log.len()
    );
    assert!(
        m.kubectl(&["get", "namespaces", "-o", "name"])
            .contains("namespace/default")
    );
}

#[test]
fn init_against_a_cluster_that_refuses_the_credentials_changes_nothing() {
    let m = Management::up();
    let mallory = mallory_kubeconfig(&m);
    let before = std::fs::read_to_string(&mallory).unwrap();
    let home = m.dir.join("home");
    let out = Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(["init", "--infrastructure", "in-memory", "--yes"])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", &mallory)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("refused this kubeconfig's credentials")
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(
        !home.join("data").exists(),
        "no embedded management cluster was started"
    );
    assert_eq!(
        std::fs::read_to_string(&mallory).unwrap(),
        before,
        "the kubeconfig is untouched"
    );
}

#[test]
fn a_bad_listen_address_fails_at_once_saying_why_and_the_store_is_private() {
    let dir = std::env::temp_dir().join(format!("capictl-listen-{}", uuid::Uuid::new_v4()));
    let started = std::time::Instant::now();
    let out = capictl(&[
        "management",
        "up",
        "--dir",
        dir.to_str().unwrap(),
        "--no-kubeconfig",
        "--listen",
        "256.0.0.1:1",
    ]);
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("could not start") && err.contains("256.0.0.1:1"),
        "{err}"
    );
    // A good start leaves the store readable by its owner only.
    let m = Management::up();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(std::path::Path::new(&m.state()).join("state.redb"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn invalid_built_in_objects_are_refused_naming_the_field_and_nothing_is_stored() {
    let m = Management::up();
    // (what, manifest, field the refusal names)
    let long = "a".repeat(64);
    let cases = [
        ("ConfigMap data with a number", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"numbers"},"data":{"a":1}}"#.to_string(), "data[a]"),
        ("ConfigMap data with an object", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"objects"},"data":{"a":{"b":1}}}"#.to_string(), "data[a]"),
        ("a label that is not a string", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"labels","labels":{"env":3}}}"#.to_string(), "metadata.labels[env]"),
        ("a label key that is not a qualified name", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keys","labels":{"bad key!":"x"}}}"#.to_string(), "metadata.labels"),
        ("an annotation key that is not a qualified name", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"notes","annotations":{"/x":"y"}}}"#.to_string(), "metadata.annotations"),
        ("Secret data that is not base64", r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"raw"},"data":{"key":"not base64!"}}"#.to_string(), "data[key]"),
        ("a Pod whose containers are not a list", r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nope"},"spec":{"containers":"nope"}}"#.to_string(), "spec.containers"),
        ("a namespace with a dot", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"has.dot"}}"#.to_string(), "metadata.name"),
        ("a ConfigMap named a..b", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a..b"}}"#.to_string(), "metadata.name"),
        ("a 64-character namespace", format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{long}"}}}}"#), "metadata.name"),
        ("a Service port above 65535", r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"wide"},"spec":{"ports":[{"port":70000}]}}"#.to_string(), "spec.ports[0].port"),
        ("a Deployment whose selector misses its Pods", r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"astray"},"spec":{"selector":{"matchLabels":{"app":"db"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}"#.to_string(), "spec.template.metadata.labels"),
        ("a Role rule without verbs", r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"idle"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}"#.to_string(), "rules[0].verbs"),
        ("a ClusterRoleBinding to a Role", r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"cross"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"idle"}}"#.to_string(), "roleRef.kind"),
    ];
    // Sent as they are (`kubectl create --raw`): kubectl would refuse some of them itself.
    for (what, manifest, field) in &cases {
        let kind = manifest
            .split("\"kind\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let path = match kind {
            "Namespace" => "/api/v1/namespaces".to_string(),
            "Deployment" => "/apis/apps/v1/namespaces/default/deployments".to_string(),
            "Role" => "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".to_string(),
            "ClusterRoleBinding" => {
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_string()
            }
            other => format!("/api/v1/namespaces/default/{}s", other.to_lowercase()),
        };
        let out = m.kubectl_output(&["create", "--raw", &path, "-f", "-"], Some(manifest));
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{what} was accepted");
        assert!(
            err.contains("is invalid") && err.contains(field),
            "{what}: {err}"
        );
    }
    let stored = m.kubectl(&["get", "configmaps,secrets,pods", "-o", "name"]);
    for name in [
        "numbers", "objects", "labels", "keys", "notes", "raw", "nope", "a..b",
    ] {
        assert!(
            !stored.contains(&format!("/{name}\n")),
            "{name} was stored: {stored}"
        );
    }
    assert!(
        !m.kubectl(&["get", "namespaces", "-o", "name"])
            .contains("has.dot")
    );
}

#[test]
fn invalid_cluster_api_objects_are_refused_naming_the_field_and_nothing_is_stored() {
    let m = Management::up();
    m.install_crds();
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/clusters.cluster.x-k8s.io",
        "crd/kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "crd/machinehealthchecks.cluster.x-k8s.io",
    ]);
    let cluster = |name: &str, spec: &str| {
        format!(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: {name}\nspec:\n{spec}"
        )
    };
    let kcp = "apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: twice
spec:
  version: v1.30.4
  replicas: 1
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: InMemoryMachineTemplate, name: cp}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        extraArgs:
        - {name: v, value: \"2\"}
        - {name: v, value: \"4\"}
";
    let mhc = "apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata:
  name: ready
spec:
  clusterName: a
  selector: {}
  checks:
    unhealthyMachineConditions:
    - {type: Ready, status: \"False\", timeoutSeconds: 300}
";
    // (what, manifest, field the refusal names, what it says)
    let cases = [
        (
            "a negative endpoint port",
            cluster(
                "port",
                "  controlPlaneEndpoint: {host: example.com, port: -3}\n",
            ),
            "spec.controlPlaneEndpoint.port",
            "greater than or equal to 1",
        ),
        (
            "an API server port above 65535",
            cluster("api-port", "  clusterNetwork: {apiServerPort: 99999}\n"),
            "spec.clusterNetwork.apiServerPort",
            "less than or equal to 65535",
        ),
        (
            "a CIDR that is not one",
            cluster(
                "cidr",
                "  clusterNetwork: {pods: {cidrBlocks: [not-a-cidr]}}\n",
            ),
            "spec.clusterNetwork.pods.cidrBlocks[0]",
            "invalid CIDR address",
        ),
        (
            "an API server flag given twice",
            kcp.to_string(),
            "spec.kubeadmConfigSpec.clusterConfiguration.apiServer.extraArgs",
            "extraArgs name must be unique",
        ),
        (
            "a health check on the Ready condition",
            mhc.to_string(),
            "spec.checks.unhealthyMachineConditions[0].type",
            "type must not be one of: Ready",
        ),
    ];
    for (what, manifest, field, says) in &cases {
        let out = m.kubectl_output(&["apply", "-f", "-"], Some(manifest));
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{what} was accepted");
        assert!(
            err.contains("is invalid") && err.contains(field) && err.contains(says),
            "{what}: {err}"
        );
    }
    let stored = m.kubectl(&[
        "get",
        "clusters,kubeadmcontrolplanes,machinehealthchecks",
        "-o",
        "name",
    ]);
    assert_eq!(stored, "", "nothing is stored");
}

#[test]
fn service_account_tokens_authenticate_until_the_account_is_gone() {
    let m = Management::up();
    m.kubectl(&["create", "namespace", "team"]);
    m.kubectl(&["create", "serviceaccount", "robot", "-n", "team"]);
    // `kubectl create token` sends a protobuf TokenRequest.
    let token = m.kubectl(&["create", "token", "robot", "-n", "team", "--duration=20m"]);
    let token = token.trim();
    assert!(token.starts_with("eyJ"), "{token}");
    let config = m.dir.join("robot.kubeconfig");
    let with_token = |token: &str| {
        std::fs::write(
            &config,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: {}\n    certificate-authority: {}/ca.crt\nusers:\n- name: robot\n  user:\n    token: {token}\ncontexts:\n- name: robot\n  context: {{cluster: m, user: robot}}\ncurrent-context: robot\n",
                m.server(),
                m.state()
            ),
        )
        .unwrap();
    };
    let as_robot = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", config.to_str().unwrap()];
        all.extend_from_slice(args);
        m.kubectl_output(&all, None)
    };
    with_token(token);
    let whoami = as_robot(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
    ]);
    assert_eq!(
        text(&whoami.stdout),
        r#"system:serviceaccount:team:robot ["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"]"#,
        "{}",
        text(&whoami.stderr)
    );
    let denied = as_robot(&["-n", "team", "get", "configmaps"]);
    assert!(
        text(&denied.stderr).contains(
            "User \"system:serviceaccount:team:robot\" cannot list resource \"configmaps\""
        ),
        "{}",
        text(&denied.stderr)
    );
    m.kubectl(&[
        "create",
        "rolebinding",
        "robot-view",
        "-n",
        "team",
        "--clusterrole=view",
        "--serviceaccount=team:robot",
    ]);
    let allowed = as_robot(&["-n", "team", "get", "configmaps", "-o", "name"]);
    assert!(allowed.status.success(), "{}", text(&allowed.stderr));
    // A forged or changed token is nobody.
    let mut forged = token.to_string();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    with_token(&forged);
    let refused = as_robot(&["-n", "team", "get", "configmaps"]);
    assert!(
        text(&refused.stderr).contains("Unauthorized"),
        "{}",
        text(&refused.stderr)
    );
    // Deleting the ServiceAccount revokes its tokens, and a new one of that name is not it.
    m.kubectl(&["delete", "serviceaccount", "robot", "-n", "team"]);
    m.kubectl(&["create", "serviceaccount", "robot", "-n", "team"]);
    with_token(token);
    let revoked = as_robot(&["-n", "team", "get", "configmaps"]);
    assert!(
        text(&revoked.stderr).contains("Unauthorized"),
        "{}",
        text(&revoked.stderr)
    );
    // The token key is one only those who may read kube-system Secrets see.
    let key = m.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "secret",
        "capictl-service-account-key",
        "-o",
        "jsonpath={.type}",
    ]);
    assert_eq!(key, "Opaque");
}

#[test]
fn built_in_objects_get_kube_apiserver_defaults_and_the_control_plane_keeps_its_objects() {
    let m = Management::up();
    m.kubectl(&["create", "namespace", "apps"]);
    m.kubectl(&["run", "web", "-n", "apps", "--image=nginx"]);
    assert_eq!(
        m.kubectl(&["get", "pod", "web", "-n", "apps", "-o", "jsonpath={.status.phase} {.spec.restartPolicy} {.spec.serviceAccountName} {.spec.containers[0].imagePullPolicy}"]),
        "Pending Always default Always"
    );
    // Pods are selected by the fields kube-apiserver offers; others are refused.
    assert_eq!(
        m.kubectl(&[
            "get",
            "pods",
            "-n",
            "apps",
            "--field-selector=status.phase=Pending,spec.nodeName=",
            "-o",
            "name"
        ]),
        "pod/web\n"
    );
    let unsupported = m.kubectl_output(
        &[
            "get",
            "pods",
            "-n",
            "apps",
            "--field-selector=spec.containers=x",
        ],
        None,
    );
    assert!(
        text(&unsupported.stderr).contains("field label not supported: spec.containers"),
        "{}",
        text(&unsupported.stderr)
    );
    m.kubectl(&[
        "create",
        "service",
        "clusterip",
        "web",
        "-n",
        "apps",
        "--tcp=80:8080",
    ]);
    let ip = m.kubectl(&[
        "get",
        "service",
        "web",
        "-n",
        "apps",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let ip: std::net::Ipv4Addr = ip
        .parse()
        .unwrap_or_else(|_| panic!("{ip:?} is no address"));
    assert_eq!(ip.octets()[0], 10);
    assert_eq!(ip.octets()[1] & 0xf0, 96, "{ip} is in 10.96.0.0/12");
    assert_ne!(
        ip.to_string(),
        "10.96.0.1",
        "the kubernetes Service's address"
    );
    // An update that leaves the address out keeps it.
    m.kubectl(&[
        "-n",
        "apps",
        "patch",
        "service",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/clusterIP"}]"#,
    ]);
    assert_eq!(
        m.kubectl(&[
            "get",
            "service",
            "web",
            "-n",
            "apps",
            "-o",
            "jsonpath={.spec.clusterIP}"
        ]),
        ip.to_string()
    );
    // Every namespace gets its default ServiceAccount, and every served group version an
    // APIService, CRDs' included.
    m.install_crds();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let accounts = m.kubectl(&[
            "get",
            "serviceaccounts",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
        ]);
        let services = m.kubectl(&["get", "apiservices", "-o", "name"]);
        let done = ["default/default", "kube-system/default", "apps/default"]
            .iter()
            .all(|a| accounts.contains(a))
            && ["v1.", "v1.apps", "v1.batch", "v1beta2.cluster.x-k8s.io"]
                .iter()
                .all(|s| services.contains(&format!("apiservice.apiregistration.k8s.io/{s}\n")));
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "accounts: {accounts}\napiservices: {services}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let table = m.kubectl(&["get", "apiservice", "v1.apps"]);
    assert!(table.contains("Local") && table.contains("True"), "{table}");
    // Aggregated ClusterRoles hold the rules they aggregate, new ones included.
    let view_rules = || m.kubectl(&["get", "clusterrole", "view", "-o", "jsonpath={.rules}"]);
    assert!(view_rules().contains("configmaps"), "{}", view_rules());
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: widgets-view\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules:\n- {apiGroups: [example.com], resources: [widgets], verbs: [get]}\n"),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !view_rules().contains("widgets") {
        assert!(std::time::Instant::now() < deadline, "{}", view_rules());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Two `management up` processes on one etcd reached over TLS with a client certificate: each
/// sees what the other writes, and every write made with a resourceVersion the other has
/// moved past is refused, even before this one's cache has seen that write; each serves the
/// custom resources of the CRDs the other installs and removes.
#[test]
fn two_management_clusters_on_one_tls_etcd_share_objects_and_refuse_stale_writes() {
    let (etcd, tls) = crate::common::Etcd::start_tls();
    let a = Management::up_on_etcd(&etcd.endpoint, &tls);
    let b = Management::up_on_etcd(&etcd.endpoint, &tls);
    a.kubectl(&["create", "configmap", "shared", "--from-literal=count=0"]);
    let mut count = 0;
    for round in 0..10 {
        let (writer, other) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        // What `other` read before `writer` wrote: stale once the write lands.
        let before = other.kubectl(&["get", "configmap", "shared", "-o", "json"]);
        count += 1;
        writer.kubectl(&[
            "patch",
            "configmap",
            "shared",
            "--type=merge",
            "-p",
            &format!(r#"{{"data":{{"count":"{count}"}}}}"#),
        ]);
        let stale = other.kubectl_output(&["replace", "-f", "-"], Some(&before));
        assert!(
            !stale.status.success() && text(&stale.stderr).contains("the object has been modified"),
            "round {round}: a stale replace was accepted: {}",
            text(&stale.stderr)
        );
        assert_eq!(
            other.kubectl(&["get", "configmap", "shared", "-o", "jsonpath={.data.count}"]),
            count.to_string(),
            "round {round}: the other server reads the write"
        );
    }
    // A CRD installed through one server is served by the other, and removed from both.
    a.kubectl_in(
        &["apply", "-f", "-"],
        Some("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n"),
    );
    let served_by = |m: &Management| m.kubectl_output(&["get", "widgets"], None).status.success();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !served_by(&b) {
        assert!(
            std::time::Instant::now() < deadline,
            "the other server never served widgets"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    b.kubectl_in(
        &["apply", "-f", "-"],
        Some("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\n"),
    );
    assert_eq!(
        a.kubectl(&["get", "widget", "w", "-o", "name"]).trim(),
        "widget.example.com/w"
    );
    b.kubectl(&["delete", "crd", "widgets.example.com"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while served_by(&a) {
        assert!(
            std::time::Instant::now() < deadline,
            "the first server still serves widgets"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop((a, b));
}

/// `kubectl port-forward`, which speaks SPDY (kubectl 1.20 only that; current kubectl after
/// its WebSocket tunnel is refused), reaches a Pod's port through the API server: bytes go both
/// ways, and a second connection through the same forward works too.
#[test]
fn kubectl_port_forward_reaches_a_pods_port_over_spdy() {
    use std::io::{BufRead, Read, Write};
    let m = Management::up();
    // What the Pod listens on: an echo that shouts back.
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut tcp in echo.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = tcp.read(&mut buffer) {
                    if n == 0 || tcp.write_all(&buffer[..n].to_ascii_uppercase()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    m.kubectl(&["run", "echo", "--image=echo"]);
    m.kubectl(&[
        "patch",
        "pod",
        "echo",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","podIP":"127.0.0.1"}}"#,
    ]);
    for kubectl in all_kubectls() {
        let local = crate::common::free_port();
        let mut forward = Command::new(&kubectl)
            .args(["port-forward", "pod/echo", &format!("{local}:{port}")])
            .env("KUBECONFIG", m.kubeconfig())
            .env("HOME", m.dir.join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(forward.stdout.take().unwrap()).lines();
        let ready = lines.next().and_then(Result::ok).unwrap_or_default();
        if !ready.contains("Forwarding from") {
            let _ = forward.kill();
            let mut err = String::new();
            let _ = forward.stderr.take().unwrap().read_to_string(&mut err);
            panic!("{kubectl} port-forward did not start: {ready} {err}");
        }
        for word in ["hello", "etcd"] {
            let mut tcp = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            tcp.write_all(word.as_bytes()).unwrap();
            let mut answer = vec![0u8; word.len()];
            tcp.read_exact(&mut answer)
                .unwrap_or_else(|e| panic!("{kubectl}: no answer through the forward: {e}"));
            assert_eq!(answer, word.to_uppercase().as_bytes(), "{kubectl}");
        }
        let _ = forward.kill();
        let _ = forward.wait();
    }
}

/// A ClusterClass has its templates read and owned and its variables published: a missing
/// template is named in `RefVersionsUpToDate` until it exists; upstream's in-memory class,
/// whose template kinds no provider here serves, says which CRD is missing.
#[test]
fn a_cluster_class_owns_its_templates_and_names_the_missing_ones() {
    let m = Management::up();
    m.install_crds();
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/clusterclasses.cluster.x-k8s.io",
    ]);
    let class = "apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: docker}
spec:
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DockerClusterTemplate, name: docker-cluster}
  controlPlane:
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: docker-cp}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: DockerMachineTemplate, name: docker-machines}
  variables:
  - name: imageRepository
    required: false
    schema:
      openAPIV3Schema: {type: string, default: registry.k8s.io}
";
    m.kubectl_in(&["apply", "-f", "-"], Some(class));
    let wait = |condition: &str| {
        m.kubectl(&[
            "wait",
            "--timeout=60s",
            &format!("--for=condition={condition}"),
            "clusterclass/docker",
        ])
    };
    wait("RefVersionsUpToDate=False");
    let message = m.kubectl(&[
        "get",
        "clusterclass",
        "docker",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="RefVersionsUpToDate")].message}"#,
    ]);
    for missing in [
        "DockerClusterTemplate default/docker-cluster (spec.infrastructure.templateRef): not found",
        "KubeadmControlPlaneTemplate default/docker-cp (spec.controlPlane.templateRef): not found",
    ] {
        assert!(message.contains(missing), "{message}");
    }
    assert_eq!(
        m.kubectl(&["get", "clusterclass", "docker", "-o", "jsonpath={.status.variables[0].name} {.status.variables[0].definitions[0].from} {.status.observedGeneration}"]),
        "imageRepository inline ",
        "variables are published; the generation is not observed while templates are missing"
    );
    let templates = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerClusterTemplate
metadata: {name: docker-cluster}
spec: {template: {spec: {}}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: docker-cp}
spec: {template: {spec: {kubeadmConfigSpec: {}}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata: {name: docker-machines}
spec: {template: {spec: {}}}
";
    m.kubectl_in(&["apply", "-f", "-"], Some(templates));
    wait("RefVersionsUpToDate=True");
    assert_eq!(
        m.kubectl(&[
            "get",
            "clusterclass",
            "docker",
            "-o",
            "jsonpath={.status.observedGeneration}"
        ]),
        "1"
    );
    let uid = m.kubectl(&[
        "get",
        "clusterclass",
        "docker",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    for template in [
        "dockerclustertemplate/docker-cluster",
        "kubeadmcontrolplanetemplate/docker-cp",
        "dockermachinetemplate/docker-machines",
    ] {
        let owners = m.kubectl(&[
            "get",
            template,
            "-o",
            "jsonpath={.metadata.ownerReferences[*].uid}",
        ]);
        assert_eq!(owners, uid, "{template} is owned by its class");
    }
    // Upstream's in-memory class alone, without its templates: each one is named.
    let upstream = std::fs::read_to_string(
        crate::common::upstream("templates").join("clusterclass-in-memory.yaml"),
    )
    .unwrap()
    .replace("${CLUSTER_CLASS_NAME}", "in-memory");
    let class_only: String = upstream
        .split("\n---")
        .find(|doc| doc.contains("kind: ClusterClass"))
        .unwrap()
        .to_string();
    m.kubectl_in(&["apply", "-f", "-"], Some(&class_only));
    let name =
        capictl::yaml::from_str::<serde_json::Value>(&class_only).unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
    m.kubectl(&[
        "wait",
        "--timeout=60s",
        "--for=condition=RefVersionsUpToDate=False",
        &format!("clusterclass/{name}"),
    ]);
    let message = m.kubectl(&[
        "get",
        "clusterclass",
        &name,
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="RefVersionsUpToDate")].message}"#,
    ]);
    assert!(
        message.contains("DevClusterTemplate default/in-memory-cluster (spec.infrastructure.templateRef): not found"),
        "{message}"
    );
}

/// A Cluster with the deletion-protection annotation is not deleted, whoever asks (the admin
/// included), nor is its namespace; removing the annotation lifts it.
#[test]
fn a_protected_cluster_is_not_deleted_until_the_protection_is_lifted() {
    let m = Management::up();
    m.install_crds();
    m.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/clusters.cluster.x-k8s.io",
    ]);
    m.kubectl(&["create", "namespace", "production"]);
    let annotation = capictl::api::DELETION_PROTECTION_ANNOTATION;
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: prod\n  namespace: production\n  annotations: {{{annotation}: \"true\"}}\nspec: {{}}\n"
        )),
    );
    let refused = m.kubectl_output(
        &[
            "delete",
            "cluster",
            "prod",
            "-n",
            "production",
            "--wait=false",
        ],
        None,
    );
    let err = text(&refused.stderr);
    assert!(
        !refused.status.success(),
        "the protected Cluster was deleted"
    );
    assert!(
        err.contains("Cluster production/prod has deletion protection")
            && err.contains(&format!(
                "kubectl annotate cluster -n production prod {annotation}-"
            )),
        "{err}"
    );
    let namespace = m.kubectl_output(&["delete", "namespace", "production", "--wait=false"], None);
    let err = text(&namespace.stderr);
    assert!(!namespace.status.success(), "its namespace was deleted");
    assert!(
        err.contains("the namespace holds objects with deletion protection"),
        "{err}"
    );
    assert!(
        m.kubectl(&[
            "get",
            "namespace",
            "production",
            "-o",
            "jsonpath={.status.phase}"
        ]) == "Active",
        "nothing began deleting"
    );
    // capictl refuses it too, before asking anything.
    let kubeconfig = m.kubeconfig().display().to_string();
    let capictl_delete = |extra: &[&str]| {
        let mut args = vec![
            "delete",
            "cluster",
            "prod",
            "-n",
            "production",
            "--kubeconfig",
            &kubeconfig,
        ];
        args.extend(extra);
        capictl(&args)
    };
    let refused = capictl_delete(&["--yes"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("Cluster production/prod has deletion protection"),
        "{}",
        text(&refused.stderr)
    );
    m.kubectl(&[
        "annotate",
        "cluster",
        "-n",
        "production",
        "prod",
        &format!("{annotation}-"),
    ]);
    // Unprotected, it lists what will go; with no terminal to ask on, it deletes nothing
    // unless told --yes.
    let unasked = capictl_delete(&[]);
    assert_eq!(unasked.status.code(), Some(2));
    let said = text(&unasked.stderr);
    assert!(said.contains("Cluster production/prod"), "{said}");
    assert!(
        said.contains("pass --yes to delete without asking"),
        "{said}"
    );
    assert_eq!(
        m.kubectl(&["get", "cluster", "prod", "-n", "production", "-o", "name"]),
        "cluster.cluster.x-k8s.io/prod\n"
    );
    let deleted = capictl_delete(&["--yes"]);
    assert!(deleted.status.success(), "{}", text(&deleted.stderr));
    assert!(
        text(&deleted.stderr).contains("Cluster production/prod deleted"),
        "{}",
        text(&deleted.stderr)
    );
    assert_eq!(
        m.kubectl(&["get", "clusters", "-n", "production", "-o", "name"]),
        ""
    );
}

/// The embedded management cluster's `/metrics`, parsed.
fn scrape(m: &Management) -> crate::common::prometheus::Scrape {
    crate::common::prometheus::Scrape::parse(&m.kubectl(&["get", "--raw", "/metrics"]))
}

/// Waits until `check` holds, polling every half second.
fn eventually(what: &str, seconds: u64, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not in {seconds}s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The reasons of the core Events about `kind`/`name`, as `kubectl get events` lists them.
fn event_reasons(m: &Management, kind: &str, name: &str) -> Vec<String> {
    let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
    let list: serde_json::Value = serde_json::from_str(&m.kubectl(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &selector,
        "-o",
        "json",
    ]))
    .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_clusters_life_shows_in_metrics_and_events() {
    let m = Management::up();
    let kubeconfig = m.kubeconfig().display().to_string();
    let init = capictl(&[
        "init",
        "--infrastructure",
        "in-memory",
        "--wait-providers",
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let before = scrape(&m);

    m.apply_in_memory_cluster("obs", 1);
    m.kubectl(&[
        "wait",
        "--for=condition=Available",
        "cluster/obs",
        "--timeout=120s",
    ]);
    let up = scrape(&m);
    // The controllers reconciled and their queues moved.
    for controller in ["cluster", "machine", "machineset", "kubeadmcontrolplane"] {
        let labels = [("controller", controller)];
        assert!(
            up.sum("controller_runtime_reconcile_total", &labels)
                > before.sum("controller_runtime_reconcile_total", &labels),
            "{controller} reconciled nothing"
        );
        assert!(
            up.sum("controller_runtime_reconcile_time_seconds_count", &labels) > 0.0,
            "{controller}"
        );
        assert!(up.sum("workqueue_adds_total", &[("name", controller)]) > 0.0);
    }
    assert_eq!(
        up.sum(
            "controller_runtime_max_concurrent_reconciles",
            &[("controller", "machine")]
        ),
        10.0
    );
    // The API server counted the Machines' creation, and its client the controllers' calls.
    let created = [("verb", "POST"), ("resource", "machines"), ("code", "201")];
    assert!(
        up.sum("apiserver_request_total", &created)
            >= before.sum("apiserver_request_total", &created) + 2.0
    );
    assert!(
        up.sum(
            "apiserver_request_duration_seconds_count",
            &[("resource", "machines")]
        ) > 0.0
    );
    assert!(up.sum("apiserver_longrunning_requests", &[("verb", "WATCH")]) > 0.0);
    assert!(up.sum("rest_client_requests_total", &[("method", "PATCH")]) > 0.0);
    assert!(
        up.sum(
            "etcd_request_duration_seconds_count",
            &[("operation", "create")]
        ) > 0.0
    );
    assert!(up.sum("apiserver_storage_size_bytes", &[]) > 0.0);
    assert_eq!(
        up.sum(
            "apiserver_storage_objects",
            &[("resource", "machines.cluster.x-k8s.io")]
        ),
        2.0
    );
    // Cluster API's state, as kube-state-metrics would show it.
    assert_eq!(
        up.sum(
            "capi_cluster_status_phase",
            &[("name", "obs"), ("phase", "Provisioned")]
        ),
        1.0
    );
    assert_eq!(
        up.sum(
            "capi_cluster_status_condition",
            &[("name", "obs"), ("type", "Available"), ("status", "True")]
        ),
        1.0
    );
    assert_eq!(
        up.sum("capi_machine_status_phase", &[("phase", "Running")]),
        2.0
    );
    assert_eq!(
        up.sum(
            "capi_kubeadmcontrolplane_status_ready_replicas",
            &[("name", "obs-control-plane")]
        ),
        1.0
    );
    assert!(up.sum("capi_machine_creation_to_ready_seconds_count", &[]) >= 2.0);

    // Scaled: the new replica count shows, and the MachineDeployment says what it did.
    m.kubectl(&["scale", "machinedeployment", "obs-md-0", "--replicas=2"]);
    eventually("the second worker Running", 90, || {
        scrape(&m).sum(
            "capi_machinedeployment_status_ready_replicas",
            &[("name", "obs-md-0")],
        ) == 2.0
    });
    assert!(event_reasons(&m, "MachineDeployment", "obs-md-0").contains(&"SuccessfulScale".into()));
    let set = m.kubectl(&[
        "get",
        "machinesets",
        "-l",
        "cluster.x-k8s.io/deployment-name=obs-md-0",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    assert!(event_reasons(&m, "MachineSet", &set).contains(&"SuccessfulCreate".into()));

    // Remediated: a worker marked for remediation is replaced, and the story is told.
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some(
            r#"apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata:
  name: obs-workers
  namespace: default
spec:
  clusterName: obs
  selector:
    matchLabels:
      cluster.x-k8s.io/deployment-name: obs-md-0
  checks:
    unhealthyNodeConditions:
    - type: Ready
      status: "False"
      timeoutSeconds: 300
"#,
        ),
    );
    let victim = m.kubectl(&[
        "get",
        "machines",
        "-l",
        "cluster.x-k8s.io/deployment-name=obs-md-0",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    m.kubectl(&[
        "annotate",
        "machine",
        &victim,
        "cluster.x-k8s.io/remediate-machine=",
    ]);
    eventually("the marked Machine replaced", 90, || {
        let names = m.kubectl(&[
            "get",
            "machines",
            "-l",
            "cluster.x-k8s.io/deployment-name=obs-md-0",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ]);
        !names.contains(&victim) && names.split_whitespace().count() == 2
    });
    assert!(event_reasons(&m, "Machine", &victim).contains(&"MachineMarkedUnhealthy".into()));
    assert!(event_reasons(&m, "MachineSet", &set).contains(&"SuccessfulDelete".into()));

    // Deleted: the Cluster's own Events say what went, and `kubectl describe` shows them.
    m.kubectl(&["delete", "cluster", "obs", "--timeout=90s"]);
    // Events are sent beside the reconcile: the last may land just after the Cluster went.
    eventually("the Cluster's deletion told", 30, || {
        let reasons = event_reasons(&m, "Cluster", "obs");
        reasons.contains(&"SuccessfulDelete".into()) && reasons.contains(&"Deleted".into())
    });
    // The same Events through the events.k8s.io view, as kube-runtime's recorder wrote them.
    let notes = m.kubectl(&[
        "get",
        "events.events.k8s.io",
        "-n",
        "default",
        "--field-selector",
        "regarding.name=obs,regarding.kind=Cluster",
        "-o",
        "jsonpath={.items[*].note}",
    ]);
    assert!(
        notes.contains("Deleting MachineDeployment \"obs-md-0\""),
        "{notes}"
    );
    let listed = m.kubectl(&["get", "events", "-n", "default"]);
    assert!(listed.contains("machinedeployment/obs-md-0"), "{listed}");
    assert!(listed.contains("Scaled up MachineSet"), "{listed}");
    let after = scrape(&m);
    assert_eq!(
        after.sum("capi_cluster_status_phase", &[("name", "obs")]),
        0.0
    );
}

/// The audit log's lines, parsed.
fn audit_events(m: &Management) -> Vec<serde_json::Value> {
    let log = std::path::Path::new(&m.state()).join("audit.log");
    let raw = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    // A line being written as the file is read is left for the next read.
    let complete = &raw[..raw.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn the_audit_log_records_who_did_what_and_never_a_secrets_contents() {
    // Even a policy asking for request bodies of everything gets none of a Secret's.
    let m = Management::up_with_audit_policy(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"/healthz\", \"/readyz\"]\n- level: Request\n",
    );
    m.kubectl(&[
        "create",
        "secret",
        "generic",
        "provider-credentials",
        "--from-literal=token=hunter2-s3cret",
    ]);
    m.kubectl(&["get", "secret", "provider-credentials", "-o", "yaml"]);
    m.kubectl(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=colour=blue",
    ]);
    let alice = kubeconfig_of(&m, "alice", &["developers"]);
    let refused = m
        .kubectl_command(&["--kubeconfig", alice.to_str().unwrap(), "get", "secrets"])
        .output()
        .unwrap();
    assert!(!refused.status.success());

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (events, raw) = loop {
        let events = audit_events(&m);
        let raw =
            std::fs::read_to_string(std::path::Path::new(&m.state()).join("audit.log")).unwrap();
        if raw.contains("\"username\":\"alice\"") || std::time::Instant::now() > deadline {
            break (events, raw);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The forbidden request: who, what, and the refusal.
    let forbidden = events
        .iter()
        .find(|e| e["user"]["username"] == "alice" && e["objectRef"]["resource"] == "secrets")
        .unwrap_or_else(|| panic!("alice's request is not in the log:\n{raw}"));
    assert_eq!(forbidden["verb"], "list");
    assert_eq!(forbidden["responseStatus"]["code"], 403);
    assert_eq!(forbidden["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(
        forbidden["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("developers"))
    );
    assert_eq!(forbidden["apiVersion"], "audit.k8s.io/v1");
    assert!(forbidden["sourceIPs"][0].as_str().is_some());
    // The Secret's read is there, at Metadata, and its value is nowhere in the log.
    let read = events
        .iter()
        .find(|e| {
            e["verb"] == "get"
                && e["objectRef"]["resource"] == "secrets"
                && e["objectRef"]["name"] == "provider-credentials"
        })
        .unwrap_or_else(|| panic!("the Secret's read is not in the log:\n{raw}"));
    assert_eq!(read["level"], "Metadata");
    assert_eq!(read["user"]["username"], "capictl-admin");
    assert_eq!(read["responseStatus"]["code"], 200);
    assert!(
        !raw.contains("hunter2"),
        "a Secret's value reached the audit log"
    );
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode("hunter2-s3cret");
    assert!(
        !raw.contains(&encoded),
        "a Secret's value reached the audit log"
    );
    // Other bodies are recorded, as the policy asks; the health checks are not.
    let config = events
        .iter()
        .find(|e| {
            e["verb"] == "create"
                && e["objectRef"]["resource"] == "configmaps"
                && e["requestObject"]["metadata"]["name"] == "settings"
        })
        .unwrap_or_else(|| panic!("the ConfigMap's creation is not in the log:\n{raw}"));
    assert_eq!(config["level"], "Request");
    assert_eq!(config["requestObject"]["data"]["colour"], "blue");
    assert!(!raw.contains("\"requestURI\":\"/readyz\""));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(std::path::Path::new(&m.state()).join("audit.log"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// A plain HTTP GET of `path` on 127.0.0.1:`port`: the status code and the body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_string();
    Some((code, body))
}

#[test]
fn capictl_manager_serves_metrics_health_and_readiness() {
    let m = Management::up();
    let port = crate::common::free_port();
    let mut manager = std::process::Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(["manager", "--kubeconfig"])
        .arg(m.kubeconfig())
        .args(["--leader-election-namespace", "default"])
        .arg(format!("--metrics-bind-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let scrape = loop {
        if let Some((200, body)) = http_get(port, "/metrics") {
            let scrape = crate::common::prometheus::Scrape::parse(&body);
            let leading = scrape.sum(
                "leader_election_master_status",
                &[("name", "controller-leader-election-capictl")],
            );
            if leading == 1.0 {
                break scrape;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the manager did not serve metrics saying it leads"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Taking the Lease went through the measured client.
    assert!(scrape.sum("rest_client_requests_total", &[]) > 0.0);
    assert!(scrape.sum("rest_client_request_duration_seconds_count", &[]) > 0.0);
    assert_eq!(http_get(port, "/healthz").map(|r| r.0), Some(200));
    assert_eq!(http_get(port, "/readyz").map(|r| r.0), Some(200));
    let _ = manager.kill();
    let _ = manager.wait();

    // A bad address is refused at once, naming the flag.
    let refused = capictl(&[
        "manager",
        "--kubeconfig",
        m.kubeconfig().to_str().unwrap(),
        "--metrics-bind-address=nowhere",
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--metrics-bind-address \"nowhere\" is not an address"),
        "{}",
        text(&refused.stderr)
    );
}
