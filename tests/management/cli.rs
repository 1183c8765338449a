//! The command line as a user meets it: help, version, exit statuses, completion scripts,
//! `generate crds|yaml`, `config repositories`, `init list-images`.

use std::process::{Command, Output};

use crate::common::management::Management;

fn capictl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn help_lists_every_subcommand_with_a_description() {
    let out = capictl(&["--help"]);
    assert!(out.status.success());
    let help = stdout(&out);
    for sub in [
        "init",
        "generate",
        "describe",
        "get",
        "move",
        "convert",
        "upgrade",
        "delete",
        "management",
        "manager",
        "version",
        "completion",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{sub} ")))
            .unwrap_or_else(|| panic!("`{sub}` missing from --help:\n{help}"));
        assert!(
            line.split_whitespace().count() > 2,
            "`{sub}` has no description: {line}"
        );
    }
}

#[test]
fn without_a_management_cluster_commands_say_how_to_get_one() {
    let home = std::env::temp_dir().join(format!("capictl-cli-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(["get", "kubeconfig", "capi-quickstart"])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&home).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error: no management cluster: pass --kubeconfig, set $KUBECONFIG, or start the embedded one with `capictl management up`\n"
    );
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_bad_show_conditions_value_is_a_usage_error() {
    let out = capictl(&[
        "describe",
        "cluster",
        "c1",
        "--show-conditions",
        "all, Machine",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "Error: invalid --show-conditions value \"all, Machine\": whitespace is not allowed\n"
    );
}

#[test]
fn generate_provider_prints_what_init_installs() {
    let out = capictl(&["generate", "provider", "--infrastructure", "docker"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&out)).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "Namespace");
    assert_eq!(docs[0]["metadata"]["name"], "capd-system");
    for kind in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    assert!(
        docs.iter().all(
            |d| d["metadata"]["labels"]["cluster.x-k8s.io/provider"] == "infrastructure-docker"
        )
    );
    assert!(
        !kinds.contains(&"ValidatingWebhookConfiguration"),
        "the Docker provider has no admission webhooks"
    );
    // Its webhook server converts its CRDs between v1beta1 and v1beta2.
    let docker_cluster = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "dockerclusters.infrastructure.cluster.x-k8s.io")
        .unwrap();
    assert_eq!(
        docker_cluster["spec"]["conversion"]["webhook"]["clientConfig"]["service"],
        serde_json::json!({"name": "capd-webhook-service", "namespace": "capd-system", "path": "/convert", "port": 443})
    );

    // The kubeadm control plane's webhooks: a Service in front of the manager's port 9443,
    // configurations sending KubeadmControlPlanes to it, the certificate Secret mounted.
    let out = capictl(&["generate", "provider", "--control-plane", "kubeadm"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&out)).unwrap();
    let find = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap();
    let service = find("Service");
    assert_eq!(
        service["metadata"]["name"],
        "capi-kubeadm-control-plane-webhook-service"
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "webhook-server");
    for (kind, path) in [
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ] {
        let webhook = &find(kind)["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"]["service"],
            serde_json::json!({"name": "capi-kubeadm-control-plane-webhook-service", "namespace": "capi-kubeadm-control-plane-system", "path": path, "port": 443})
        );
        assert_eq!(webhook["rules"][0]["resources"][0], "kubeadmcontrolplanes");
        assert_eq!(webhook["failurePolicy"], "Fail");
    }
    let pod = &find("Deployment")["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--webhook-port=9443"), "{args:?}");
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "capi-kubeadm-control-plane-webhook-service-cert"
    );

    let unknown = capictl(&["generate", "provider", "--infrastructure", "aws"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        stderr(&unknown),
        "Error: there is no InfrastructureProvider named \"aws\"; capictl has docker, in-memory\n"
    );
}

#[test]
fn delete_wants_all_or_named_providers() {
    for args in [
        &["delete"][..],
        &["delete", "--all", "--infrastructure", "docker"],
    ] {
        let out = capictl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr(&out),
            "Error: say which providers to delete: --all, or --core, --bootstrap, --control-plane and --infrastructure with their names (not both); a workload cluster goes with `capictl delete cluster NAME`\n"
        );
    }
}

#[test]
fn a_bad_flag_value_is_a_usage_error() {
    let out = capictl(&["generate", "crds", "--provider", "aws"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("invalid value 'aws'") && err.contains("in-memory"),
        "{err}"
    );
}

#[test]
fn version_names_the_build_and_the_contract() {
    let text = stdout(&capictl(&["version"]));
    assert!(
        text.starts_with(&format!("capictl version {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(
        text.contains("git commit:") && text.contains("build date:"),
        "{text}"
    );
    assert!(text.contains("cluster.x-k8s.io/v1beta2"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&capictl(&["version", "-o", "json"]))).unwrap();
    assert_eq!(json["contract"], "v1beta2");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert!(json["buildDate"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn completion_scripts_in_the_repository_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, file) in [
        ("bash", "capictl.bash"),
        ("zsh", "_capictl"),
        ("fish", "capictl.fish"),
    ] {
        let out = capictl(&["completion", shell]);
        assert!(out.status.success());
        let committed = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(
            stdout(&out) == committed,
            "completions/{file} is stale: run `capictl completion {shell} > completions/{file}`"
        );
    }
}

#[test]
fn generate_crds_prints_one_provider_or_all() {
    let all: Vec<serde_json::Value> =
        capictl::yaml::from_multiple(&stdout(&capictl(&["generate", "crds"]))).unwrap();
    assert_eq!(all.len(), 32);
    assert!(all.iter().all(|d| d["kind"] == "CustomResourceDefinition"));

    let docker: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&capictl(&[
        "generate",
        "crds",
        "--provider",
        "docker",
    ])))
    .unwrap();
    let names: Vec<&str> = docker
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "dockerclusters.infrastructure.cluster.x-k8s.io",
            "dockerclustertemplates.infrastructure.cluster.x-k8s.io",
            "dockermachines.infrastructure.cluster.x-k8s.io",
            "dockermachinetemplates.infrastructure.cluster.x-k8s.io",
            "devclusters.infrastructure.cluster.x-k8s.io",
            "devclustertemplates.infrastructure.cluster.x-k8s.io",
            "devmachines.infrastructure.cluster.x-k8s.io",
            "devmachinetemplates.infrastructure.cluster.x-k8s.io",
            "devmachinepools.infrastructure.cluster.x-k8s.io",
            "devmachinepooltemplates.infrastructure.cluster.x-k8s.io",
            "dockermachinepools.infrastructure.cluster.x-k8s.io",
            "dockermachinepooltemplates.infrastructure.cluster.x-k8s.io",
        ]
    );

    let two: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&capictl(&[
        "generate",
        "crds",
        "--provider",
        "core,clusterctl",
    ])))
    .unwrap();
    assert_eq!(two.len(), 12);
}

fn capictl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capictl"));
    c.args(args)
        .env_remove("KUBERNETES_VERSION")
        .env("HOME", std::env::temp_dir().join("capictl-cli-test-home"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn generate_cluster_renders_the_flavors() {
    for (flavor, args) in [
        ("docker-development", vec!["--flavor", "development"]),
        ("docker-development-mp", vec!["--flavor", "development-mp"]),
        ("docker-default", vec![]),
        ("in-memory", vec!["--infrastructure", "in-memory"]),
    ] {
        let mut all = vec![
            "generate",
            "cluster",
            "capi-quickstart",
            "--kubernetes-version",
            "v1.28.13",
        ];
        all.extend([
            "--control-plane-machine-count",
            "3",
            "--worker-machine-count",
            "3",
            "-n",
            "team-a",
        ]);
        all.extend(args);
        let out = capictl_env(&all, &[]);
        assert!(out.status.success(), "{flavor}: {}", stderr(&out));
        insta::assert_snapshot!(format!("generate-cluster-{flavor}"), stdout(&out));
    }
}

#[test]
fn generate_cluster_lists_variables_as_clusterctl_does() {
    let template = crate::common::upstream("templates/cluster-template-development.yaml");
    let out = capictl_env(
        &[
            "generate",
            "cluster",
            "capi-quickstart",
            "--from",
            template.to_str().unwrap(),
            "--list-variables",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Required Variables:\n  - KUBERNETES_VERSION\n\nOptional Variables:\n  - CLUSTER_NAME                   (defaults to capi-quickstart)\n  - CONTROL_PLANE_MACHINE_COUNT    (defaults to 1)\n  - NAMESPACE                      (defaults to current Namespace in the KubeConfig file)\n  - POD_CIDR                       (defaults to \"[\\\"192.168.0.0/16\\\"]\")\n  - POD_SECURITY_STANDARD_ENABLED  (defaults to \"true\")\n  - SERVICE_CIDR                   (defaults to \"[\\\"10.128.0.0/12\\\"]\")\n  - SERVICE_DOMAIN                 (defaults to \"cluster.local\")\n  - WORKER_MACHINE_COUNT           (defaults to 0)\n\n"
    );
}

#[test]
fn generate_cluster_renders_upstreams_templates_and_takes_values_from_the_environment() {
    let template = crate::common::upstream("templates/cluster-template-in-memory.yaml");
    let out = capictl_env(
        &[
            "generate",
            "cluster",
            "sim",
            "--from",
            template.to_str().unwrap(),
            "-n",
            "ns1",
            "--worker-machine-count",
            "5",
        ],
        &[
            ("KUBERNETES_VERSION", "v1.30.4"),
            ("POD_CIDR", "[\"10.0.0.0/16\"]"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&out)).unwrap();
    let cluster = &docs[0];
    assert_eq!(
        cluster["metadata"],
        serde_json::json!({"name": "sim", "namespace": "ns1"})
    );
    assert_eq!(cluster["spec"]["topology"]["version"], "v1.30.4");
    assert_eq!(
        cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"],
        5
    );
    assert_eq!(cluster["spec"]["topology"]["controlPlane"]["replicas"], 1);
    assert_eq!(
        cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
        serde_json::json!(["10.0.0.0/16"])
    );
    assert_eq!(
        cluster["spec"]["clusterNetwork"]["serviceDomain"],
        "cluster.local"
    );
}

#[test]
fn generate_cluster_errors_say_what_to_do() {
    for (args, code, message) in [
        (
            vec!["generate", "cluster", "demo"],
            1,
            "value for variables [KUBERNETES_VERSION] is not set. Please set the value using os environment variables or the clusterctl config file",
        ),
        (
            vec![
                "generate",
                "cluster",
                "Demo_1",
                "--kubernetes-version",
                "v1.30.0",
            ],
            2,
            "invalid cluster name \"Demo_1\"",
        ),
        (
            vec![
                "generate",
                "cluster",
                "demo",
                "--kubernetes-version",
                "1.30",
            ],
            2,
            "invalid --kubernetes-version \"1.30\": use a semantic version such as v1.30.4",
        ),
        (
            vec![
                "generate",
                "cluster",
                "demo",
                "--flavor",
                "nope",
                "--kubernetes-version",
                "v1.30.0",
            ],
            2,
            "the docker provider has no flavor \"nope\"; it has: (default), development",
        ),
        (
            vec![
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                "aws",
                "--kubernetes-version",
                "v1.30.0",
            ],
            2,
            "unknown infrastructure provider \"aws\"; use docker or in-memory",
        ),
        (
            vec![
                "generate",
                "cluster",
                "demo",
                "--worker-machine-count",
                "-1",
                "--kubernetes-version",
                "v1.30.0",
            ],
            2,
            "--worker-machine-count must be 0 or more",
        ),
    ] {
        let out = capictl_env(&args, &[]);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(message), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn generate_provider_needs_a_provider_and_takes_its_image_and_namespace() {
    // The usage line offers --image and --target-namespace; alone they are a usage error,
    // never a crash.
    for alone in [&["--image", "foo"][..], &["--target-namespace", "x"][..]] {
        let mut args = vec!["generate", "provider"];
        args.extend_from_slice(alone);
        let out = capictl(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--infrastructure <NAME>"),
            "{args:?} names what is missing: {}",
            stderr(&out)
        );
    }
    let out = capictl(&[
        "generate",
        "provider",
        "-i",
        "docker",
        "--image",
        "registry.example/capictl:dev",
        "--target-namespace",
        "capd",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let yaml = stdout(&out);
    assert!(
        yaml.contains("image: registry.example/capictl:dev"),
        "{yaml}"
    );
    assert!(yaml.contains("namespace: capd"), "{yaml}");
}

#[test]
fn clusterctls_backup_restore_and_verbosity_are_understood() {
    for (command, replacements) in [
        (
            "backup",
            [
                "capictl move --to-directory DIR",
                "capictl management backup FILE",
            ],
        ),
        (
            "restore",
            [
                "capictl move --from-directory DIR",
                "capictl management restore FILE",
            ],
        ),
    ] {
        let out = capictl(&[command, "--directory", "/tmp/backup"]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        for replacement in replacements {
            assert!(
                stderr(&out).contains(replacement),
                "{command}: {}",
                stderr(&out)
            );
        }
    }
    // clusterctl's `-v N`, anywhere on the line.
    for args in [&["-v", "5", "version"][..], &["version", "--v=2"][..]] {
        let out = capictl(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    // Logs into a pipe carry no colour codes.
    let out = capictl_env(
        &[
            "-vv",
            "get",
            "kubeconfig",
            "c1",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
}

#[test]
fn output_cut_short_by_its_reader_is_not_an_error() {
    // The reader leaves at once (`| head -1`); capictl stops quietly with success.
    let cut_short = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capictl"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    };
    cut_short(&["generate", "crds"]);
    // The same where the lines are printed one by one.
    let dir = std::env::temp_dir().join(format!("capictl-cut-{}", std::process::id()));
    cut_short(&["management", "status", "--dir", dir.to_str().unwrap()]);
}

/// Commands that start something long-lived (a server, the controllers, a cluster, an image
/// build) are only parsed, not run, by the walk below.
const STARTS_SOMETHING: [&str; 6] = [
    "quickstart",
    "management up",
    "management serve",
    "manager",
    "images build",
    "node",
];

/// Every way to call every subcommand with one of its flags: the subcommand's path, a value
/// for each positional it requires, then the flag with a value (each of its possible values,
/// else "1" and "x"); and once with every flag at once.
fn argument_lines() -> Vec<Vec<String>> {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, path: Vec<String>, lines: &mut Vec<Vec<String>>) {
        if command.has_subcommands() {
            for sub in command.get_subcommands() {
                let mut path = path.clone();
                path.push(sub.get_name().to_string());
                walk(sub, path, lines);
            }
            return;
        }
        let mut base = path.clone();
        base.extend(
            command
                .get_positionals()
                .filter(|a| a.is_required_set())
                .map(|_| "x".to_string()),
        );
        let flags: Vec<&clap::Arg> = command
            .get_arguments()
            .filter(|a| !a.is_positional())
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
            .collect();
        let spelled = |a: &clap::Arg| match a.get_long() {
            Some(long) => format!("--{long}"),
            None => format!("-{}", a.get_short().unwrap()),
        };
        let values = |a: &clap::Arg| -> Vec<Option<String>> {
            if !a.get_action().takes_values() {
                return vec![None];
            }
            let possible = a.get_possible_values();
            if possible.is_empty() {
                vec![Some("1".into()), Some("x".into())]
            } else {
                possible
                    .iter()
                    .map(|p| Some(p.get_name().to_string()))
                    .collect()
            }
        };
        lines.push(base.clone());
        let mut all = base.clone();
        for flag in &flags {
            for value in values(flag) {
                let mut line = base.clone();
                line.push(spelled(flag));
                line.extend(value);
                lines.push(line);
            }
            all.push(spelled(flag));
            all.extend(values(flag).swap_remove(0));
        }
        lines.push(all);
    }
    let mut lines = Vec::new();
    walk(&capictl::cli::Cli::command(), Vec::new(), &mut lines);
    lines
}

/// No argument combination reaches a panic (exit 101): each line parses to a command or a
/// usage error, and each one that starts nothing long-lived runs to an answer or an error,
/// with no management cluster, kubeconfig or Docker Engine there.
#[test]
fn no_subcommand_or_flag_panics() {
    use clap::{CommandFactory, Parser};
    capictl::cli::Cli::command().debug_assert();
    let lines = argument_lines();
    assert!(lines.len() > 200, "the walk found {} lines", lines.len());
    let home = std::env::temp_dir().join(format!("capictl-walk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let mut ran = 0;
    for line in &lines {
        let argv = std::iter::once("capictl".to_string()).chain(line.iter().cloned());
        let parsed = std::panic::catch_unwind(|| capictl::cli::Cli::try_parse_from(argv).is_ok());
        assert!(
            parsed.is_ok(),
            "parsing `capictl {}` panicked",
            line.join(" ")
        );
        let joined = line.join(" ");
        if STARTS_SOMETHING.iter().any(|s| joined.starts_with(s))
            // init --yes starts the embedded management cluster.
            || (line[0] == "init" && line.iter().any(|a| a == "--yes"))
        {
            continue;
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_capictl"))
            .args(line)
            .current_dir(&home)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .env(
                "DOCKER_HOST",
                format!("unix://{}", home.join("no-engine.sock").display()),
            )
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_VERSION")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Read as it comes, so a chatty command never blocks on a full pipe.
        let mut stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("`capictl {joined}` ran for a minute with nothing to talk to");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let err = reader.join().unwrap();
        assert!(
            status.code() != Some(101) && !err.contains("panicked"),
            "`capictl {joined}` panicked ({status}):\n{err}"
        );
        ran += 1;
    }
    eprintln!("{} lines parsed, {ran} run", lines.len());
    assert!(ran > 150, "only {ran} lines ran");
    let _ = std::fs::remove_dir_all(&home);
}

/// Errors name the server, file or context they are about, once, with no log line before
/// them; hints repeat the flags the user gave.
#[test]
fn errors_name_what_they_are_about_and_hints_repeat_the_flags() {
    let home = std::env::temp_dir().join(format!("capictl-errors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str], kubeconfig_env: Option<&std::path::Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_capictl"));
        c.args(args)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("CAPICTL_LOG");
        match kubeconfig_env {
            Some(path) => c.env("KUBECONFIG", path),
            None => c.env_remove("KUBECONFIG"),
        };
        c.output().unwrap()
    };
    // A server that is not there: a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = home.join("stopped.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}\ncontexts:\n- name: mgmt\n  context: {{cluster: c, user: u}}\n- name: other\n  context: {{cluster: c, user: u}}\ncurrent-context: mgmt\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let path = kubeconfig.to_str().unwrap();
    let out = run(&["describe", "cluster", "c1", "--kubeconfig", path], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "Error: the management cluster at https://127.0.0.1:{port}/ does not answer: Connection refused (os error 111)\n"
        ),
        "one line, naming the server, no log line and no colour codes"
    );
    let out = run(
        &[
            "describe",
            "cluster",
            "c1",
            "--kubeconfig",
            path,
            "--kubeconfig-context",
            "nope",
        ],
        None,
    );
    assert_eq!(
        stderr(&out),
        format!(
            "Error: the kubeconfig {path} has no context \"nope\": --kubeconfig-context takes one of mgmt, other\n"
        )
    );
    let out = run(
        &["describe", "cluster", "c1", "--kubeconfig-context", "nope"],
        Some(&kubeconfig),
    );
    assert!(
        stderr(&out).contains(&format!("$KUBECONFIG ({path}) has no context \"nope\"")),
        "{}",
        stderr(&out)
    );
    let missing = home.join("gone.kubeconfig");
    let out = run(&["describe", "cluster", "c1"], Some(&missing));
    assert!(
        stderr(&out).contains(&format!(
            "$KUBECONFIG names {}, which does not exist",
            missing.display()
        )),
        "{}",
        stderr(&out)
    );
    let out = run(
        &[
            "management",
            "status",
            "--dir",
            home.join("mc").to_str().unwrap(),
        ],
        None,
    );
    assert!(
        stdout(&out).contains(&format!(
            "`capictl management up --dir {}`",
            home.join("mc").display()
        )),
        "{}",
        stdout(&out)
    );
    // clusterctl's `-c` is a flag of its own; `--color=false` turns colour off.
    for color in ["-c", "--color=false", "-c=true"] {
        let out = run(
            &["describe", "cluster", "c1", color, "--kubeconfig", path],
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{color}: {}", stderr(&out));
    }
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn convert_turns_v1beta1_yaml_into_v1beta2_and_back_and_names_bad_fields() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/testdata/v1beta1-standard-ha.yaml"
    );
    let up = capictl(&["convert", "-f", fixture]);
    assert!(up.status.success(), "{}", stderr(&up));
    let hub = stdout(&up);
    insta::assert_snapshot!("convert-v1beta1-to-v1beta2", hub);

    let dir = std::env::temp_dir().join(format!("capictl-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hub_file = dir.join("hub.yaml");
    std::fs::write(&hub_file, &hub).unwrap();
    let down = capictl(&[
        "convert",
        "-f",
        hub_file.to_str().unwrap(),
        "--to",
        "v1beta1",
    ]);
    assert!(down.status.success(), "{}", stderr(&down));
    let back: Vec<serde_json::Value> = capictl::yaml::from_multiple(&stdout(&down)).unwrap();
    let original: Vec<serde_json::Value> =
        capictl::yaml::from_multiple(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    assert_eq!(
        back, original,
        "v1beta1 → v1beta2 → v1beta1 gives back the file"
    );

    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\n---\napiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineHealthCheck\nmetadata: {name: mhc}\nspec:\n  clusterName: c\n  nodeStartupTimeout: soon\n",
    )
    .unwrap();
    let out = capictl(&["convert", "-f", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "",
        "nothing is written when a document cannot be converted"
    );
    assert_eq!(
        stderr(&out).trim(),
        "Error: document 2 (MachineHealthCheck \"mhc\"): spec.nodeStartupTimeout: \"soon\" is not a duration (write it as Go does: 90s, 1m30s, 1h)"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_repositories_lists_the_built_in_providers() {
    let text = capictl(&["config", "repositories"]);
    assert!(text.status.success(), "{}", stderr(&text));
    let version = env!("CARGO_PKG_VERSION");
    insta::assert_snapshot!(
        "config-repositories",
        stdout(&text).replace(version, "VERSION")
    );
    let yaml = capictl(&["config", "repositories", "-o", "yaml"]);
    let rows: Vec<serde_json::Value> = capictl::yaml::from_str(&stdout(&yaml)).unwrap();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0]["Name"], "cluster-api");
    assert_eq!(rows[0]["ProviderType"], "CoreProvider");
    assert_eq!(rows[0]["File"], "core-components.yaml");
    let bad = capictl(&["config", "repositories", "-o", "json"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("invalid value 'json'"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn init_list_images_prints_what_the_components_run() {
    let out = capictl(&["init", "list-images", "--infrastructure", "docker"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{}\n", capictl::build_info::controller_image())
    );
    let custom = capictl(&[
        "init",
        "list-images",
        "--image",
        "registry.local/capictl:dev",
    ]);
    insta::assert_snapshot!("init-list-images-custom", stdout(&custom));
    let unknown = capictl(&["init", "list-images", "-i", "aws"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
}

#[test]
fn generate_yaml_fills_any_yaml_and_lists_its_variables() {
    let dir = std::env::temp_dir().join(format!("capictl-generate-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cni.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${NAME}\n  namespace: ${NAMESPACE:=kube-system}\ndata:\n  mtu: \"${MTU}\"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ${NAME}-system}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let out = capictl_env(
        &["generate", "yaml", "--from", path],
        &[("NAME", "cni"), ("MTU", "1450")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("generate-yaml", stdout(&out));
    let listed = capictl(&["generate", "yaml", "--from", path, "--list-variables"]);
    assert_eq!(
        stdout(&listed),
        "Variables:\n  - MTU\n  - NAME\n  - NAMESPACE\n"
    );
    let missing = capictl_env(&["generate", "yaml", "--from", path], &[("NAME", "cni")]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("value for variables [MTU] is not set"),
        "{}",
        stderr(&missing)
    );
    assert_eq!(
        stdout(&missing),
        "",
        "nothing is printed when a variable is missing"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn generate_cluster_takes_its_template_from_a_config_map() {
    let m = Management::up();
    let template = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME}\nspec:\n  topology:\n    version: ${KUBERNETES_VERSION}\n    classRef: {name: quick-start}\n";
    let map = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "templates", "namespace": "default"},
        "data": {"template": template, "other": template},
    });
    m.kubectl_in(&["apply", "-f", "-"], Some(&map.to_string()));
    let kubeconfig = m.kubeconfig().display().to_string();
    let generate = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "cluster",
            "c1",
            "--kubeconfig",
            &kubeconfig,
            "-n",
            "team-a",
            "--kubernetes-version",
            "v1.30.4",
        ];
        args.extend(extra);
        capictl(&args)
    };
    let out = generate(&["--from-config-map", "templates"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("generate-cluster-from-config-map", stdout(&out));
    let other_key = generate(&[
        "--from-config-map",
        "templates",
        "--from-config-map-key",
        "other",
    ]);
    assert_eq!(stdout(&other_key), stdout(&out));
    let no_key = generate(&[
        "--from-config-map",
        "templates",
        "--from-config-map-key",
        "nope",
    ]);
    assert_eq!(no_key.status.code(), Some(2));
    assert!(
        stderr(&no_key)
            .contains("the ConfigMap default/templates does not have the \"nope\" data key"),
        "{}",
        stderr(&no_key)
    );
    let two = generate(&["--from-config-map", "templates", "--flavor", "development"]);
    assert_eq!(two.status.code(), Some(2));
    assert!(
        stderr(&two).contains("only one template can be used at time"),
        "{}",
        stderr(&two)
    );
    let none = generate(&["--from-config-map", "missing"]);
    assert!(
        stderr(&none).contains("there is no ConfigMap default/missing"),
        "{}",
        stderr(&none)
    );
}
